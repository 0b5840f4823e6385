"""How pyarrow_ops.spark places rows on Spark partitions in order: the split by time (ranges of window
starts, each sent to the partition of its index) and the final sort of a split by key (computed once,
cut into equal spans of window start without a sampling job)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from pyarrow_ops.spark.session import arrow_settings
from pyarrow_ops.windows import Window

if TYPE_CHECKING:  # pyspark is an optional dependency (the "spark" extra)
    from pyspark.sql import DataFrame, SparkSession

RANGE_COLUMN = "__pao_range"

# Ranges hold at least this many window starts per window a tuple falls in, so the tuples copied into
# two ranges (those of the windows across a boundary) stay under about 1 / _MIN_RANGE_WINDOWS of the rows.
_MIN_RANGE_WINDOWS = 4
_TIME_SPLIT_LIMITS = ("the time column must be a Spark timestamp or integer column, and the rows must span at "
                      f"least {2 * _MIN_RANGE_WINDOWS} x (size / advance) window starts")


def _split_by_time(tagged: DataFrame, time: str, window: Window, n: int) -> tuple[DataFrame, dict] | None:
    """The rows routed to ``n`` (or fewer) ranges of window starts, for a split by time: a column
    ``__pao_range`` whose value sends the rows of range r to Spark partition r, and the ranges for
    :func:`aggregate_udf`. None when the time column's type or the rows' time span does not allow it.

    Range r computes the windows whose start lies in it, so a tuple goes to every range holding a
    window it falls in: usually one, two for the tuples of windows across a boundary. The ranges are
    equal spans of window starts between the least and the greatest time (one Spark job reads them).
    Partition r is range r because the value is chosen so that Spark's hash partitioning,
    pmod(hash(value), n), is r; the result then needs no sort: its partitions are in range order.
    """
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    if time not in tagged.columns:
        return None
    dtype = tagged.schema[time].dataType
    if isinstance(dtype, T.TimestampType):
        t, units = F.unix_micros(F.col(time)), pa.timestamp("us", tz="UTC")
    elif isinstance(dtype, (T.LongType, T.IntegerType, T.ShortType, T.ByteType)):
        t, units = F.col(time).cast("long"), pa.int64()
    else:
        return None
    try:
        size, advance, offset = window.resolve(units)
    except (TypeError, ValueError):
        return None  # left to the engine's error
    if size < 1 or advance < 1:
        return None
    lo, hi = tagged.select(t.alias("t")).agg(F.min("t"), F.max("t")).first()
    if lo is None:
        return None

    def last_k(x: int) -> int:  # the last window starting at or before x
        return (x - offset) // advance

    per_tuple = -(-size // advance)
    k0, k1 = last_k(lo - size) + 1, last_k(hi)
    count = min(n, (k1 - k0 + 1) // (_MIN_RANGE_WINDOWS * per_tuple))
    if count < 2:
        return None
    chunk = -(-(k1 - k0 + 1) // count)
    count = -(-(k1 - k0 + 1) // chunk)
    labels = _partition_values(tagged.sparkSession, count)

    # Exact integer arithmetic in Spark SQL (floor division as (a - pmod(a, b)) div b).
    def floor_div(a: str, b: int) -> str:
        return f"(({a}) - pmod({a}, {b})) div {b}"

    def range_of(k: str) -> str:
        return f"least(greatest({floor_div(f'({k}) - ({k0})', chunk)}, 0), {count - 1})"

    last = floor_div(f"__pao_t - ({offset})", advance)
    first = floor_div(f"__pao_t - ({offset}) - ({size})", advance) + " + 1"
    # A tuple in no window (a gap, advance > size) still goes to one range, for the engine's checks;
    # so does a null time (range 0), for its error.
    routed = (tagged.withColumn("__pao_t", t)
              .withColumn(RANGE_COLUMN, F.explode(F.sequence(
                  F.coalesce(F.expr(f"least({range_of(first)}, {range_of(last)})"), F.lit(0).cast("long")),
                  F.coalesce(F.expr(range_of(last)), F.lit(0).cast("long")))))
              .drop("__pao_t"))
    value = F.element_at(F.array(*[F.lit(v).cast("long") for v in labels]), F.col(RANGE_COLUMN).cast("int") + 1)
    spread = routed.withColumn(RANGE_COLUMN, value).repartition(count, RANGE_COLUMN)
    start = lambda r: offset + (k0 + r * chunk) * advance  # noqa: E731
    ranges = {labels[r]: (r, None if r == 0 else start(r), None if r == count - 1 else start(r + 1))
              for r in range(count)}
    return spread, ranges


_partition_values_found: dict[tuple[str, int], list[int]] = {}  # by (applicationId, n)


def _partition_values(spark: SparkSession, n: int) -> list[int]:
    """For each r < n, a long that Spark's hash partitioning into n partitions sends to partition r:
    the least v >= 0 with pmod(hash(v), n) == r, computed by Spark itself (one small job, once per
    SparkContext and n)."""
    key = (spark.sparkContext.applicationId, n)
    if key not in _partition_values_found:
        _partition_values_found[key] = _find_partition_values(spark, n)
    return _partition_values_found[key]


def _find_partition_values(spark: SparkSession, n: int) -> list[int]:
    from pyspark.sql import functions as F

    found: dict[int, int] = {}
    width = 16 * n
    while len(found) < n:
        rows = (spark.range(0, width).select("id", F.pmod(F.hash("id"), F.lit(n)).alias("p"))
                .groupBy("p").agg(F.min("id").alias("v")).collect())
        found = {int(r["p"]): int(r["v"]) for r in rows}
        width *= 4
    return [found[r] for r in range(n)]


def _sorted(df: DataFrame, order: list[Any], partitions: int, span: Any = None) -> DataFrame:
    """``df`` sorted by ``order`` over ``partitions`` Spark partitions (in partition order), ``df`` computed
    once, now, under ``ARROW_SETTINGS``.

    A global sort's range partitioning first samples its input in a job of its own, which would run the
    whole query before it (shuffle, sort, engine) a second time; a local checkpoint keeps the rows the
    first job computes (freed when the DataFrame is), so the sort reads them instead. Measured on the
    W-OI benchmark, 2M tuples on local[2]: 3.7-4.9 s against 5.9-7.0 s for orderBy alone and 5.6-6.5 s
    for one partition sorting everything.

    The checkpoint is eager so that the engine's job runs here, inside :func:`arrow_settings`: Spark reads
    those settings when a job runs, and a lazy checkpoint's job would run at the caller's action, under
    whatever the session has then (docs/spark.md, "Your own session"). It is kept as Spark keeps a cache
    (MEMORY_AND_DISK: deserialized in memory, evicted to disk under pressure), not on disk only, which
    serializes every row. Measured on the W-OI benchmark in a plain local[2] session (1 GB driver), best of
    interleaved runs: at 2M tuples 2.33 s in memory against 2.90 s on disk; at 10M, where the window rows
    compete with the benchmark's cached inputs for the 1 GB, 13.40 s against 11.61 s. The small query is
    the one whose ratio to Spark's own formulations is tight, and a cluster's executors have more room.

    The sort repartitions into ``partitions`` then sorts within each, rather than orderBy, whose partition
    count is the session's spark.sql.shuffle.partitions (200 unless set). With ``span``, an accumulator
    of :class:`_Span` that the engine's job filled with the least and greatest ``window_start`` (the
    first sort key), the ranges are equal spans of it and need no sampling job (:func:`_by_span`);
    otherwise, or for a window start of another type, Spark's range partitioning samples the checkpoint.
    """
    from pyspark import StorageLevel

    with arrow_settings(df.sparkSession):
        kept = df.localCheckpoint(eager=True, storageLevel=StorageLevel.MEMORY_AND_DISK)
    by_span = _by_span(kept, "window_start", span.value, partitions) if span is not None else None
    if by_span is not None:
        return by_span.sortWithinPartitions(*order).drop(RANGE_COLUMN)
    return kept.repartitionByRange(partitions, *order).sortWithinPartitions(*order)


class _Span:
    """An accumulator's merge (``sparkContext.accumulator(None, _Span())``) of (least, greatest) int64
    values; None while nothing was added."""

    def zero(self, value: Any) -> None:
        return None

    def addInPlace(self, a: tuple[int, int] | None, b: tuple[int, int] | None) -> tuple[int, int] | None:  # noqa: N802
        if a is None or b is None:
            return a if b is None else b
        return min(a[0], b[0]), max(a[1], b[1])


def _span_of(column: pa.Array | pa.ChunkedArray) -> tuple[int, int] | None:
    """The least and greatest value of a timestamp (as microseconds, as Spark keeps them) or integer
    column, for :class:`_Span`; None for another type or no values."""
    if pa.types.is_timestamp(column.type):
        column = pc.cast(column, pa.timestamp("us", column.type.tz), safe=False)  # (truncating keeps the order)
    elif not pa.types.is_integer(column.type):
        return None
    bounds = pc.min_max(pc.cast(column, pa.int64()))
    lo, hi = bounds["min"].as_py(), bounds["max"].as_py()
    return None if lo is None else (lo, hi)


def _by_span(df: DataFrame, name: str, span: tuple[int, int] | None, partitions: int) -> DataFrame | None:
    """``df`` repartitioned into ``partitions`` equal spans of the column ``name``, in order: the rows of
    span r in partition r (``__pao_range``, a value that Spark's hash partitioning sends there, as for a
    split by time). The column must be a timestamp or integer column between ``span``'s bounds; None
    where it is not, or where the span does not fit a long."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    if span is None:
        return None
    dtype = df.schema[name].dataType
    if isinstance(dtype, T.TimestampType):
        value = F.unix_micros(F.col(name))
    elif isinstance(dtype, (T.LongType, T.IntegerType, T.ShortType, T.ByteType)):
        value = F.col(name).cast("long")
    else:
        return None
    lo, hi = span
    width = hi - lo + 1
    if width >= 2**62:
        return None
    step = -(-width // partitions)
    # Monotone in the value, which is all the order needs (the division is in doubles); clamped, so that a
    # value outside the span (none is expected) still lands in the first or the last partition.
    bucket = F.least(F.greatest(F.floor((value - F.lit(lo)) / F.lit(step)), F.lit(0)), F.lit(partitions - 1))
    labels = _partition_values(df.sparkSession, partitions)
    label = F.element_at(F.array(*[F.lit(v).cast("long") for v in labels]), bucket.cast("int") + 1)
    return df.withColumn(RANGE_COLUMN, label).repartition(partitions, RANGE_COLUMN)
