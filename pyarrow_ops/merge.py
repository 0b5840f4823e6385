"""Merging several time-sorted inputs into one deterministic stream."""

from __future__ import annotations

from collections.abc import Iterable

import pyarrow as pa

from pyarrow_ops import _engine
from pyarrow_ops.io import Input, Result, as_input_list, as_streams
from pyarrow_ops.lateness import Late, LateLog, Lateness, bounds, within

DEFAULT_BATCH_SIZE = 65536


def merge(
    inputs: Input | Iterable[Input], *, time: str, batch_size: int = DEFAULT_BATCH_SIZE,
    threads: int | None = None, lateness: Lateness = None, late: Late = "error",
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
        threads: threads merging (default: cores); every count gives the same result.
        lateness: how far each input may be out of time order: an int in the time column's unit or
            a ``datetime.timedelta``, for every input or a list with one per input (None: that
            input must be sorted). Each input is put back in time order (equal times in arrival
            order) before the merge; docs/time.md has the exact rule.
        late: what happens to a row later than its input's ``lateness`` allows: ``"error"`` (an
            :class:`UnsortedInputError` naming the input, row and times), ``"drop"`` (left out,
            counted in ``result.late_counts``), ``"side"`` (also kept: ``result.late``). Without
            ``lateness`` a policy other than ``"error"`` means a bound of 0: rows out of order are
            late.

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
        streams = as_streams(items, time)
        log = None
        if streams and (lateness is not None or late != "error"):
            schema = pa.schema(streams[0])
            if time not in schema.names:
                raise _engine.InvalidInputError(
                    f"time column '{time}' not found in input 0; its columns are: {', '.join(schema.names)}")
            log = LateLog(schema, late, len(streams))
            streams = within(streams, time, bounds(lateness, late, len(streams), schema.field(time).type), log)
        else:
            bounds(lateness, late, len(streams), pa.int64())  # checks the arguments alone
        result = Result(_engine.merge(streams, time, batch_size, threads or 0))
        if log is not None:
            result._late_logs.append(log)
        return result
    finally:
        for stream in streams:  # those merge took are already closed; the rest are released now
            stream.close()
