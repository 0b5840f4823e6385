"""Plain-Python references and random data for the differential tests."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

SUPPORTED_TYPES = [
    pa.bool_(),
    pa.int8(), pa.int16(), pa.int32(), pa.int64(),
    pa.uint8(), pa.uint16(), pa.uint32(), pa.uint64(),
    pa.float32(), pa.float64(),
    pa.timestamp("s"), pa.timestamp("ms", tz="UTC"), pa.timestamp("us", tz="Asia/Tokyo"),
    pa.timestamp("ns"),
    pa.date32(),
    pa.string(), pa.large_string(),
]
TIME_TYPES = [pa.int64(), pa.int32(), pa.date32(), pa.timestamp("ms", tz="UTC"), pa.timestamp("ns")]
_ALPHABET = list("abcxyz é漢😀")


def random_column(type_: pa.DataType, n: int, rng: np.random.Generator, null_rate: float) -> pa.Array:
    mask = rng.random(n) < null_rate if null_rate > 0 else None
    if pa.types.is_boolean(type_):
        values = rng.random(n) < 0.5
    elif pa.types.is_integer(type_):
        info = np.iinfo(type_.to_pandas_dtype())
        values = rng.integers(info.min, info.max, n, dtype=type_.to_pandas_dtype(), endpoint=True)
    elif pa.types.is_floating(type_):
        values = (rng.standard_normal(n) * 1e3).astype(type_.to_pandas_dtype())
    elif pa.types.is_timestamp(type_):
        return pa.array(rng.integers(-(2**40), 2**40, n), pa.int64(), mask=mask).cast(type_)
    elif pa.types.is_date32(type_):
        return pa.array(rng.integers(-50000, 50000, n).astype(np.int32), pa.int32(), mask=mask).cast(type_)
    else:
        values = ["".join(rng.choice(_ALPHABET, rng.integers(0, 6))) for _ in range(n)]
        return pa.array(values, type_, mask=mask)
    return pa.array(values, type_, mask=mask)


def sorted_times(type_: pa.DataType, n: int, rng: np.random.Generator, spread: int) -> pa.Array:
    """Non-decreasing values with many ties."""
    values = np.cumsum(rng.integers(0, spread + 1, n)) + rng.integers(0, 3)
    return pa.array(values.astype(np.int32 if type_.bit_width == 32 else np.int64)).cast(type_)


def split(table: pa.Table, rng: np.random.Generator, max_rows: int) -> list[pa.RecordBatch]:
    """Random batch boundaries, empty batches included."""
    out, start = [], 0
    while start < table.num_rows:
        length = int(rng.integers(0, max_rows + 1))
        out.extend(table.slice(start, length).to_batches() or [pa.RecordBatch.from_pylist([], table.schema)])
        start += length
    return out


def reference_merge(tables: list[pa.Table], time: str) -> pa.Table:
    """The merged order by its definition: sort every row by (time, input index, position)."""
    keys = []
    for i, t in enumerate(tables):
        column = t.column(time)
        raw = column.cast(pa.int32() if pa.types.is_date32(column.type) else pa.int64())
        keys.extend((value, i, pos) for pos, value in enumerate(raw.to_pylist()))
    order = sorted(range(len(keys)), key=keys.__getitem__)
    combined = pa.concat_tables(tables)
    return combined.take(pa.array(order, pa.int64()))
