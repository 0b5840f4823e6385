"""Running pyarrow-ops queries on Spark DataFrames through Arrow UDFs (docs/spark.md).

Spark is the distributed engine: a keyed query is split by key hash across Spark partitions (a
parallel region keyed by the group-by key, in the auto-parallelization paper's terms), each
partition's rows are put back in input order, and the engine runs inside ``mapInArrow`` on the
record batches Spark hands the Python worker. The result is the table the same query gives
in-process, row for row.
"""

from __future__ import annotations

import os
import sys
import warnings
from time import perf_counter_ns as time_ns
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from pyarrow_ops.aggregate import aggregate as _aggregate
from pyarrow_ops.aggregate import _keys
from pyarrow_ops.aggregates import Agg
from pyarrow_ops.windows import Window

if TYPE_CHECKING:  # pyspark is an optional dependency (the "spark" extra)
    from pyspark.sql import DataFrame, SparkSession

INPUT_COLUMN = "__pao_input"
POSITION_COLUMN = "__pao_position"

_session: SparkSession | None = None


def session() -> SparkSession:
    """One local[2] SparkSession for the process (created on first use, then reused).

    Settings for a small machine: 2 cores, 4 shuffle partitions (the default 200 makes every small
    query pay for 200 tasks), no web UI or progress bar, 4 GB driver memory (it applies only if this
    call starts the JVM), results of any size collected, Arrow transfers on, session time zone UTC.
    On a cluster, build your own session instead; nothing here needs this one.
    """
    global _session
    if _session is None or _session.sparkContext._jsc is None:  # none yet, or stopped since
        from pyspark.sql import SparkSession

        # The Python workers must be this interpreter, which has pyarrow and pyarrow_ops.
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

        _session = (
            SparkSession.builder.master("local[2]")
            .appName("pyarrow-ops")
            .config("spark.driver.memory", "4g")
            .config("spark.driver.maxResultSize", "0")
            .config("spark.sql.shuffle.partitions", "4")
            .config("spark.default.parallelism", "2")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.sql.execution.arrow.pyspark.enabled", "true")
            .config("spark.sql.session.timeZone", "UTC")
            .getOrCreate()
        )
        _session.sparkContext.setLogLevel("ERROR")
    return _session


def aggregate_udf(
    input_schema: pa.Schema,
    inputs: int,
    *,
    time: str,
    key: str | list[str] | None = None,
    window: Window,
    aggs: Mapping[str, Agg],
    design: str = "auto",
    threads: int | None = None,
    timer: Any = None,
) -> tuple[Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]], pa.Schema]:
    """A function for ``DataFrame.mapInArrow`` that aggregates one Spark partition, and its output
    schema (pyarrow; ``pyspark.sql.pandas.types.from_arrow_schema`` turns it into Spark's).

    The partition's rows must carry the int column ``__pao_input`` (the input index, 0 to
    ``inputs`` - 1) and be in input order within each input (``sortWithinPartitions(__pao_input,
    position)``); ``input_schema`` is the schema of the batches Spark hands over, those two columns
    included. Rows of one key must all be in one partition (``repartition(n, *key)``). The function
    reads the whole partition, splits it by input, and yields the window rows of ``aggregate``.

    ``timer``, for benchmarks: a Spark accumulator (``sparkContext.accumulator(0.0)``) that each
    partition adds its Python-side work to, in seconds: splitting by input and running the engine,
    not the time spent receiving batches from the JVM or waiting while Spark consumes the output.
    """
    if INPUT_COLUMN not in input_schema.names:
        raise ValueError(f"the partition's rows need the input index column {INPUT_COLUMN!r}")
    data_fields = [f for f in input_schema if f.name not in (INPUT_COLUMN, POSITION_COLUMN)]
    data_schema = pa.schema(data_fields)
    params = dict(time=time, key=key, window=window, aggs=aggs, design=design, threads=threads)
    empty = [data_schema.empty_table()]
    output_schema = _aggregate(empty, **params).to_arrow().schema

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        table = pa.Table.from_batches(list(batches), schema=input_schema)
        if table.num_rows == 0:
            return
        start = time_ns()
        index = table.column(INPUT_COLUMN)
        # Every input keeps its index, empty or not: ties in time are broken by input index.
        parts = [table.filter(pc.equal(index, i)).select(data_schema.names) for i in range(inputs)]
        for batch in _aggregate(parts, **params):
            busy = time_ns() - start
            yield batch
            start = time_ns() - busy  # the time suspended in yield is Spark's, not ours
        if timer is not None:
            timer.add((time_ns() - start) / 1e9)

    return run, output_schema


def _with_input_and_position(dfs: Sequence[DataFrame], order_by: str | None) -> DataFrame:
    from pyspark.sql import functions as F

    tagged = []
    for i, df in enumerate(dfs):
        position = F.col(order_by) if order_by is not None else F.monotonically_increasing_id()
        tagged.append(df.withColumn(INPUT_COLUMN, F.lit(i).cast("int")).withColumn(POSITION_COLUMN, position))
    out = tagged[0]
    for df in tagged[1:]:
        out = out.unionByName(df)
    return out


def aggregate(
    inputs: DataFrame | Sequence[DataFrame],
    *,
    time: str,
    key: str | list[str] | None = None,
    window: Window,
    aggs: Mapping[str, Agg],
    design: str = "auto",
    input_column: str | None = None,
    order_by: str | None = None,
    partitions: int | None = None,
    threads: int | None = None,
    timer: Any = None,
) -> DataFrame:
    """:func:`pyarrow_ops.aggregate` on Spark: the identical table, as a Spark DataFrame.

    Args:
        inputs: a list of DataFrames, one per input stream; or one DataFrame with ``input_column``
            holding each row's input index (0, 1, ...).
        time, key, window, aggs, design: as for :func:`pyarrow_ops.aggregate`.
        input_column: with one DataFrame, the column of input indexes (dropped before the query).
        order_by: a column that gives each row's position within its input (a sequence number, an
            offset). Without it the position is the order in which the DataFrame yields its rows,
            which Spark keeps for a DataFrame read or created in order but not after a shuffle:
            pin it with ``order_by`` whenever the source order is not stable. Each input must be
            sorted by ``time`` in this order, as in-process; an unsorted input raises the engine's
            error, naming input, row and values.
        partitions: Spark partitions the keys are hashed over (default: Spark's default
            parallelism). Without a key everything runs in one partition, with a warning.
        threads: engine threads per partition.
        timer: for benchmarks, an accumulator of the Python workers' seconds (see :func:`aggregate_udf`).

    Returns:
        A DataFrame with columns window_start, window_end, the key columns and the aggregates,
        ordered by window start, then key (nulls last), as in-process.
    """
    from pyspark.sql import DataFrame as SparkDataFrame
    from pyspark.sql import functions as F
    from pyspark.sql.pandas.types import from_arrow_schema, to_arrow_schema

    keys = _keys(key)
    if isinstance(inputs, SparkDataFrame):
        if input_column is None:
            dfs = [inputs]
            n_inputs = 1
            tagged = _with_input_and_position(dfs, order_by)
        else:
            n_inputs = inputs.select(F.max(input_column)).first()[0]
            n_inputs = 1 if n_inputs is None else int(n_inputs) + 1
            position = F.col(order_by) if order_by is not None else F.monotonically_increasing_id()
            tagged = (inputs.withColumn(INPUT_COLUMN, F.col(input_column).cast("int")).drop(input_column)
                      .withColumn(POSITION_COLUMN, position))
    else:
        dfs = list(inputs)
        if not dfs or not all(isinstance(d, SparkDataFrame) for d in dfs):
            raise TypeError("inputs must be a Spark DataFrame or a non-empty list of them")
        n_inputs = len(dfs)
        tagged = _with_input_and_position(dfs, order_by)
    if order_by is not None and order_by != time:
        tagged = tagged.drop(order_by) if order_by not in keys else tagged

    spark = tagged.sparkSession
    if keys:
        n = partitions or spark.sparkContext.defaultParallelism
        spread = tagged.repartition(n, *[F.col(k) for k in keys])
    else:
        warnings.warn("pyarrow_ops.spark.aggregate: the query has no key, so every row must meet in one "
                      "Spark partition (one Python worker) to be aggregated in merged order", stacklevel=2)
        spread = tagged.repartition(1)
    ordered = spread.sortWithinPartitions(INPUT_COLUMN, POSITION_COLUMN)
    arrow_in = to_arrow_schema(ordered.schema, timezone="UTC")
    fn, arrow_out = aggregate_udf(arrow_in, n_inputs, time=time, key=keys or None, window=window, aggs=aggs,
                                  design=design, threads=threads, timer=timer)
    result = ordered.mapInArrow(fn, from_arrow_schema(arrow_out, prefer_timestamp_ntz=False))
    return result.orderBy(F.col("window_start"), *[F.asc_nulls_last(k) for k in keys])
