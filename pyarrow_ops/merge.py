"""Merging several time-sorted inputs into one deterministic stream."""

from __future__ import annotations

from collections.abc import Iterable

from pyarrow_ops import _engine
from pyarrow_ops.io import Input, Result, as_input_list, as_streams

DEFAULT_BATCH_SIZE = 65536


def merge(
    inputs: Input | Iterable[Input], *, time: str, batch_size: int = DEFAULT_BATCH_SIZE,
    threads: int | None = None,
) -> Result:
    """Merges time-sorted inputs into one stream in the merged order.

    The merged order sorts tuples by ``(time, input index, position in the input)``: equal times
    come out in the order of the inputs in the list, and within one input in their own order, so
    the result never depends on timing or batch sizes. Inputs are read lazily, one batch at a time.

    Args:
        inputs: a list of inputs, each a pyarrow Table / RecordBatch / RecordBatchReader, a Polars
            DataFrame, any object with ``__arrow_c_stream__`` or ``__arrow_c_array__``, a Parquet
            file path, or an iterable of record batches. All must have the same column names and
            types. A single Arrow object or path is one input.
        time: the time column: timestamp (any unit, any time zone), date32, int32 or int64. Each
            input must be sorted by it (non-decreasing) and have no nulls in it.
        batch_size: the most rows per output batch the merge builds. Long runs of rows from one
            input leave as zero-copy slices of that input's batches instead, and a single input
            passes through unchanged.

    Returns:
        A :class:`Result`: read it with ``to_arrow()``, ``to_polars()``, by iterating, or hand it
        to anything that reads Arrow streams.

    Raises:
        UnsortedInputError / NullTimeError: while reading, naming the input, row and values; no
            tuple is emitted past the bad one.
        SchemaMismatchError: inputs whose columns differ; names the input and the column.
        UnsupportedTypeError: a column of a type the engine does not handle.
        InvalidInputError: a missing or non-temporal time column, or a bad argument.

    >>> import pyarrow as pa, pyarrow_ops as po
    >>> a = pa.table({"t": [1, 2, 2], "v": ["a1", "a2", "a3"]})
    >>> b = pa.table({"t": [0, 2, 5], "v": ["b1", "b2", "b3"]})
    >>> po.merge([a, b], time="t").to_arrow()["v"].to_pylist()
    ['b1', 'a1', 'a2', 'a3', 'b2', 'b3']
    """
    if not isinstance(time, str):
        raise TypeError(f"time must be a column name (str), got {type(time).__name__}")
    if isinstance(batch_size, bool) or not isinstance(batch_size, int):
        raise TypeError(f"batch_size must be an int, got {type(batch_size).__name__}")
    if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int)):
        raise TypeError(f"threads must be an int or None, got {type(threads).__name__}")
    if threads is not None and threads < 1:
        raise ValueError(f"threads must be at least 1, got {threads}")
    items = as_input_list(inputs)
    streams: list[_engine.Stream] = []
    try:
        streams = as_streams(items)
        return Result(_engine.merge(streams, time, batch_size, threads or 0))
    finally:
        for stream in streams:  # those merge took are already closed; the rest are released now
            stream.close()
