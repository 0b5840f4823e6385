"""pyarrow-ops: Arrow-native streaming operators with a C++ core.

Ordered, deterministic results over one or many time-sorted inputs, with Arrow in and Arrow out
and no copies on the way.

>>> import pyarrow as pa, pyarrow_ops as po
>>> po.merge([pa.table({"t": [1, 4]}), pa.table({"t": [2, 3]})], time="t").to_arrow()["t"].to_pylist()
[1, 2, 3, 4]
"""

from pyarrow_ops import errors
from pyarrow_ops.errors import *  # noqa: F403 (the exception classes, listed in errors.__all__)
from pyarrow_ops.io import Result
from pyarrow_ops.merge import merge

__version__ = "0.1.0"

__all__ = ["Result", "merge", *errors.__all__]
