"""Plain-Python references and random data for the differential tests."""

from __future__ import annotations

import math
from fractions import Fraction

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


# --- Windowed aggregation ------------------------------------------------------------------------

_AGG_FUNCTIONS = ("count", "sum", "mean", "min", "max", "first", "last")
_INT64_MOD = 2**64


def _storage_type(type_: pa.DataType) -> pa.DataType | None:
    """The integer type a temporal type is stored as (None for types used as they are)."""
    if pa.types.is_timestamp(type_):
        return pa.int64()
    if pa.types.is_date32(type_):
        return pa.int32()
    return None


def _py_values(column) -> list:
    """Python values of a column; timestamps and dates as their stored integers (exact, any unit)."""
    storage = _storage_type(column.type)
    return (column.cast(storage) if storage is not None else column).to_pylist()


def _to_arrow(values: list, type_: pa.DataType) -> pa.Array:
    """Inverse of _py_values."""
    storage = _storage_type(type_)
    if storage is not None:
        return pa.array(values, storage).cast(type_)
    return pa.array(values, type_)


def _order_key(value, type_: pa.DataType) -> tuple:
    """Ascending order of one key value: values, then NaN (floats), then null.

    Strings compare by their UTF-8 bytes, bools False < True, floats numerically (so 0.0 and -0.0 are
    one key). The tuple doubles as the value's identity when grouping (NaN is one key, unlike nan != nan).
    """
    if value is None:
        return (2,)
    if pa.types.is_floating(type_) and math.isnan(value):
        return (1,)
    if isinstance(value, str):
        return (0, value.encode("utf-8"))
    if isinstance(value, bool):
        return (0, int(value))
    return (0, value)


def _minmax_key(value, type_: pa.DataType) -> tuple:
    """Order for min/max over non-null values: numbers, -0.0 before 0.0, then NaN (the largest)."""
    if pa.types.is_floating(type_):
        if math.isnan(value):
            return (1,)
        return (0, value, math.copysign(1.0, value))
    return (0, int(value) if isinstance(value, bool) else value)


def _wrap(total: int, type_: pa.DataType) -> int:
    """An exact integer sum wrapped like numpy: two's complement int64, or mod 2**64 for unsigned."""
    total %= _INT64_MOD
    if pa.types.is_signed_integer(type_) and total >= 2**63:
        total -= _INT64_MOD
    return total


def _agg_output_type(function: str, type_: pa.DataType | None) -> pa.DataType:
    if function == "count":
        return pa.int64()
    if function == "mean":
        if not (pa.types.is_integer(type_) or pa.types.is_floating(type_)):
            raise TypeError(f"mean() of {type_} is not supported")
        return pa.float64()
    if function == "sum":
        if pa.types.is_signed_integer(type_):
            return pa.int64()
        if pa.types.is_unsigned_integer(type_):
            return pa.uint64()
        if pa.types.is_floating(type_):
            return pa.float64()
        raise TypeError(f"sum() of {type_} is not supported")
    if function in ("min", "max"):
        if not (
            pa.types.is_integer(type_) or pa.types.is_floating(type_) or pa.types.is_boolean(type_)
            or pa.types.is_timestamp(type_) or pa.types.is_date32(type_)
        ):
            raise TypeError(f"{function}() of {type_} is not supported")
        return type_
    return type_  # first, last


def exact_float_sum(values: list[float]) -> float:
    """The exact sum of doubles rounded once to nearest, ties to even (docs/semantics.md): NaN if a NaN
    or both infinities are present, else the infinity present, else the exact rational sum's nearest
    double (an infinity beyond the range). Fractions, so nothing here rounds before the end."""
    if any(math.isnan(v) for v in values) or (math.inf in values and -math.inf in values):
        return math.nan
    if math.inf in values or -math.inf in values:
        return math.inf if math.inf in values else -math.inf
    total = sum((Fraction(v) for v in values), Fraction(0))
    try:
        return float(total)  # int / int in CPython: correctly rounded
    except OverflowError:
        return math.inf if total > 0 else -math.inf


def _aggregate_values(function: str, values: list, type_: pa.DataType | None):
    """One aggregate over the values of one (window, key), given in the merged order."""
    if function == "count":
        return len(values) if type_ is None else sum(v is not None for v in values)
    if function == "first":
        return values[0]
    if function == "last":
        return values[-1]
    present = [v for v in values if v is not None]
    if not present:
        return None
    if function in ("sum", "mean"):
        if pa.types.is_floating(type_):
            total = exact_float_sum([float(v) for v in present])
        else:
            total = 0
            for v in present:  # exact: Python ints do not overflow
                total += v
        if function == "mean":
            # Integers: the exact sum rounded to double once, then divided. (Only integer sums
            # beyond 2**53 can make this differ from other exact formulations; tests avoid them.)
            return float(total) / len(present)
        return total if pa.types.is_floating(type_) else _wrap(total, type_)
    best = present[0]
    for v in present[1:]:  # strict comparison in a total order: the result is order-independent
        if function == "min" and _minmax_key(v, type_) < _minmax_key(best, type_):
            best = v
        if function == "max" and _minmax_key(v, type_) > _minmax_key(best, type_):
            best = v
    return best


def reference_aggregate(
    tables: list[pa.Table],
    *,
    time: str,
    key: list[str],
    size: int,
    advance: int,
    offset: int,
    aggs: dict[str, tuple[str, str | None]],
) -> pa.Table:
    """Windowed aggregation by its definition (docs/semantics.md, "Windowed aggregation").

    Windows are [s, s + size) for s = offset + k * advance, every integer k, in the time column's
    stored unit; aggs maps an output name to (function, column), column None for count().
    """
    if not tables:
        raise ValueError("at least one input table is needed (for the schema)")
    if size <= 0 or advance <= 0:
        raise ValueError("size and advance must be positive")
    schema = tables[0].schema
    time_type = schema.field(time).type
    key_types = [schema.field(k).type for k in key]
    out_types = {}
    for name, (function, column) in aggs.items():
        if function not in _AGG_FUNCTIONS:
            raise ValueError(f"unknown aggregate function {function!r}")
        if column is None and function != "count":
            raise ValueError(f"{function}() needs a column")
        out_types[name] = _agg_output_type(function, None if column is None else schema.field(column).type)

    # Every tuple as (time, input index, position, row as a dict), sorted into the merged order.
    tuples = []
    for i, table in enumerate(tables):
        columns = {name: _py_values(table.column(name)) for name in table.column_names}
        for pos in range(table.num_rows):
            row = {name: values[pos] for name, values in columns.items()}
            if row[time] is None:
                raise ValueError("null time")
            tuples.append((row[time], i, pos, row))
    tuples.sort(key=lambda item: item[:3])

    # (window start, key identity) -> [key values, rows in merged order]
    groups: dict[tuple, list] = {}
    for t, _, _, row in tuples:
        k_first = (t - offset - size) // advance + 1  # smallest k with s + size > t (floor division)
        k_last = (t - offset) // advance  # largest k with s <= t
        key_values = [row[k] for k in key]
        identity = tuple(_order_key(v, kt) for v, kt in zip(key_values, key_types))
        for k in range(k_first, k_last + 1):
            start = offset + k * advance
            assert start <= t < start + size
            groups.setdefault((start, identity), [key_values, []])[1].append(row)

    columns: dict[str, list] = {"window_start": [], "window_end": []}
    columns.update({k: [] for k in key})
    columns.update({name: [] for name in aggs})
    for start, identity in sorted(groups):
        key_values, rows = groups[(start, identity)]
        columns["window_start"].append(start)
        columns["window_end"].append(start + size)
        for k, v in zip(key, key_values):
            columns[k].append(v)
        for name, (function, column) in aggs.items():
            values = [None] * len(rows) if column is None else [row[column] for row in rows]
            type_ = None if column is None else schema.field(column).type
            columns[name].append(_aggregate_values(function, values, type_))

    fields = [pa.field("window_start", time_type), pa.field("window_end", time_type)]
    fields += [pa.field(k, kt) for k, kt in zip(key, key_types)]
    fields += [pa.field(name, out_types[name]) for name in aggs]
    return pa.table(
        [_to_arrow(columns[f.name], f.type) for f in fields], schema=pa.schema(fields)
    )


# --- Live runs --------------------------------------------------------------------------------------


def run_live(live, batches: list[list[pa.RecordBatch]], before=None) -> list[pa.RecordBatch]:
    """Feeds a LiveAggregate as live sources do, one producer thread per input (one thread pushing
    every input could wait on back-pressure for an input only it advances), each pushing its
    batches then closing; `before(i, k)`, if given, runs on input i's thread before its batch k.
    Returns the result batches a consumer thread read meanwhile."""
    import threading

    got: list[pa.RecordBatch] = []
    consumer = threading.Thread(target=lambda: got.extend(live))
    consumer.start()

    def produce(i: int) -> None:
        for k, batch in enumerate(batches[i]):
            if before is not None:
                before(i, k)
            live.push(i, batch)
        live.close(i)

    producers = [threading.Thread(target=produce, args=(i,)) for i in range(len(batches))]
    for p in producers:
        p.start()
    for p in producers:
        p.join()
    consumer.join()
    return got
