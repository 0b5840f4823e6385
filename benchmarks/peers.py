"""Windowed aggregation written in Polars, DuckDB and PySpark: the peers the engine's ``aggregate`` is benchmarked
against.

All compute exactly the query of docs/semantics.md ("Windowed aggregation") and return a table with the same
schema and row order as the engine (and as ``tests/python/reference.py:reference_aggregate``):

    polars_aggregate(tables, time=, key=[...], size=, advance=, offset=, aggs={name: (function, column)})
    duckdb_aggregate(... the same ...)
    spark_aggregate(... the same ..., formulation="window" | "explode", spark=None)   (section "Spark" below)
    spark_aggregate_df(df, schema=, key=, ...)   the same in Spark from a built DataFrame, returned unrun

Windows are ``[s, s + size)`` for ``s = offset + k * advance`` (any integer k), in the time column's stored unit
(days for date32). ``aggs`` maps an output name to ``(function, column)``, function one of count, sum, mean, min,
max, first, last, and column None for ``count()``.

Supported (the subset the benchmarks need; anything else raises NotImplementedError): time columns int64, int32,
date32 and timestamp (any unit and time zone); keys of integer and string types (zero, one or several columns);
count() and count(c) of any column; sum, mean, min, max, first, last of integer and floating-point columns.

Exactness. Counts, min, max, first and last are exact. first/last follow the merged order (time, input index,
position in the input): Polars gets it from a stable sort of the concatenated inputs by time, DuckDB from an
explicit ``arg_min_null`` over (time, global position). Integer sums wrap to 64 bits like the engine's (Polars
sums wrap in int64/uint64; DuckDB sums exactly in HUGEINT and wraps at the end). Floating-point sums and means
add in another order than the merged one, so they can differ from the engine in the last bits. Integer means
divide the sum converted to double: Polars' wrapped int64/uint64 sum, DuckDB's exact HUGEINT sum.

Formulations (``formulation=``):

* ``"panes"`` (default): partial aggregates per (pane, key) where panes are the gcd(size, advance)-wide slices
  of the window grid, then each pane's partials are expanded to the ceil(size / advance) windows that contain
  the pane and combined. Every formulation expands a unit to the same number of windows, and panes are never
  more numerous than tuples, so this wins when keys repeat within a pane and costs one cheap extra group-by
  when they do not.
* ``"explode"``: each tuple expanded to its windows (Polars ``int_ranges`` + ``explode``; DuckDB a cross join
  with ``range(ceil(size / advance))`` and a filter), then one group-by (window, key).

Polars ``group_by_dynamic(every=advance, period=size, offset=..., closed="left", label="left",
group_by=key)`` gives the same result (its leading windows need a shifted offset: it starts at the first time
truncated to ``every``), but it was the slowest Polars formulation here and is not kept.

Timings (seconds, median of 5 interleaved runs, on a quiet 2-vCPU VM; Polars 2.1.0, DuckDB 2.0.0, pyarrow 26):
2M rows in 4 time-sorted inputs spread over 2,000 s, timestamp[ms, UTC] time, uint32 key, size 30,000 ms,
advance 3,000 ms, offset 0. k = 243 keys (164,268 output rows), K = 40,000 keys (14,089,981 output rows);
OI = {"n": ("count", None)}, OS = {"f": ("first", "kwh")}. Every result was identical (pa.Table.equals)
across the Polars and DuckDB formulations.

                                    k-OI    k-OS    K-OI    K-OS
    polars_aggregate  panes         0.127   0.145   3.48    4.24
    polars_aggregate  explode       0.337   0.257   3.35    3.79
    Polars group_by_dynamic         0.717   0.687   4.65    5.27   (experiment, not kept)
    duckdb_aggregate  panes         0.109   0.127   3.77    3.83
    duckdb_aggregate  explode       0.339   0.399   3.34    3.65

panes wins by 2-3x with few keys (a pane of 3 s holds ~12 tuples per key) and is within ~10-15% of explode
with many keys (nearly every non-empty (pane, key) holds one tuple: the pre-aggregation buys nothing); at
40,000 keys producing and sorting the 14M output rows dominates every formulation. Other variants tried and
dropped: tuple expansion as n filtered copies concatenated (in Polars, same speed as int_ranges + explode;
in DuckDB, unnest(range(k_first, k_last + 1)) is the same speed as the cross join); DuckDB first(x ORDER BY
time, position) and arg_min_null over a {time, position} struct (0.2-1.8 s slower than the packed int64
sequence used when it cannot overflow; the struct remains the fallback); sorting the Polars output by one
stable sort per column instead of one multi-column sort (no difference inside the lazy plan).

Spark (``spark_aggregate``; needs the ``spark`` extra and Java 17+). PySpark in local mode, by default in the
session of ``spark_session()`` (created once per process: local[2], 4 shuffle partitions, no UI, 4 GB driver).
The inputs go in as one Arrow table through ``spark.createDataFrame(pa.Table)`` and the result comes back
through ``DataFrame.toArrow()`` (PySpark >= 4; PySpark 3.5 goes in through pandas and back through
``_collect_as_arrow``). Spark has no unsigned integers: uint8-uint32 columns travel as int64 and uint64 as
decimal(20, 0), cast back at the end like every output column. The time column travels as its stored integer
and Spark reads it as microseconds (``timestamp_micros``): a window of ``size`` units is ``size`` microseconds
there, and ``unix_micros`` turns window starts back into the integer, so every bound is exact in any unit and
time zone (ns timestamps of today are past year 9999 as microseconds; Spark's window arithmetic is plain
int64 and does not mind). Formulations (``formulation=``):

* ``"window"`` (default): Spark's own ``window(time, size, advance, startTime)``. Spark's windows start at
  ``startTime + k * advance`` and it requires ``|startTime| < advance``, so startTime is ``offset mod advance``.
  It rejects ``advance > size``: with gaps, the tuples in no window are filtered out first
  (``pmod(t - offset, advance) < size``) and windows of width ``advance`` are used, ending at start + size.
* ``"explode"``: each tuple's window indices ``k_first..k_last`` in integer SQL (``pmod``, ``div``),
  ``explode(sequence(k_first, k_last))``, then one group-by (k, key) (the same filter first with gaps).

Exactness in Spark: counts, min, max, first and last are exact; first/last are ``min_by``/``max_by`` over the
merged position (the packed int64 as for DuckDB, or a (time, position) struct; both keep null values). Integer
sums are exact (decimal(20, 0) summed in decimal(30, 0), then wrapped to 64 bits like the engine's), integer means
divide that exact sum converted to double once. Floating-point sums and means add in Spark's partition order and
can differ from the engine in the last bits: tests compare them with a relative tolerance of 1e-9 (absolute 1e-6
near zero), the benchmark with a relative 1e-9. Spark's min/max take -0.0 and 0.0 as equal and return either.
PySpark 4.3's ``createDataFrame(pa.Table)`` silently drops every row after an empty record batch (an empty input
makes one), so the peer passes only non-empty batches.

Spark timings (seconds, one run each, PySpark 4.3.0 local[2], the benchmark's 2M rows in 4 inputs, session start
and warm-up not counted; the 2-vCPU VM was shared with other builds, load ~4, so in the same run Polars and
DuckDB took 6-7x their k-OI times in the table above):

                                         k-OI          W-OI (mean kwh, 40 s / 2 s)
    spark_aggregate  window              21.8          22.1
    spark_aggregate  explode             17.9          19.3
    best Polars, best DuckDB (same run)  0.89, 0.65    1.87, 0.98

Much of it is getting the rows in: ``createDataFrame`` of an Arrow table builds a driver-side local relation
whose rows every job ships to its tasks (a plain sum over 500k created rows took ~1.5 s, also on a busy VM).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import duckdb
import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

__all__ = [
    "FORMULATIONS", "SPARK_FORMULATIONS", "duckdb_aggregate", "output_schema", "polars_aggregate", "spark_aggregate",
    "spark_aggregate_df", "spark_session",
]

FORMULATIONS = ("panes", "explode")
_FUNCTIONS = ("count", "sum", "mean", "min", "max", "first", "last")
_ORDERED = ("first", "last")


# --- shared: checks, output schema, time conversion ----------------------------------------------


def _storage(type_: pa.DataType) -> pa.DataType:
    """The integer type a time column is stored as."""
    if pa.types.is_timestamp(type_) or pa.types.is_int64(type_):
        return pa.int64()
    if pa.types.is_date32(type_) or pa.types.is_int32(type_):
        return pa.int32()
    raise NotImplementedError(f"time column of type {type_}")


def _is_number(type_: pa.DataType) -> bool:
    return pa.types.is_integer(type_) or pa.types.is_floating(type_)


def output_schema(
    schema: pa.Schema, *, time: str, key: Sequence[str], aggs: dict[str, tuple[str, str | None]]
) -> pa.Schema:
    """The result schema: window bounds, keys, then the aggregates (checks what the peers support)."""
    time_type = schema.field(time).type
    _storage(time_type)
    fields = [pa.field("window_start", time_type), pa.field("window_end", time_type)]
    for k in key:
        type_ = schema.field(k).type
        if not (pa.types.is_integer(type_) or pa.types.is_string(type_) or pa.types.is_large_string(type_)):
            raise NotImplementedError(f"key column {k!r} of type {type_}")
        fields.append(pa.field(k, type_))
    for name, (function, column) in aggs.items():
        if function not in _FUNCTIONS:
            raise ValueError(f"unknown aggregate function {function!r}")
        if column is None:
            if function != "count":
                raise ValueError(f"{function}() needs a column")
            fields.append(pa.field(name, pa.int64()))
            continue
        type_ = schema.field(column).type
        if function == "count":
            out = pa.int64()
        elif not _is_number(type_):
            raise NotImplementedError(f"{function}({column}) of type {type_}")
        elif function == "sum":
            out = pa.float64() if pa.types.is_floating(type_) else (
                pa.int64() if pa.types.is_signed_integer(type_) else pa.uint64()
            )
        elif function == "mean":
            out = pa.float64()
        else:
            out = type_
        fields.append(pa.field(name, out))
    return pa.schema(fields)


def _check(tables, size: int, advance: int) -> None:
    if not tables:
        raise ValueError("at least one input table is needed")
    if size <= 0 or advance <= 0:
        raise ValueError("size and advance must be positive")


def _prepare(tables, time: str, key, size: int, advance: int, aggs):
    """What every peer starts from: (result schema, key list, total rows, whether an order-sensitive
    aggregate is asked for, the input columns needed besides time)."""
    _check(tables, size, advance)
    schema = output_schema(tables[0].schema, time=time, key=key, aggs=aggs)
    ordered = any(function in _ORDERED for function, _ in aggs.values())
    return schema, list(key), sum(t.num_rows for t in tables), ordered, _needed_columns(time, key, aggs)


def _concat_positioned(tables, time: str, needed: list[str], ordered: bool, convert=lambda c: c) -> pa.Table:
    """The inputs as one table: ``__t`` (time as int64), the needed columns (through ``convert``),
    and with ``ordered`` a global position ``__g``: (time, __g) orders like (time, input, position)."""
    parts, base = [], 0
    for t in tables:
        arrays = [_time_int64(t.column(time)), *(convert(t.column(c)) for c in needed)]
        names = ["__t", *needed]
        if ordered:
            arrays.append(pa.array(np.arange(base, base + t.num_rows, dtype=np.int64)))
            names.append("__g")
        base += t.num_rows
        parts.append(pa.Table.from_arrays(arrays, names=names))
    return pa.concat_tables(parts)


def _time_int64(column) -> pa.ChunkedArray | pa.Array:
    return column.cast(_storage(column.type)).cast(pa.int64())


def _bounds_to_time(column, type_: pa.DataType):
    """int64 window bounds back to the time column's type."""
    return column.cast(_storage(type_)).cast(type_)


def _needed_columns(time: str, key: Sequence[str], aggs) -> list[str]:
    names = list(key)
    for _, column in aggs.values():
        if column is not None and column not in names and column != time:
            names.append(column)
    return names


def _finish(result: pa.Table, schema: pa.Schema) -> pa.Table:
    """Window bounds from int64 to the time type, and every column cast to the exact output type."""
    time_type = schema.field("window_start").type
    columns = [
        _bounds_to_time(result.column(0), time_type),
        _bounds_to_time(result.column(1), time_type),
        *result.columns[2:],
    ]
    return pa.Table.from_arrays(
        [c.cast(f.type) if c.type != f.type else c for c, f in zip(columns, schema)], schema=schema
    )


def _grid(size: int, advance: int, formulation: str) -> tuple[int, int, int, int]:
    """(pane width P, advance a and size s in panes, max windows per pane n)."""
    if formulation not in FORMULATIONS:
        raise ValueError(f"formulation must be one of {FORMULATIONS}")
    width = math.gcd(size, advance) if formulation == "panes" else 1
    return width, advance // width, size // width, -(-size // advance)


# --- Polars -------------------------------------------------------------------------------------


def polars_aggregate(
    tables: Sequence[pa.Table],
    *,
    time: str,
    key: Sequence[str],
    size: int,
    advance: int,
    offset: int,
    aggs: dict[str, tuple[str, str | None]],
    formulation: str = "panes",
) -> pa.Table:
    """The windowed aggregation in Polars (see the module docstring)."""
    schema, key, rows, ordered, needed = _prepare(tables, time, key, size, advance, aggs)
    width, a, s, _ = _grid(size, advance, formulation)
    if rows == 0:
        return schema.empty_table()

    df = pl.concat(
        [
            pl.from_arrow(
                pa.Table.from_arrays(
                    [_time_int64(t.column(time)), *(t.column(c) for c in needed)], names=["__t", *needed]
                )
            )
            for t in tables
        ],
        how="vertical",
        rechunk=False,
    )
    if ordered:
        # A stable sort of the concatenation (inputs in order) by time: ties by input, then position,
        # which is the merged order; group_by keeps it within each group for first()/last().
        df = df.sort("__t", maintain_order=True)

    partial, final = _polars_exprs(tables[0].schema, aggs, panes=formulation == "panes")
    m = (pl.col("__t") - offset) // width  # the unit (pane, or tuple when width is 1) index
    lf = df.lazy()
    if formulation == "panes":
        lf = lf.group_by(m.alias("__m"), *key).agg(partial)
        if ordered:
            lf = lf.sort("__m")  # panes in time order within each (window, key) for first()/last()
    else:
        lf = lf.with_columns(m.alias("__m"))
    # Windows k holding unit m: k*a <= m <= k*a + s - 1.
    k_first = -((s - 1 - pl.col("__m")) // a)
    k_last = pl.col("__m") // a
    lf = lf.with_columns(__k=pl.int_ranges(k_first, k_last + 1)).explode("__k", empty_as_null=False)
    lf = (
        lf.group_by("__k", *key)
        .agg(final)
        .sort(["__k", *key], nulls_last=True)
        .select(
            (pl.col("__k") * advance + offset).alias("window_start"),
            (pl.col("__k") * advance + (offset + size)).alias("window_end"),
            *key,
            *aggs,
        )
    )
    return _finish(lf.collect().to_arrow(), schema)


def _polars_exprs(schema: pa.Schema, aggs, *, panes: bool) -> tuple[list[pl.Expr], list[pl.Expr]]:
    """(per-pane partial aggregates, final aggregates over the partials or, without panes, over the values)."""
    partial: list[pl.Expr] = []
    final: list[pl.Expr] = []
    for i, (name, (function, column)) in enumerate(aggs.items()):
        p = f"__p{i}"
        if function == "count":
            expr = pl.len() if column is None else pl.col(column).count()
            if panes:
                partial.append(expr.alias(p))
                expr = pl.col(p).sum()
            final.append(expr.cast(pl.Int64).alias(name))
            continue
        type_ = schema.field(column).type
        is_float = pa.types.is_floating(type_)
        if function in ("sum", "mean"):
            wide = pl.Float64 if is_float else (pl.Int64 if pa.types.is_signed_integer(type_) else pl.UInt64)
            total, count = pl.col(column).cast(wide).sum(), pl.col(column).count()
            if panes:
                partial += [total.alias(p + "s"), count.alias(p + "n")]
                total, count = pl.col(p + "s").sum(), pl.col(p + "n").sum()
            expr = total if function == "sum" else total.cast(pl.Float64) / count
            final.append(pl.when(count > 0).then(expr).alias(name))
            continue
        # min() skips NaN unless all are NaN; nan_max() returns NaN if any (NaN is the largest float);
        # first()/last() keep nulls. Each composes with itself over panes.
        method = "nan_max" if function == "max" and is_float else function
        if panes:
            partial.append(getattr(pl.col(column), method)().alias(p))
            final.append(getattr(pl.col(p), method)().alias(name))
        else:
            final.append(getattr(pl.col(column), method)().alias(name))
    return partial, final


# --- DuckDB -------------------------------------------------------------------------------------

_TWO64 = "18446744073709551616::HUGEINT"
_TWO63 = "9223372036854775808::HUGEINT"


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _floor_div(x: str, d: int) -> str:
    """floor(x / d) for a positive d in integer SQL (DuckDB's // truncates)."""
    return f"(({x}) - ((({x}) % {d}) + {d}) % {d}) // {d}"


def duckdb_aggregate(
    tables: Sequence[pa.Table],
    *,
    time: str,
    key: Sequence[str],
    size: int,
    advance: int,
    offset: int,
    aggs: dict[str, tuple[str, str | None]],
    formulation: str = "panes",
) -> pa.Table:
    """The windowed aggregation in DuckDB SQL over the Arrow inputs (see the module docstring)."""
    schema, key, rows, ordered, needed = _prepare(tables, time, key, size, advance, aggs)
    width, a, s, n = _grid(size, advance, formulation)
    if rows == 0:
        return schema.empty_table()
    source = _concat_positioned(tables, time, needed, ordered)

    sequence = None
    if ordered:
        bounds = pc.min_max(source.column("__t")).as_py()
        lo, hi = bounds["min"], bounds["max"]
        if (hi - lo + 1) * rows < 2**63:  # one int64 that orders like (time, position)
            sequence = f"(__t - ({lo})) * {rows} + __g"
        else:
            sequence = "{'t': __t, 'g': __g}"

    partial, final = _duckdb_exprs(tables[0].schema, aggs, sequence, panes=formulation == "panes")
    keys = "".join(f", {_q(k)}" for k in key)
    unit = _floor_div(f"__t - ({offset})", width)
    if formulation == "panes":
        units = f"SELECT {unit} AS __m{keys}, {', '.join(partial)} FROM __src GROUP BY ALL"
    else:
        units = f"SELECT *, {unit} AS __m FROM __src"
    # Windows k holding unit m: k*a <= m <= k*a + s - 1; there are at most n, k = floor(m / a) - j.
    sql = f"""
        WITH __units AS ({units}),
        __expanded AS (
            SELECT *, {_floor_div('__m', a)} - __j AS __k FROM __units CROSS JOIN range({n}) AS __r(__j)
        )
        SELECT __k * {advance} + ({offset}) AS window_start, __k * {advance} + ({offset + size}) AS window_end
               {keys}, {', '.join(final)}
        FROM __expanded
        WHERE __k * {a} + {s - 1} >= __m
        GROUP BY __k{keys}
        ORDER BY __k{''.join(f', {_q(k)} NULLS LAST' for k in key)}
    """
    con = duckdb.connect()
    try:
        con.register("__src", source)
        result = con.sql(sql).to_arrow_table()
    finally:
        con.close()
    return _finish(result, schema)


def _duckdb_exprs(schema: pa.Schema, aggs, sequence: str | None, *, panes: bool) -> tuple[list[str], list[str]]:
    """(per-pane partial aggregates, final aggregates) as SQL select items."""
    partial: list[str] = []
    final: list[str] = []
    for i, (name, (function, column)) in enumerate(aggs.items()):
        p = f"__p{i}"
        out = _q(name)
        if function == "count":
            expr = "count(*)" if column is None else f"count({_q(column)})"
            if panes:
                partial.append(f"{expr} AS {p}")
                expr = f"sum({p})"
            final.append(f"CAST({expr} AS BIGINT) AS {out}")
            continue
        type_ = schema.field(column).type
        c = _q(column)
        is_float = pa.types.is_floating(type_)
        if function in ("sum", "mean"):
            total = f"sum(CAST({c} AS DOUBLE))" if is_float else f"sum({c})"  # integers: exact HUGEINT
            count = f"count({c})"
            if panes:
                partial += [f"{total} AS {p}s", f"{count} AS {p}n"]
                total, count = f"sum({p}s)", f"sum({p}n)"
            if function == "mean":
                expr = f"CAST({total} AS DOUBLE) / {count}"
            elif is_float:
                expr = total
            elif pa.types.is_signed_integer(type_):
                expr = f"CAST((({total} + {_TWO63}) % {_TWO64} + {_TWO64}) % {_TWO64} - {_TWO63} AS BIGINT)"
            else:
                expr = f"CAST({total} % {_TWO64} AS UBIGINT)"
            final.append(f"{expr} AS {out}")
            continue
        if function in ("min", "max"):  # DuckDB orders NaN above every number, like the engine
            expr = f"{function}({c})"
            if panes:
                partial.append(f"{expr} AS {p}")
                expr = f"{function}({p})"
        else:
            arg = "arg_min_null" if function == "first" else "arg_max_null"  # nulls included
            expr = f"{arg}({c}, {sequence})"
            if panes:
                partial.append(f"{expr} AS {p}")
                expr = f"{arg}({p}, __m)"
        final.append(f"{expr} AS {out}")
    return partial, final


# --- Spark --------------------------------------------------------------------------------------

SPARK_FORMULATIONS = ("window", "explode")


def spark_session():
    """The process's local[2] SparkSession: :func:`pyarrow_ops.spark.session`."""
    from pyarrow_ops.spark import session

    return session()

def _spark_input_column(column):
    """A column as a type Spark takes from Arrow: it has no unsigned integers (uint64 goes to decimal(20, 0),
    smaller ones widen to int64; _finish casts back) and no large strings."""
    type_ = column.type
    if pa.types.is_uint64(type_):
        return column.cast(pa.decimal128(20, 0))
    if pa.types.is_unsigned_integer(type_):
        return column.cast(pa.int64())
    if pa.types.is_large_string(type_):
        return column.cast(pa.string())
    return column


def _to_spark(spark, table: pa.Table):
    # PySpark 4.3's createDataFrame(pa.Table) silently drops every row after an empty record batch (an
    # empty input contributes one), so those go.
    table = pa.Table.from_batches([b for b in table.to_batches() if b.num_rows], table.schema)
    if _spark_takes_arrow(spark):
        return spark.createDataFrame(table)
    return spark.createDataFrame(table.to_pandas())  # PySpark 3.5: Arrow-enabled, through pandas


def _spark_takes_arrow(spark) -> bool:
    return int(spark.version.split(".")[0]) >= 4  # createDataFrame(pa.Table) and DataFrame.toArrow()


def _from_spark(df, spark) -> pa.Table | None:
    if _spark_takes_arrow(spark):
        return df.toArrow()
    batches = df._collect_as_arrow()  # PySpark 3.5
    return pa.Table.from_batches(batches) if batches else None


def spark_aggregate(
    tables: Sequence[pa.Table],
    *,
    time: str,
    key: Sequence[str],
    size: int,
    advance: int,
    offset: int = 0,
    aggs: dict[str, tuple[str, str | None]],
    formulation: str = "window",
    spark=None,
) -> pa.Table:
    """The windowed aggregation in PySpark (see the module docstring); ``spark`` defaults to spark_session()."""
    from pyspark.sql import functions as F

    schema, key, rows, ordered, needed = _prepare(tables, time, key, size, advance, aggs)
    if formulation not in SPARK_FORMULATIONS:
        raise ValueError(f"formulation must be one of {SPARK_FORMULATIONS}")
    if rows == 0:
        return schema.empty_table()
    spark = spark or spark_session()
    source = _concat_positioned(tables, time, needed, ordered, _spark_input_column)
    df = _to_spark(spark, source)

    sequence = None
    if ordered:
        bounds = pc.min_max(source.column("__t")).as_py()
        lo, hi = bounds["min"], bounds["max"]
        if (hi - lo + 1) * rows < 2**63:  # one long that orders like (time, position)
            sequence = (F.col("__t") - F.lit(lo)) * F.lit(rows) + F.col("__g")
    result = spark_aggregate_df(df, schema=tables[0].schema, key=key, size=size, advance=advance, offset=offset,
                                aggs=aggs, formulation=formulation, sequence=sequence)
    out = _from_spark(result, spark)
    if out is None:
        return schema.empty_table()
    return _finish(out, schema)


def spark_aggregate_df(
    df,
    *,
    schema: pa.Schema,
    key: Sequence[str],
    size: int,
    advance: int,
    offset: int = 0,
    aggs: dict[str, tuple[str, str | None]],
    formulation: str = "window",
    sequence=None,
):
    """The Spark plan of :func:`spark_aggregate` over an already built DataFrame, not run: a DataFrame with
    columns window_start and window_end (longs in the time column's stored unit), the keys and the aggregates,
    ordered by window start, then key (nulls last).

    ``df`` holds ``__t`` (long: the time in its stored unit, read as microseconds by ``"window"``), the key and
    aggregated columns (as ``_spark_input_column`` makes them) and, for first/last, ``__g`` (long: a position
    that orders ties in time like (input, position in the input)). ``schema`` is the inputs' Arrow schema: it
    gives the aggregated columns' types (floating point, signed or unsigned integer). ``sequence`` is a column
    that orders like (time, position) for first/last; by default the struct (``__t``, ``__g``). The benchmark
    (benchmarks.spark) calls this on cached DataFrames so that building them is not timed.
    """
    from pyspark.sql import functions as F

    if size <= 0 or advance <= 0:
        raise ValueError("size and advance must be positive")
    if formulation not in SPARK_FORMULATIONS:
        raise ValueError(f"formulation must be one of {SPARK_FORMULATIONS}")
    key = list(key)
    if sequence is None and any(function in _ORDERED for function, _ in aggs.values()):
        sequence = F.struct("__t", "__g")
    exprs = _spark_exprs(schema, aggs, sequence)

    phase = offset % advance  # 0 <= phase < advance: windows start at phase + k * advance
    if size < advance:  # gaps between windows: drop the tuples in none (Spark needs size >= advance)
        df = df.where(F.expr(f"pmod(__t - ({phase}), {advance}) < {size}"))
    if formulation == "window":
        # Spark's sliding window on timestamps, microsecond resolution: one stored time unit as one
        # microsecond keeps all arithmetic in exact integers, in any unit and time zone. Spark's windows
        # start at startTime + k * slide with |startTime| < slide, so the offset is taken modulo the advance.
        width = max(size, advance)
        window = F.window(
            F.timestamp_micros("__t"), f"{width} microseconds", f"{advance} microseconds", f"{phase} microseconds"
        )
        grouped = df.groupBy(window.alias("__w"), *key).agg(*exprs)
        begin = F.unix_micros("__w.start")
    else:
        # Each tuple exploded into the window indices k (window [offset + k*advance, +size)) holding it.
        m = f"(__t - ({offset}))"
        k_last = f"({m} - pmod({m}, {advance})) div {advance}"
        k_first = f"({m} - {size} - pmod({m} - {size}, {advance})) div {advance} + 1"
        df = df.withColumn("__k", F.explode(F.expr(f"sequence({k_first}, {k_last})")))
        grouped = df.groupBy("__k", *key).agg(*exprs)
        begin = F.col("__k") * F.lit(advance) + F.lit(offset)
    return grouped.select(
        begin.alias("window_start"), (begin + F.lit(size)).alias("window_end"), *key, *aggs
    ).orderBy("window_start", *(F.col(k).asc_nulls_last() for k in key))


def _spark_exprs(schema: pa.Schema, aggs, sequence) -> list:
    """The aggregates as Spark column expressions (exact but for floating-point sums and means)."""
    from decimal import Decimal

    from pyspark.sql import functions as F

    out = []
    for name, (function, column) in aggs.items():
        if function == "count":
            out.append(F.count(F.lit(1) if column is None else F.col(column)).alias(name))
            continue
        type_ = schema.field(column).type
        c = F.col(column)
        if function in ("sum", "mean"):
            count = F.count(c)
            if pa.types.is_floating(type_):
                total = F.sum(c.cast("double"))
            else:  # exact: decimal(20, 0) holds every int64 and uint64, their sum decimal(30, 0)
                total = F.sum(c.cast("decimal(20,0)"))
            if function == "mean":
                expr = total.cast("double") / count  # null when count is 0 (no division by zero)
            elif pa.types.is_floating(type_):
                expr = total
            elif pa.types.is_signed_integer(type_):  # wrapped to int64 like the engine's sum
                two63, two64 = F.lit(Decimal(2**63)), F.lit(Decimal(2**64))
                expr = (F.pmod(total + two63, two64) - two63).cast("long")
            else:  # uint64 as decimal(20, 0), cast by _finish
                expr = F.pmod(total, F.lit(Decimal(2**64))).cast("decimal(20,0)")
            out.append(expr.alias(name))
        elif function in ("min", "max"):  # Spark orders NaN above every number, like the engine
            out.append(getattr(F, function)(c).alias(name))
        else:  # the value at the smallest / largest merged position, null or not
            out.append((F.min_by if function == "first" else F.max_by)(c, sequence).alias(name))
    return out
