"""Running pyarrow-ops queries on Spark DataFrames through Arrow UDFs (docs/spark.md).

Spark is the distributed engine: a keyed query is split by key hash across Spark partitions (a
parallel region keyed by the group-by key, in the auto-parallelization paper's terms), each
partition's rows are put back in input order, and the engine runs inside ``mapInArrow`` on the
record batches Spark hands the Python worker. The result is the table the same query gives
in-process, row for row.

This module plans queries and holds the UDFs; ``session`` holds the session side (settings per query,
the worker probe), ``partitioning`` how rows are placed on partitions in order (split by time, final sort).
"""

from __future__ import annotations

import itertools
import warnings
from time import perf_counter_ns as time_ns
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pyarrow_ops.aggregate import aggregate as _aggregate
from pyarrow_ops.aggregate import _keys
from pyarrow_ops.aggregates import Agg
from pyarrow_ops.experiment import NONE as NO_EXPERIMENT
from pyarrow_ops.experiment import Experiment
from pyarrow_ops.pipeline import Pipeline, Step
# Also re-exported from here: session.py's API (ARROW_SETTINGS, arrow_settings, check_workers, session),
# and internals the tests reach as pyarrow_ops.spark._name.
from pyarrow_ops.spark.partitioning import (
    _TIME_SPLIT_LIMITS,
    RANGE_COLUMN,
    _by_span,
    _partition_values,
    _Span,
    _span_of,
    _sorted,
    _split_by_time,
)
from pyarrow_ops.spark.session import (
    ARROW_SETTINGS,
    _lazy,
    _warned_lazy,
    _workers_ok,
    arrow_settings,
    check_workers,
    session,
)
from pyarrow_ops.lateness import Late, Lateness
from pyarrow_ops.spark.lateness import in_time_order, late_rows
from pyarrow_ops.windows import Window

if TYPE_CHECKING:  # pyspark is an optional dependency (the "spark" extra)
    from pyspark.sql import DataFrame, SparkSession

INPUT_COLUMN = "__pao_input"
POSITION_COLUMN = "__pao_position"

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
    experiment: Experiment = NO_EXPERIMENT,
    ranges: Mapping[int, tuple[int, int | None, int | None]] | None = None,
    span: Any = None,
) -> tuple[Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]], pa.Schema]:
    """A function for ``DataFrame.mapInArrow`` that aggregates one Spark partition, and its output
    schema (pyarrow; ``pyspark.sql.pandas.types.from_arrow_schema`` turns it into Spark's).

    The partition's rows must carry the int column ``__pao_input`` (the input index, 0 to
    ``inputs`` - 1) and either be in input order within each input (``sortWithinPartitions(__pao_input,
    position)``) or carry ``__pao_position`` (the position within the input), by which the function
    sorts them itself; or, as :func:`aggregate` arranges them, only a long ``__pao_position`` with the
    index packed into its high bits (``_with_packed_position``), in any order. ``input_schema`` is
    the schema of the batches Spark hands over, those columns included. A null or out-of-range
    index raises ``InvalidInputError``. Rows of one key must all be in one partition
    (``repartition(n, *key)``). The function reads the whole partition, puts it in input order,
    splits it by input, and yields the window rows of ``aggregate``.

    ``experiment``, for benchmarks: with ``worker_seconds`` (a Spark accumulator,
    ``sparkContext.accumulator(0.0)``), each partition adds its Python-side work to it, in seconds: putting the rows in input order, splitting
    by input and running the engine, not the time spent receiving batches from the JVM or waiting
    while Spark consumes the output.

    ``ranges``, for a split by time (:func:`aggregate` with ``split="time"``): the rows carry the
    int64 column ``__pao_range``, by which the function sorts them first; it maps each value to (range index,
    least window start kept or None, first window start not kept or None). Each range's rows are
    aggregated on their own and only its windows are kept, in range order.

    ``span``, for the final sort of :func:`aggregate`: an accumulator of ``_Span`` that each partition
    adds the least and greatest window start it yields to.
    """
    if INPUT_COLUMN not in input_schema.names and POSITION_COLUMN not in input_schema.names:
        raise ValueError(f"the partition's rows need the input index column {INPUT_COLUMN!r} (or a packed "
                         f"{POSITION_COLUMN!r})")
    data_fields = [f for f in input_schema if f.name not in (INPUT_COLUMN, POSITION_COLUMN, RANGE_COLUMN)]
    data_schema = pa.schema(data_fields)
    params = dict(time=time, key=key, window=window, aggs=aggs, design=design, threads=threads)
    empty = [data_schema.empty_table()]
    output_schema = _aggregate(empty, **params).to_arrow().schema

    def aggregated(table: pa.Table) -> Iterator[pa.RecordBatch]:
        return _aggregate(_by_input(table, inputs, table.select(data_schema.names)), **params)

    def results(table: pa.Table) -> Iterator[pa.RecordBatch]:
        if ranges is None or RANGE_COLUMN not in table.column_names:
            yield from aggregated(table)
            return
        # Rows sorted by range label first: each label's rows are one slice, aggregated on their own;
        # a range keeps only the windows starting in it (the others lack tuples from the ranges before).
        labels = table.column(RANGE_COLUMN).to_numpy()
        cuts = [0, *(np.flatnonzero(labels[1:] != labels[:-1]) + 1).tolist(), len(labels)]
        groups = sorted((ranges[int(labels[a])], a, b) for a, b in zip(cuts, cuts[1:]))
        for (_, lo, hi), a, b in groups:
            for batch in aggregated(table.slice(a, b - a)):
                starts = pc.cast(batch.column(0), pa.int64()).to_numpy()
                first = 0 if lo is None else int(np.searchsorted(starts, lo, "left"))
                end = len(starts) if hi is None else int(np.searchsorted(starts, hi, "left"))
                if end > first:
                    yield batch.slice(first, end - first)

    timer = experiment.worker_seconds

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        table = _read(batches, input_schema)
        if table.num_rows == 0:
            return
        start = time_ns()
        table = _in_input_order(table)
        bounds = None
        for batch in results(table):
            if span is not None:
                bounds = _Span().addInPlace(bounds, _span_of(batch.column(0)))
            busy = time_ns() - start
            yield batch
            start = time_ns() - busy  # the time suspended in yield is Spark's, not ours
        if span is not None and bounds is not None:
            span.add(bounds)
        if timer is not None:
            timer.add((time_ns() - start) / 1e9)

    return run, output_schema


def _in_input_order(table: pa.Table) -> pa.Table:
    """The partition's rows sorted by (``__pao_range``, ``__pao_input``, ``__pao_position``), those of the
    columns it has, in the engine's reading order; unchanged without ``__pao_position`` (the caller put
    them in order).

    :func:`aggregate` has Spark hand the rows over in shuffle order and sorts them here: in the Python
    worker, which holds the partition anyway, a sort of one int64 column (the packed position) is a
    NumPy radix sort, and rows already in order (as blocks of the shuffle often are) are checked in one
    pass and not copied. Spark's sortWithinPartitions sorted every row in the JVM instead, spilling
    to disk when the executor's memory is small (1 GB by default in local mode).
    """
    if POSITION_COLUMN not in table.column_names:
        return table
    keys = [c for c in (RANGE_COLUMN, INPUT_COLUMN, POSITION_COLUMN) if c in table.column_names]
    column = table.column(POSITION_COLUMN)
    if keys == [POSITION_COLUMN] and pa.types.is_int64(column.type) and column.null_count == 0:
        position = column.to_numpy()
        if bool(np.all(position[1:] >= position[:-1])):
            return table
        return table.take(np.argsort(position, kind="stable"))
    # Spark's ascending sorts put nulls first, as sortWithinPartitions did.
    if _PER_KEY_NULLS:
        return table.take(pc.sort_indices(table, sort_keys=[(k, "ascending", "at_start") for k in keys]))
    return table.take(pc.sort_indices(table, sort_keys=[(k, "ascending") for k in keys], null_placement="at_start"))


# pyarrow 25 takes the null placement per sort key and deprecates the sort-wide one; earlier versions take only that.
_PER_KEY_NULLS = tuple(int(x) for x in pa.__version__.split(".")[:2]) >= (25, 0)


def _read(batches: Iterable[pa.RecordBatch], schema: pa.Schema) -> pa.Table:
    """The batches Spark hands a UDF as one table of ``schema``, whatever nullability flags each
    batch carries (Spark's differ between plans: applyInArrow marks every column nullable)."""
    relaxed = pa.schema([f.with_nullable(True) for f in schema])
    return pa.Table.from_batches([pa.RecordBatch.from_arrays(b.columns, schema=relaxed) for b in batches], relaxed)


def _tagged(inputs: DataFrame | Sequence[DataFrame], input_column: str | None,
            order_by: str | None, packed: bool = False) -> tuple[DataFrame, int, list[str]]:
    """The inputs as one DataFrame whose rows carry their input index and their position within that
    input, the number of inputs, and the columns to sort by to put each input's rows in order.

    Two forms. Either ``__pao_input`` holds the index and ``__pao_position`` the position (sort by
    both); or, with ``packed`` and no ``order_by``, ``__pao_position`` alone holds both (sort by it):
    the index in the bits above :func:`_position_shift` and Spark's row id below. One long column
    less to shuffle and convert to Arrow, and a single int64 key is one NumPy radix sort in the
    mapInArrow function (:func:`_in_input_order`), where two keys compare row by row on every tie of
    the first.
    """
    from pyspark.sql import DataFrame as SparkDataFrame
    from pyspark.sql import functions as F

    def position():
        return F.col(order_by) if order_by is not None else F.monotonically_increasing_id()

    pack = packed and order_by is None
    order = [POSITION_COLUMN] if pack else [INPUT_COLUMN, POSITION_COLUMN]
    if isinstance(inputs, SparkDataFrame):
        if input_column is None:
            n, index = 1, F.lit(0)
        else:
            top = inputs.select(F.max(input_column)).first()[0]
            n, index = 1 if top is None else int(top) + 1, F.col(input_column)
        if pack:
            tagged = _with_packed_position(inputs, index, n)
        else:
            tagged = inputs.withColumn(INPUT_COLUMN, index.cast("int")).withColumn(POSITION_COLUMN, position())
        if input_column is not None:
            tagged = tagged.drop(input_column)
        return tagged, n, order
    dfs = list(inputs)
    if not dfs or not all(isinstance(d, SparkDataFrame) for d in dfs):
        raise TypeError("inputs must be a Spark DataFrame or a non-empty list of them")
    out = None
    for i, df in enumerate(dfs):
        if pack:
            one = _with_packed_position(df, F.lit(i), len(dfs))
        else:
            one = df.withColumn(INPUT_COLUMN, F.lit(i).cast("int")).withColumn(POSITION_COLUMN, position())
        out = one if out is None else out.unionByName(one)
    return out, len(dfs), order


def _position_shift(inputs: int) -> int:
    """The bits below the input index in a packed position: as many as leave room for ``inputs``
    indexes in a non-negative long."""
    return 63 - max(inputs - 1, 0).bit_length()


def _with_packed_position(df: DataFrame, index: Any, inputs: int, ids: Any = None) -> DataFrame:
    """``df`` with ``__pao_position`` = ``index`` * 2^shift + the row's ``monotonically_increasing_id()``
    (or ``ids``, for tests).

    Sorting by it sorts by (index, id), as long as every id is below 2^shift; Spark's ids are the
    partition number times 2^33 plus the row's number in it, so that holds below 2^(shift - 33)
    partitions per input (over a million with 1,000 inputs). A larger id fails the query with an
    error rather than mixing inputs. The id is a column of its own first: read twice in one
    expression, a nondeterministic id would be two.
    """
    from pyspark.sql import functions as F

    shift = _position_shift(inputs)
    df = df.withColumn(POSITION_COLUMN, F.monotonically_increasing_id() if ids is None else ids)
    pos = F.col(POSITION_COLUMN)
    packed = F.shiftleft(index.cast("long"), shift) + pos
    if shift < 63:  # with one input every id fits
        packed = F.when(pos < F.lit(1 << shift), packed).otherwise(F.raise_error(F.concat(
            F.lit("pyarrow_ops.spark: row id "), pos.cast("string"),
            F.lit(f" leaves no room for the input index of {inputs} inputs (ids must stay below 2^{shift}); "
                  "pass order_by= or use fewer partitions"))))
    return df.withColumn(POSITION_COLUMN, packed)


def _by_input(table: pa.Table, inputs: int, body: pa.Table) -> list[pa.Table]:
    """``body``'s rows (those of the partition ``table``, another selection of its columns) one table
    per input (every input, empty or not: ties in time are broken by input index), each in the
    partition's row order.

    The index is ``__pao_input``, or the high bits of a packed ``__pao_position`` (:func:`_tagged`).
    Rows sorted by input, as :func:`aggregate` sorts them, are cut into slices without copying.
    """
    from pyarrow_ops._engine import InvalidInputError

    name = INPUT_COLUMN if INPUT_COLUMN in table.column_names else POSITION_COLUMN
    column = table.column(name)
    if column.null_count:
        row = int(np.flatnonzero(column.is_null().to_numpy(zero_copy_only=False))[0])
        raise InvalidInputError(f"row {row} of the partition has a null {name}: no input index")
    index = column.to_numpy().astype(np.int64, copy=False)
    if name == POSITION_COLUMN:
        index = index >> _position_shift(inputs)
    outside = (index < 0) | (index >= inputs)
    if outside.any():
        row = int(np.flatnonzero(outside)[0])
        raise InvalidInputError(f"row {row} of the partition has input index {int(index[row])}, "
                                f"outside 0 to {inputs - 1}")
    if bool(np.all(index[1:] >= index[:-1])):  # (true for 0 or 1 rows too)
        cuts = np.searchsorted(index, np.arange(inputs + 1), "left")
        return [body.slice(int(a), int(b - a)) for a, b in zip(cuts[:-1], cuts[1:])]
    return [body.filter(pa.array(index == i)) for i in range(inputs)]


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
    ordered: bool = True,
    split: str = "auto",
    lateness: Lateness = None,
    late: Late = "error",
    experiment: Experiment = NO_EXPERIMENT,
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
            parallelism), or time ranges for ``split="time"`` (see ``split``).
        threads: engine threads per partition (default: ``spark.task.cpus``, the cores Spark gives
            each task, so concurrent tasks do not compete for cores).
        ordered: with ``split="key"``, sort the result as in-process (the default). The engine
            then runs in this call, under ``ARROW_SETTINGS`` (see :func:`arrow_settings`), and its
            window rows are kept (a local checkpoint) for the sort, which runs at your action; a
            checkpoint does not survive the loss of an executor, so on a cluster that loses
            executors pass ``ordered=False`` and sort yourself: each partition's rows are then in
            order, the partitions are not, and nothing runs until your action. A split by time
            needs no sort: its result is in order either way, and computed at your action.
        split: how the rows are spread over Spark partitions. ``"key"``: by key hash, each key's rows
            in one partition, then the result is sorted (a shuffle of the window rows). ``"time"``:
            by ranges of window starts, each range's rows (and those of the windows across its end)
            in one partition, and the result is in order as computed, with no sort; it needs one
            Spark job up front for the least and greatest time, and a Spark timestamp or integer
            time column. ``"auto"`` (the default): ``"key"`` with a key, ``"time"`` without one.
            Where the rows cannot be split (no key, and too short a time span or another time
            type), they meet in one partition, with a warning that says why.
        lateness, late: inputs out of time order within a bound, as in-process, with ``late``
            ``"error"`` or ``"drop"`` (the late rows: :func:`late_rows`); docs/spark.md.
        experiment: for benchmarks: a :class:`pyarrow_ops.Experiment` whose ``worker_seconds``
            accumulator gets the Python workers' seconds (see :func:`aggregate_udf`).

    Returns:
        A DataFrame with columns window_start, window_end, the key columns and the aggregates,
        ordered by window start, then key (nulls last), as in-process.

    Raises:
        UsageError: Spark's Python workers cannot import pyarrow_ops (:func:`check_workers`).

    Where the result is computed at your action (not sorted here), the session's settings apply
    then; a session without ``ARROW_SETTINGS`` gets a warning, once, naming the fix.
    """
    from pyspark.sql import functions as F
    from pyspark.sql.pandas.types import from_arrow_schema, to_arrow_schema

    keys = _keys(key)
    tagged, n_inputs, order = _tagged(inputs, input_column, order_by, packed=True)
    check_workers(tagged.sparkSession)
    # Only the columns the query reads travel through the shuffle (Spark cannot prune a UDF's
    # input itself); a missing one is left for the engine's error, which names it.
    needed = dict.fromkeys([time, *keys, *(a.column for a in aggs.values() if isinstance(a, Agg) and a.column)])
    tagged = tagged.select(*[c for c in needed if c in tagged.columns], *order)
    if (lateness, late) != (None, "error"):  # late rows out, each input renumbered by time
        if time not in tagged.columns:
            raise _engine.InvalidInputError(f"time column '{time}' not found in the inputs")
        time_type = to_arrow_schema(tagged.select(time).schema, timezone="UTC").field(time).type
        tagged = in_time_order(tagged, time, n_inputs, (lateness, late), time_type,
                               packed_shift=_position_shift(n_inputs) if order == [POSITION_COLUMN] else None)

    spark = tagged.sparkSession
    threads = threads or _task_cpus(spark)
    n = partitions or spark.sparkContext.defaultParallelism
    if split not in ("auto", "key", "time"):
        raise ValueError(f"split must be 'auto', 'key' or 'time', got {split!r}")
    if split == "auto":
        split = "key" if keys else "time"
    # The partitions' rows come in shuffle order: the mapInArrow function sorts them (_in_input_order).
    ranges = None
    if split == "key" and keys:
        spread = tagged.repartition(n, *[F.col(k) for k in keys])
    else:
        timed = _split_by_time(tagged, time, window, n) if split == "time" else None
        if timed is None:
            why = "the query has no key" if not keys else "split='time' was asked for"
            if split == "time":
                why += f", and its rows could not be split by time ({_TIME_SPLIT_LIMITS})"
            warnings.warn(f"pyarrow_ops.spark.aggregate: {why}, so every row must meet in one Spark partition "
                          "(one Python worker) to be aggregated in merged order", stacklevel=2)
            spread = tagged.repartition(1)
        else:
            spread, ranges = timed
    lazy = not ordered or ranges is not None or not keys  # in order already: time ranges, or one partition
    # The window starts' bounds, from the engine's job, let the sort cut its ranges without sampling.
    span = None if lazy else spark.sparkContext.accumulator(None, _Span())
    arrow_in = to_arrow_schema(spread.schema, timezone="UTC")
    fn, arrow_out = aggregate_udf(arrow_in, n_inputs, time=time, key=keys or None, window=window, aggs=aggs,
                                  design=design, threads=threads, experiment=experiment, ranges=ranges, span=span)
    result = spread.mapInArrow(fn, from_arrow_schema(arrow_out, prefer_timestamp_ntz=False))
    if lazy:
        return _lazy(result, "aggregate")
    return _sorted(result, [F.col("window_start"), *[F.asc_nulls_last(k) for k in keys]], n, span)


def _task_cpus(spark: SparkSession) -> int:
    """The cores Spark allots each task (``spark.task.cpus``, 1 unless configured): the engine's
    default thread count inside a task, since every core of the executor may run a task."""
    return int(spark.sparkContext.getConf().get("spark.task.cpus", "1"))


def _need_positions(input_schema: pa.Schema) -> None:
    if POSITION_COLUMN not in input_schema.names:
        raise ValueError(f"a group's rows need the position column {POSITION_COLUMN!r} as well: Spark does "
                         "not keep their order within a group")


def _per_group(fn: Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]],
               output_schema: pa.Schema) -> tuple[Callable[[pa.Table], pa.Table], pa.Schema]:
    """A mapInArrow function as an applyInArrow one: the group's rows sorted into input order
    (Spark hands them over in none), then ``fn``."""

    def run(table: pa.Table) -> pa.Table:
        ordered = table.sort_by([(INPUT_COLUMN, "ascending"), (POSITION_COLUMN, "ascending")])
        return pa.Table.from_batches(list(fn(iter(ordered.to_batches()))), schema=output_schema)

    return run, output_schema


def aggregate_group_udf(
    input_schema: pa.Schema,
    inputs: int,
    *,
    time: str,
    key: str | list[str] | None = None,
    window: Window,
    aggs: Mapping[str, Agg],
    design: str = "auto",
    threads: int | None = None,
) -> tuple[Callable[[pa.Table], pa.Table], pa.Schema]:
    """A function for ``GroupedData.applyInArrow`` that aggregates one group, and its output schema.

    Spark hands each group's rows over in no particular order, so the rows must carry both
    ``__pao_input`` (the input index) and ``__pao_position`` (the position within the input): the
    function sorts by them, then aggregates as :func:`aggregate_udf` does. Group by the query's
    key (or a part of it), e.g. ``df.groupBy("meter").applyInArrow(fn, schema)``.
    """
    _need_positions(input_schema)
    fn, output_schema = aggregate_udf(input_schema, inputs, time=time, key=key, window=window, aggs=aggs,
                                      design=design, threads=threads)
    return _per_group(fn, output_schema)


# --- Pipelines -------------------------------------------------------------------------------
#
# A pipeline runs on Spark in stages, as the auto-parallelization paper forms parallel regions: a
# stage is a run of operators that can share one partitioning of the rows, and between stages the
# rows are shuffled by the next stage's key. Order is restored by sequence numbers. Every row
# carries sequence columns whose lexicographic order (nulls last) is the order
# of the sequential run:
#   - at the input, the merged order itself: (time, input, position);
#   - a stage appends, for each output row, the number of its row among the outputs of the same
#     stage input row (rows a stage emits for one input row are consecutive in the sequential run,
#     since the run pushes each tuple through the whole chain before the next one);
#   - rows a keyed window_aggregate emits at the end of the input have no producing row: their
#     earlier sequence columns are null (after every row that has one) and they are ordered by
#     (window start, key), as the engine emits them; such an operator therefore ends its stage;
#   - a one-partition stage (stateful operators) sees every row in order, so its output's order is
#     its row number, which replaces the earlier columns.
# Inside a stage the engine carries each row's stage input row number (the int64 column
# ROW_COLUMN, see ops::carry_column), from which the UDF looks up the sequence columns.

ROW_COLUMN = "__pao_row"
TIME_COLUMN = "__pao_time"


class _Stage:
    """Consecutive operators that run in one Spark pass."""

    def __init__(self) -> None:
        self.steps: list[Step] = []
        self.key: list[str] | None = None  # partition columns; None: any split (stateless only)
        self.single = False  # one partition: a stateful operator needs every row
        self.finish_order: list[str] = []  # keyed window_aggregate last: window_start, its keys
        self.closed = False  # nothing may join (after a keyed window_aggregate)

    def describe(self) -> str:
        split = "one partition" if self.single else (
            f"partitioned by [{', '.join(self.key)}]" if self.key else "any partitioning")
        return f"{', '.join(step.name for step in self.steps)}  ({split})"


def _stages(pipeline: Pipeline, schema: pa.Schema) -> list[_Stage]:
    """The Spark passes of a chain, from the planner's parallel regions (runtime/planner.h, the
    same plan an in-process run is fused by): a region is a stage, partitioned by the region's key
    (any partitioning for a stateless one); an operator outside every region (stateful) runs in a
    one-partition stage, which it shares with the stateless stage before it or the stateless region
    after it (one partition suits them too); a keyed window_aggregate ends its stage (the windows
    it emits at the end are ordered across partitions, see _stage_udf)."""
    import pyarrow_ops as po

    graph = po.plan({"result": Pipeline.from_steps(pipeline.steps, time=pipeline.time, inputs=schema.empty_table())},
                    fuse=False)
    stages: list[_Stage] = []
    stage: _Stage | None = None
    region_of_stage: int | None = None
    for step, op in zip(pipeline.steps, graph["operators"], strict=True):
        region = op["region"]
        if stage is not None and stage.closed:
            stage = None
        if region is not None:
            key = graph["regions"][region]["key"] or None
            join = stage is not None and (region_of_stage == region or (stage.single and key is None))
            if not join:
                stage, region_of_stage = _Stage(), region
                stage.key = key
                stages.append(stage)
        else:  # sequential: every row in order, one partition
            if stage is None or not (stage.single or stage.key is None):
                stage = _Stage()
                stages.append(stage)
            stage.single, stage.key, region_of_stage = True, None, None
        stage.steps.append(step)
        if step.name == "window_aggregate" and op["keys"]:
            stage.finish_order, stage.closed = ["window_start", *op["keys"]], True
    return stages


def _spark_type(type_: pa.DataType) -> pa.DataType:
    """A type Spark takes from Arrow: it has no unsigned integers and no large strings."""
    if pa.types.is_uint64(type_):
        return pa.decimal128(20, 0)
    if pa.types.is_unsigned_integer(type_):
        return pa.int64()
    if pa.types.is_large_string(type_):
        return pa.string()
    if pa.types.is_large_binary(type_):
        return pa.binary()
    return type_


def _for_spark(schema: pa.Schema) -> pa.Schema:
    return pa.schema([f.with_type(_spark_type(f.type)) for f in schema])


def _stage_pipeline(stage: _Stage, time: str, carry: bool) -> Pipeline:
    """The stage's operators as a Pipeline (inputs set at run time). With ``carry`` every operator
    keeps ROW_COLUMN: selects list it, map_batches functions get it back after the call."""
    steps = []
    for step in stage.steps:
        if carry and step.name == "select":
            from pyarrow_ops.expr import col

            step = Step("select", ([*step.args[0], (ROW_COLUMN, col(ROW_COLUMN))],))
        elif carry and step.name == "map_batches":
            step = Step("map_batches", _carrying_map(*step.args))
        steps.append(step)
    return Pipeline.from_steps(steps, time=time)


def _carrying_map(fn: Callable[[pa.RecordBatch], pa.RecordBatch], schema: pa.Schema | None) -> tuple[Any, ...]:
    """``fn`` wrapped to keep ROW_COLUMN. When ``fn`` returns as many rows as it got, row i is
    taken to come from row i; otherwise ``fn`` is called once per row to learn how many rows each
    produces (its contract makes a batch's output the concatenation of its rows' outputs), which
    is slower but exact."""
    import numpy as np

    def carrying(batch: pa.RecordBatch) -> pa.RecordBatch:
        rows = batch.column(ROW_COLUMN)
        body = batch.drop_columns([ROW_COLUMN])
        out = fn(body)
        if isinstance(out, pa.RecordBatch) and out.num_rows != batch.num_rows:
            counts = [fn(body.slice(i, 1)).num_rows for i in range(batch.num_rows)]
            if sum(counts) != out.num_rows:
                raise ValueError(f"a map_batches function gave {out.num_rows} rows for a batch of {batch.num_rows} "
                                 f"but {sum(counts)} for its rows one by one: it must treat rows independently")
            rows = pa.array(np.repeat(rows.to_numpy(), counts), pa.int64())
        if not isinstance(out, pa.RecordBatch):
            return out  # the engine reports the wrong type, naming the operator
        return out.append_column(pa.field(ROW_COLUMN, pa.int64()), rows)

    return carrying, None if schema is None else schema.append(pa.field(ROW_COLUMN, pa.int64()))


def _sub_numbers(rows: pa.Array, last: list[int]) -> pa.Array:
    """For each output row, its number among the consecutive rows with the same ``rows`` value
    (null, a row with no producing row, counts as one value); ``last`` = [value, number] of the
    previous batch's last row, updated."""
    import numpy as np

    r = rows.fill_null(-1).to_numpy(zero_copy_only=False)
    n = len(r)
    index = np.arange(n, dtype=np.int64)
    prev = np.empty(n, dtype=r.dtype)
    if n:
        prev[0] = last[0]
        prev[1:] = r[:-1]
    starts = r != prev
    start = np.maximum.accumulate(np.where(starts, index, 0))
    sub = index - start
    if n:
        continuing = start == 0
        if not starts[0]:  # the batch goes on with the previous batch's last run
            sub[continuing] += last[1] + 1
        last[0], last[1] = int(r[-1]), int(sub[-1])
    return pa.array(sub, pa.int64())


def _stage_udf(
    stage: _Stage,
    name: str,
    first: bool,
    spark_in: pa.Schema,
    engine_in: pa.Schema,
    sequence: list[str],
    inputs: int,
    time: str,
    threads: int | None,
) -> tuple[Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]], pa.Schema, pa.Schema, list[str]]:
    """The mapInArrow function of a stage, its output schema (as Spark sees it and as the engine
    produces it) and the sequence columns after it; ``name`` prefixes the sequence columns it adds
    (``__pao_s<k>``, unique in the query).

    ``spark_in``: the batches Spark hands over (data, sequence columns, on the first stage
    ``__pao_input``); ``engine_in``: the data columns with the types the engine gave them (Spark
    turns uint64 into decimal, which is cast back). The ``first`` stage over a source merges its
    inputs by time; the others read their rows in sequence order, as sorted by Spark.
    """
    from pyarrow_ops import _engine

    carry = not stage.single
    data = pa.schema([*engine_in, pa.field(ROW_COLUMN, pa.int64())]) if carry else engine_in
    pipeline = _stage_pipeline(stage, time, carry)
    plan = pipeline.plan(data, carry=ROW_COLUMN if carry else "")
    engine_out = plan[-1]["output_schema"]
    if carry:
        engine_out = engine_out.remove(engine_out.get_field_index(ROW_COLUMN))
        order = [pa.field(f"{name}_{c}", engine_out.field(c).type) for c in stage.finish_order]
        added = [*order, pa.field(name, pa.int64())]
        kept = [spark_in.field(c).with_nullable(True) for c in sequence]  # null: no producing row
    else:
        order, added, kept = [], [pa.field(name, pa.int64())], []
    out_sequence = [f.name for f in (*kept, *added)]
    spark_out = pa.schema([*_for_spark(engine_out), *kept, *added])

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        table = _read(batches, spark_in)
        if table.num_rows == 0:
            return
        body = table.select(engine_in.names).cast(engine_in)
        if carry:
            body = body.append_column(pa.field(ROW_COLUMN, pa.int64()), pa.array(range(table.num_rows), pa.int64()))
        if first:  # the inputs, merged by the engine
            stage_run, merge = pipeline.with_inputs(_by_input(table, inputs, body)), True
        else:
            stage_run, merge = pipeline.with_inputs([body]), False
        options = _engine.PipelineOptions(threads=threads or 0)
        result = stage_run._start(options, merge=merge, carry=ROW_COLUMN if carry else "")
        earlier = table.select(sequence) if carry else None
        last = [-2, -1]
        emitted = 0
        for batch in result:
            if batch.num_rows == 0:
                continue
            columns = [batch.column(f.name).cast(f.type) for f in spark_out if f.name in engine_out.names]
            if carry:
                rows = batch.column(ROW_COLUMN)
                columns += earlier.take(rows).columns  # nulls where no row produced it
                finished = pc.is_null(rows)
                for f, c in zip(order, stage.finish_order):
                    columns.append(pc.if_else(finished, batch.column(c), pa.nulls(batch.num_rows, f.type)))
                columns.append(_sub_numbers(rows, last))
            else:
                columns.append(pa.array(range(emitted, emitted + batch.num_rows), pa.int64()))
            emitted += batch.num_rows
            yield pa.RecordBatch.from_arrays([c.combine_chunks() if isinstance(c, pa.ChunkedArray) else c
                                              for c in columns], schema=spark_out)

    return run, spark_out, engine_out, out_sequence


def run(
    pipeline: Pipeline | Mapping[str, Pipeline],
    inputs: DataFrame | Sequence[DataFrame] | Mapping[Pipeline, DataFrame | Sequence[DataFrame]],
    *,
    input_column: str | None = None,
    order_by: str | None = None,
    partitions: int | None = None,
    threads: int | None = None,
    ordered: bool = True,
) -> DataFrame | dict[str, DataFrame]:
    """Runs a :class:`pyarrow_ops.Pipeline`'s operators on Spark DataFrames: the table an
    in-process ``pipeline.run()`` over the same data gives, in the same order.

    Args:
        pipeline: the operators and time column to run; its own inputs are not read (build it on
            local data, a sample or an empty table of the inputs' schema).
        inputs, input_column, order_by: as for :func:`aggregate`; both columns are bookkeeping
            and are not passed to the operators (keep a copy under another name to use one).
        partitions: Spark partitions per keyed stage (default: Spark's default parallelism).
        threads: engine threads per partition (default: ``spark.task.cpus``).
        ordered: sort the result as in-process (the default), as for :func:`aggregate`: the stages
            then run in this call, under ``ARROW_SETTINGS``; with ``False`` the rows are all there
            but in no set order, the sequence columns go too, and nothing runs until your action.

    The operators run in stages (docs/spark.md): consecutive operators whose keys share a column
    run in one pass over rows hashed by that column; a stateful operator (``top_k``, a
    ``window_aggregate`` without key) runs on one partition, with a warning. Between stages rows
    are shuffled by the next key, and the result is ordered by the sequence numbers each stage
    attaches. Unsigned integer columns come back as Spark's types (uint64 as decimal(20, 0)). A
    ``map_batches`` function that does not return one row per input row is called again row by
    row on the batches where it does not, to match output rows to their input rows.

    Graphs (docs/graphs.md): pass a mapping of names to pipelines (a dict of DataFrames comes back),
    or one pipeline with a union or join upstream (one DataFrame), and ``inputs`` as a mapping of
    each source pipeline (``po.Pipeline(...)``, as built) to its DataFrame or list of DataFrames; a
    graph of one source also takes them as for a chain. The graph is planned as in-process (the
    same regions as stages) and every output is the table ``po.run`` gives, row for row
    (pyarrow_ops/spark/graphs.py explains how). ``input_column``, ``order_by`` and ``ordered=False``
    are for chains only.
    """
    from pyspark.sql import functions as F
    from pyspark.sql.pandas.types import from_arrow_schema, to_arrow_schema

    from pyarrow_ops import _engine

    if isinstance(pipeline, Mapping) or not pipeline.is_chain:
        from pyarrow_ops.pipeline import _Graph
        from pyarrow_ops.spark.graphs import run_graph

        if input_column is not None or order_by is not None or not ordered:
            raise _engine.UsageError("input_column, order_by and ordered=False are for chains; a graph's sources "
                                     "number their rows as Spark hands them over and its outputs are sorted")
        outputs = dict(pipeline) if isinstance(pipeline, Mapping) else {"result": pipeline}
        if not isinstance(inputs, Mapping):
            graph = _Graph(outputs)
            if len(graph.inputs) != 1:
                raise TypeError(f"this graph reads {len(graph.inputs)} sources: pass inputs as a mapping of each "
                                "source pipeline to its DataFrame(s)")
            sole = Pipeline.from_steps((), time=graph.time)
            sole._inputs = graph.inputs[0]
            inputs = {sole: inputs}
        result = run_graph(outputs, inputs, partitions=partitions, threads=threads)
        return result if isinstance(pipeline, Mapping) else result["result"]

    steps, time = pipeline.steps, pipeline.time
    if not steps:
        raise _engine.InvalidInputError("the pipeline has no operators; add one, e.g. .filter(...)")
    tagged, n_inputs, _ = _tagged(inputs, input_column, order_by)
    check_workers(tagged.sparkSession)
    if order_by is not None and order_by != time:
        tagged = tagged.drop(order_by)
    spark_in = to_arrow_schema(tagged.schema, timezone="UTC")
    engine_in = pa.schema([f for f in spark_in if not f.name.startswith("__pao_")])
    stages = _stages(pipeline, engine_in)
    if pipeline._time_order != (None, "error"):  # lateness= or late=: late rows out, each input by time
        if time not in engine_in.names:
            raise _engine.InvalidInputError(f"time column '{time}' not found; the inputs' columns are: "
                                            f"{', '.join(engine_in.names)}")
        tagged = in_time_order(tagged, time, n_inputs, pipeline._time_order, engine_in.field(time).type)

    threads = threads or _task_cpus(tagged.sparkSession)
    df = tagged.withColumn(TIME_COLUMN, F.col(time))
    sequence = [TIME_COLUMN, INPUT_COLUMN, POSITION_COLUMN]
    n = partitions or df.sparkSession.sparkContext.defaultParallelism
    df, sequence, _ = _run_stages(df, stages, engine_in, sequence, n_inputs, time, threads, n, itertools.count(),
                                  from_source=True)
    if not ordered:
        return _lazy(df.drop(*sequence), "run")
    return _sorted(df, [F.asc_nulls_last(c) for c in sequence], n).drop(*sequence)


def _run_stages(df: DataFrame, stages: list[_Stage], engine_in: pa.Schema, sequence: list[str], inputs: int,
                time: str, threads: int | None, partitions: int, names: Iterator[int], *,
                from_source: bool) -> tuple[DataFrame, list[str], pa.Schema]:
    """``df`` through ``stages``: each repartitioned by its key (one partition for a stateful one,
    with a warning), sorted within partitions in sequence order, run by mapInArrow; returns the
    result, its sequence columns and its data columns' engine schema. ``names`` numbers the stages
    of the whole query. ``from_source``: ``df`` holds a source's tagged inputs, which the first stage
    merges by time."""
    from pyspark.sql import functions as F
    from pyspark.sql.pandas.types import from_arrow_schema, to_arrow_schema

    for index, stage in enumerate(stages):
        if stage.single:
            warnings.warn(f"pyarrow_ops.spark.run: stage {index} ({stage.describe()}) has a stateful operator, "
                          "which needs every row in order: it runs in one Spark partition (one Python worker)",
                          stacklevel=3)
            df = df.repartition(1)
        elif stage.key:
            df = df.repartition(partitions, *[F.col(k) for k in stage.key])
        else:
            df = df.repartition(partitions)
        first = from_source and index == 0
        order = [INPUT_COLUMN, POSITION_COLUMN] if first else sequence
        df = df.sortWithinPartitions(*[F.asc_nulls_last(c) for c in order])
        spark_in = to_arrow_schema(df.schema, timezone="UTC")
        fn, spark_out, engine_in, sequence = _stage_udf(stage, f"__pao_s{next(names)}", first, spark_in, engine_in,
                                                        sequence, inputs, time, threads)
        df = df.mapInArrow(fn, from_arrow_schema(spark_out, prefer_timestamp_ntz=False))
    return df, sequence, engine_in


def stages(pipeline: Pipeline) -> list[str]:
    """How :func:`run` splits ``pipeline`` into Spark passes: one line per stage, its operators and
    partitioning (on the schema of the pipeline's first input)."""
    return [s.describe() for s in _stages(pipeline, pipeline.input_schema)]


def pipeline_udf(
    pipeline: Pipeline, input_schema: pa.Schema, inputs: int = 1, *, threads: int | None = None
) -> tuple[Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]], pa.Schema]:
    """A function for ``DataFrame.mapInArrow`` that runs ``pipeline``'s operators over one Spark
    partition, and its output schema (pyarrow).

    As for :func:`aggregate_udf`, the rows carry ``__pao_input`` and are in input order within
    each input. Every partitioned operator sees only its partition's rows, so partition by a
    column every operator's key contains, and a stateful operator needs one partition;
    :func:`run` arranges all of that, stage by stage, and restores the global order.
    """
    if INPUT_COLUMN not in input_schema.names:
        raise ValueError(f"the partition's rows need the input index column {INPUT_COLUMN!r}")
    stage = _Stage()
    stage.steps, stage.single = list(pipeline.steps), True  # the whole chain on the rows as they are
    engine_in = pa.schema([f for f in input_schema if not f.name.startswith("__pao_")])
    fn, spark_out, _, sequence = _stage_udf(stage, "__pao_s0", True, input_schema, engine_in, [], inputs,
                                             pipeline.time, threads)
    output_schema = pa.schema([f for f in spark_out if f.name not in sequence])

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in fn(batches):
            yield batch.drop_columns(sequence)

    return run, output_schema


def pipeline_group_udf(
    pipeline: Pipeline, input_schema: pa.Schema, inputs: int = 1, *, threads: int | None = None
) -> tuple[Callable[[pa.Table], pa.Table], pa.Schema]:
    """A function for ``GroupedData.applyInArrow`` that runs ``pipeline``'s operators over one
    group, and its output schema: as :func:`aggregate_group_udf`, the rows carry ``__pao_input``
    and ``__pao_position``, by which the function sorts them first."""
    _need_positions(input_schema)
    fn, output_schema = pipeline_udf(pipeline, input_schema, inputs, threads=threads)
    return _per_group(fn, output_schema)
