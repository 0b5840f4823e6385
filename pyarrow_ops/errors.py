"""Exceptions pyarrow-ops raises.

Every one derives from :class:`PyArrowOpsError`, and also from the built-in exception a Python user
would expect (``ValueError`` for bad data, ``TypeError`` for bad types), so both
``except PyArrowOpsError`` and ``except ValueError`` work. Messages name the input (by its index
in the list you passed), the row (0-based, counted across that input's batches) and the values.

>>> import pyarrow as pa, pyarrow_ops as po
>>> late = pa.table({"t": [3, 1]})
>>> try:
...     po.merge([late], time="t").to_arrow()
... except po.UnsortedInputError as e:
...     print(e)
input 0 is not sorted by 't': row 1 has 1, earlier than 3 at row 0
"""

from pyarrow_ops._engine import (
    InputFailedError,
    InvalidInputError,
    NullTimeError,
    PyArrowOpsError,
    SchemaMismatchError,
    UnsortedInputError,
    UnsupportedTypeError,
    UsageError,
)

__all__ = [
    "InputFailedError",
    "InvalidInputError",
    "NullTimeError",
    "PyArrowOpsError",
    "SchemaMismatchError",
    "UnsortedInputError",
    "UnsupportedTypeError",
    "UsageError",
]
