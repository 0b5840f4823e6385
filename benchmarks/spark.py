"""The engine inside Spark against Spark's own windowed aggregation, on Spark local[2], printed as tables.

    python -m benchmarks.spark [--rows 2000000,10000000] [--queries k-OI,W-OI] [--repeat 3]
        [--formulations window,explode] [--inputs 4] [--partitions N] [--plain-session] [--json PATH]

The session. By default, pyarrow_ops.spark.session() (local[2], 4 GB driver, 4 shuffle partitions, the module's
ARROW_SETTINGS). With ``--plain-session``, the session a user already has: ``SparkSession.builder.master(
"local[2]").getOrCreate()`` and nothing else (1 GB driver, 200 shuffle partitions, Spark's Arrow defaults); its
Python workers are whatever ``PYSPARK_PYTHON`` names, so export it first, as a user would (pyarrow_ops.spark
raises an error naming the fix where they cannot import pyarrow_ops). The settings that bear on the run are
printed first.

What runs. For each row count, the smart-meter workload of benchmarks.aggregate (243 meters reporting
every second through ``--inputs`` concentrators, one time-sorted table per concentrator) goes into Spark once,
as one DataFrame per input (``createDataFrame`` of the Arrow table, ``--partitions`` partitions each, in input
order), checkpointed to files (so that, like inputs read from files, its tasks do not carry the rows: see
``prepare``), cached and counted. Building and caching those DataFrames is not timed; every run starts from the
same cached DataFrames. Then, for each query of bench_aggregate's ``QUERIES`` (k-OI: count per meter, 30 s windows
every 3 s; W-OI: mean kWh per meter, 40 s every 2 s, each tuple in 20 windows):

* ``pyarrow_ops.spark``: :func:`pyarrow_ops.spark.aggregate` over the input DataFrames (rows hashed by meter
  over ``--partitions`` Spark partitions, default the session's default parallelism; the engine runs in the
  Python workers through ``mapInArrow``);
* ``spark-window``, ``spark-explode``: Spark's own formulations of the same query
  (:func:`benchmarks.peers.spark_aggregate_df`: ``window()`` or ``explode(sequence(...))``, then a group-by),
  over the union of the same input DataFrames with the time as microseconds (``unix_micros``); their shuffle
  has the session's ``spark.sql.shuffle.partitions`` (4, or 200 in a plain session), which adaptive execution
  coalesces.

Once per (row count, query), untimed, each side's result is collected (written to Parquet files by the tasks
and read back: ``toArrow`` would need every row in the driver's JVM heap, 1 GB in a plain session) and compared
with the engine's, row for row: identical, except the floating-point aggregate (the mean) within a relative 1e-9, as
bench_aggregate compares peers (Spark adds floats in another order); "checked equal" is printed. This also
warms up both plans. Then the engines run ``--repeat`` times, interleaved.

What is timed. Each run, end to end: building the plan, then ``df.write.format("noop")``, which computes every
output row, sorted by window start then meter as the engine orders them, and discards them without collecting
them to the driver (the same for every engine, so collection costs are not compared). Building the plan of
pyarrow_ops.spark runs the engine's job (see below), so the split between the two differs between engines;
their sum is what is compared.

How to read the table (one per row count):

* ``wall s``: the best of ``--repeat`` runs; ``Mt/s``: input tuples per wall second.
* ``task s``: the run's Spark task time: the executor run time of every task of every job of the run (read
  from Spark's status store after the run), summed. On local[2] two tasks run at a time, so it is at most
  about 2 x wall. Where the status store cannot be read (it is reached through PySpark's private JVM handle),
  the column shows the bound ``<=cores x wall`` instead, marked ``<=``.
* ``python s``: seconds the Python workers spend in the engine's work (splitting a partition by input and
  aggregating), summed over tasks: the ``po.Experiment(worker_seconds=...)`` accumulator of :func:`pyarrow_ops.spark.aggregate`. It
  leaves out moving batches between the JVM and Python. Spark's formulations run no Python ("-"). The
  result's final sort samples its input in a job of its own; pyarrow_ops.spark computes its window rows
  when the plan is built (an eager local checkpoint, under its Arrow settings) and the sort reads them, so the
  engine runs once per partition.
* ``not engine s``: task s - python s: task time outside the engine (scanning the cached inputs, the shuffle,
  sorting partitions, Arrow transfers to and from the Python workers, the final sort); an upper bound when
  task s is.
* ``speedup``: on the pyarrow_ops.spark row, the best Spark formulation's wall over pyarrow_ops.spark's: above 1
  means the engine inside Spark is faster. A last line per query repeats it.

The machine's CPU count and load average are printed first: Spark's figures move a lot on a busy machine, so
compare within one run.
"""

from __future__ import annotations

import argparse
import datetime as dt
import itertools
import json
import os
import shutil
import tempfile
import time as clock
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

import pyarrow as pa

import pyarrow_ops as po
from benchmarks import peers
from benchmarks.aggregate import QUERIES, Query, same_table
from pyarrow_ops.datasets import smart_meter_readings
from pyarrow_ops.spark.session import settings_in_force

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

ENGINE = "pyarrow_ops.spark"
ENGINES = (ENGINE, *(f"spark-{f}" for f in peers.SPARK_FORMULATIONS))
DEFAULT_ROWS = "2000000,10000000"
DEFAULT_QUERIES = "k-OI,W-OI"
COLUMNS = ["time", "meter", "kwh"]  # what the meter queries read; the rest of the dataset stays out of Spark
_groups = itertools.count()
LEGEND = """\
  wall s: the best run, from building the plan to the end of a noop write (every output row computed and
    sorted, none collected); Mt/s: input tuples / wall s
  task s: the run's tasks' executor run time summed (Spark's status store), at most ~{cores} x wall s
  python s: the Python workers' engine seconds (split by input, aggregate), summed over tasks; moving batches
    between the JVM and Python not included
  not engine s: task s - python s, the task time outside the engine (scans, shuffle, sorts, Arrow transfers);
    "<=" marks the bound {cores} x wall s where the status store could not be read
  speedup: the best Spark formulation's wall s / pyarrow_ops.spark's (above 1: the engine inside Spark wins)"""


@dataclass
class Workload:
    """The inputs of one row count: the Arrow tables and the same rows as cached Spark DataFrames."""

    tables: list[pa.Table]
    frames: list[DataFrame]
    partitions: int
    checkpoints: str | None = None  # the directory of the frames' checkpoint files, removed by release()

    @property
    def rows(self) -> int:
        return sum(t.num_rows for t in self.tables)

    def release(self) -> None:
        for df in self.frames:
            df.unpersist()
        if self.checkpoints is not None:
            shutil.rmtree(self.checkpoints, ignore_errors=True)


@dataclass
class Run:
    wall_s: float
    task_s: float | None  # None: the status store could not be read
    python_s: float | None  # None: no Python worker ran (Spark's formulations)


@dataclass
class Result:
    rows: int
    inputs: int
    query: str
    engine: str
    runs: list[Run] = field(default_factory=list)
    output_rows: int = 0

    @property
    def best(self) -> Run:
        return min(self.runs, key=lambda r: r.wall_s)


def meter_tables(rows: int, inputs: int) -> list[pa.Table]:
    """bench_aggregate's smart-meter workload, the queried columns only, the meter as int64 (Spark has no
    unsigned integers: the Spark peers widen uint32 the same way)."""
    tables = smart_meter_readings(rows=rows, meters=243, concentrators=inputs, period_ms=1_000, seed=1)
    return [t.select(COLUMNS).set_column(1, "meter", t.column("meter").cast(pa.int64())) for t in tables]


def prepare(spark: SparkSession, rows: int, inputs: int, partitions: int | None = None) -> Workload:
    """The workload as one cached, counted DataFrame per input of ``partitions`` partitions (default: the
    session's default parallelism), in input order, read from checkpoint files as from any file source.

    Sets the SparkContext's checkpoint directory to a temporary one, removed by ``Workload.release``.
    """
    partitions = partitions or spark.sparkContext.defaultParallelism
    tables = meter_tables(rows, inputs)
    checkpoints = tempfile.mkdtemp(prefix="bench_spark-")
    spark.sparkContext.setCheckpointDir(checkpoints)
    frames = []
    for table in tables:
        # createDataFrame(pa.Table) makes one partition per Arrow batch of at most this many rows: with
        # the default 10,000, an input of 2.5M rows would be 250 partitions, and every run would pay for
        # a thousand tasks that real inputs (files of ~128 MB) do not have.
        # One chunk, so that the batches are cut at this size only (and none is empty: PySpark 4.3 drops
        # every row after an empty batch, see peers._to_spark). The setting also sizes the batches
        # mapInArrow hands the engine, so it is back as it was afterwards.
        batch = {"spark.sql.execution.arrow.maxRecordsPerBatch": str(max(1, -(-table.num_rows // partitions)))}
        with settings_in_force(spark, batch):
            # A DataFrame created from local rows keeps them in its plan, and every task over it, the cache's
            # included, carries its partition's rows: measured at 2M tuples in a plain session, every run of
            # every engine paid about 2 s of driver planning and 1.5 s of task deserialization for them, which
            # inputs read from files do not. A checkpoint (files, in order) cuts that lineage.
            df = spark.createDataFrame(table.combine_chunks()).checkpoint(eager=True).cache()
            df.count()
        frames.append(df)
    return Workload(tables, frames, partitions, checkpoints)


def _engine_aggs(q: Query) -> dict:
    return {q.function: getattr(po, q.function)(q.column) if q.column else po.count()}


def plan(engine: str, workload: Workload, q: Query, timer: Any = None) -> DataFrame:
    """The query on the workload's cached DataFrames as ``engine`` computes it (a DataFrame, not run)."""
    from pyspark.sql import functions as F

    from pyarrow_ops import spark as ps

    if engine == ENGINE:
        # Timedeltas, not ints: Spark hands the engine microsecond timestamps, not the tables' milliseconds.
        window = po.sliding(dt.timedelta(milliseconds=q.size_ms), dt.timedelta(milliseconds=q.advance_ms))
        return ps.aggregate(workload.frames, time="time", key=q.key, window=window, aggs=_engine_aggs(q),
                            partitions=workload.partitions, experiment=po.Experiment(worker_seconds=timer))
    formulation = engine.removeprefix("spark-")
    union = workload.frames[0]
    for df in workload.frames[1:]:
        union = union.unionByName(df)
    columns = [F.unix_micros("time").alias("__t"), q.key] + ([q.column] if q.column else [])
    if q.function in ("first", "last"):
        # Ties in time by (input, position): the union's partitions are the inputs' in order, and so are
        # the ids (the same assumption pyarrow_ops.spark makes without order_by).
        columns.append(F.monotonically_increasing_id().alias("__g"))
    schema = workload.tables[0].schema
    return peers.spark_aggregate_df(union.select(*columns), schema=schema, key=[q.key], size=q.size_ms * 1000,
                                    advance=q.advance_ms * 1000, aggs={q.function: (q.function, q.column)},
                                    formulation=formulation)


def materialise(engine: str, workload: Workload, q: Query, timer: Any = None) -> None:
    """Builds the plan and computes every output row, sorted, with a noop write: nothing reaches the driver."""
    plan(engine, workload, q, timer).write.format("noop").mode("overwrite").save()


def run_once(spark: SparkSession, engine: str, workload: Workload, q: Query) -> Run:
    """One timed :func:`materialise`, with its task and Python-worker seconds."""
    sc = spark.sparkContext
    # The run's jobs in their own job group, for task_seconds; the caller's group is put back after.
    saved = {k: sc.getLocalProperty(k) for k in ("spark.jobGroup.id", "spark.job.description")}
    group = f"benchmarks.spark-{os.getpid()}-{next(_groups)}"
    sc.setJobGroup(group, f"benchmarks.spark {engine}")
    try:
        timer = sc.accumulator(0.0) if engine == ENGINE else None
        start = clock.perf_counter()
        materialise(engine, workload, q, timer)
        wall = clock.perf_counter() - start
    finally:
        for k, v in saved.items():
            sc.setLocalProperty(k, v)  # None removes it
    return Run(wall, task_seconds(spark, group), timer.value if timer is not None else None)


def task_seconds(spark: SparkSession, group: str) -> float | None:
    """The summed executor run time of the tasks of the job group's jobs, from Spark's status store; None
    where it cannot be read.

    Job groups and ``statusTracker`` are public PySpark; the stages' executorRunTime (the task metric of
    Spark's monitoring REST API) is not exposed to Python, so it is read through the JVM's AppStatusStore,
    which is private and may change between Spark versions: any failure gives None.
    """
    sc = spark.sparkContext
    try:
        jsc = sc._jsc.sc()
        # The status store is fed asynchronously by the listener bus: let it catch up with the run's events.
        jsc.listenerBus().waitUntilEmpty()
        tracker = sc.statusTracker()
        jobs = [tracker.getJobInfo(j) for j in tracker.getJobIdsForGroup(group)]
        stages = {s for job in jobs if job is not None for s in job.stageIds}
        store, jvm = jsc.statusStore(), sc._jvm
        no_quantiles = sc._gateway.new_array(jvm.double, 0)
        millis = 0
        for stage in stages:
            attempts = store.stageData(stage, False, jvm.java.util.ArrayList(), False, no_quantiles)
            millis += sum(attempts.apply(i).executorRunTime() for i in range(attempts.size()))
        return millis / 1000
    except Exception:  # noqa: BLE001 - a private API: fall back to the bound, never fail the benchmark
        return None


def collect(df: DataFrame, where: str) -> pa.Table:
    """``df``'s rows in order, through Parquet files under ``where``.

    ``toArrow()`` builds the whole result in the driver's JVM heap, which a plain session's 1 GB cannot
    hold for the window rows of 10M tuples; written by the tasks and read back here with pyarrow, they
    need only this process's memory. A sorted result's partitions hold consecutive ranges, written one
    file per partition (part-00000, part-00001, ...), so the files in name order are the rows in order.
    Timestamps are written as microseconds (Spark's default INT96 would read back as nanoseconds).
    """
    import glob

    import pyarrow.parquet as pq

    with settings_in_force(df.sparkSession, {"spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS"}):
        df.write.mode("overwrite").parquet(where)
    files = sorted(glob.glob(os.path.join(where, "part-*.parquet")))
    return pa.concat_tables([pq.read_table(f) for f in files])


def check_equal(engines: Sequence[str], workload: Workload, q: Query) -> int:
    """Collects every engine's result (untimed, through Parquet files: :func:`collect`) and checks each
    equals the first's, row for row in order: exactly, but the floating-point aggregate within a relative
    1e-9. Returns the number of output rows."""
    with tempfile.TemporaryDirectory(prefix="bench_spark-") as tmp:
        reference = collect(plan(engines[0], workload, q), os.path.join(tmp, "0"))
        if reference.num_rows == 0:
            raise AssertionError(f"{q}: {engines[0]} gave no rows")
        for i, engine in enumerate(engines[1:], 1):
            # Spark's formulations give the window bounds as microsecond longs; same_table casts them to the
            # engine's timestamp[us, UTC] (exact), the keys and counts compare exactly, the means within 1e-9.
            got = collect(plan(engine, workload, q), os.path.join(tmp, str(i)))
            if not same_table(got, reference):
                raise AssertionError(f"{q}: {engine} differs from {engines[0]}")
    return reference.num_rows


def start_spark(plain: bool = False) -> tuple[SparkSession, float]:
    """The shared local session (pyarrow_ops.spark.session()), or with ``plain`` a session built with nothing
    but its master, as a user's own; and the seconds it took to start."""
    try:
        import pyspark  # noqa: F401
    except ImportError:
        raise SystemExit("bench_spark needs PySpark: pip install 'pyarrow-ops[spark]' (and Java 17+)") from None
    from pyspark.sql import SparkSession

    from pyarrow_ops import spark as ps

    start = clock.perf_counter()
    spark = SparkSession.builder.master("local[2]").getOrCreate() if plain else ps.session()
    return spark, clock.perf_counter() - start


SETTINGS = ("spark.sql.shuffle.partitions", "spark.sql.adaptive.enabled", "spark.sql.execution.arrow.maxBytesPerBatch",
            "spark.sql.execution.arrow.maxRecordsPerBatch")


def session_settings(spark: SparkSession) -> dict[str, str]:
    """The settings that bear on the run, as the session has them (Spark's defaults where unset)."""
    conf = spark.sparkContext.getConf()
    out = {"spark.driver.memory": conf.get("spark.driver.memory", "1g (default)"),
           "spark.default.parallelism": str(spark.sparkContext.defaultParallelism)}
    return {**out, **{name: spark.conf.get(name) for name in SETTINGS}}


def measure(spark: SparkSession, rows: int, inputs: int, queries: Sequence[str], engines: Sequence[str],
            repeat: int, partitions: int | None = None) -> list[Result]:
    """Every (query, engine) at one row count: checked equal once, then ``repeat`` interleaved runs."""
    start = clock.perf_counter()
    workload = prepare(spark, rows, inputs, partitions)
    print(f"\n{workload.rows:,} tuples in {inputs} inputs: generated and cached in Spark "
          f"({workload.partitions} partitions each) in {clock.perf_counter() - start:.1f} s (not timed)", flush=True)
    results = []
    try:
        for qid in queries:
            q = QUERIES[qid]
            start = clock.perf_counter()
            output_rows = check_equal(engines, workload, q)
            print(f"{qid}: checked equal ({', '.join(engines)}; {output_rows:,} rows; "
                  f"{clock.perf_counter() - start:.1f} s, not timed)", flush=True)
            by_engine = {e: Result(workload.rows, inputs, qid, e, output_rows=output_rows) for e in engines}
            for _ in range(repeat):
                for engine in engines:  # interleaved: a busy spell on a shared machine hits every engine
                    by_engine[engine].runs.append(run_once(spark, engine, workload, q))
            results.extend(by_engine.values())
    finally:
        workload.release()
    return results


def speedup(results: Sequence[Result], query: str) -> tuple[float, str] | None:
    """(best Spark formulation's wall / pyarrow_ops.spark's, that formulation), for one query."""
    ours = [r for r in results if r.query == query and r.engine == ENGINE]
    theirs = [r for r in results if r.query == query and r.engine != ENGINE]
    if not ours or not theirs:
        return None
    best = min(theirs, key=lambda r: r.best.wall_s)
    return best.best.wall_s / ours[0].best.wall_s, best.engine


def print_table(results: Sequence[Result], cores: int) -> None:
    rows, inputs = results[0].rows, results[0].inputs
    runs = len(results[0].runs)
    print(f"\nSpark local[{cores}], {rows:,} tuples in {inputs} inputs (best of {runs} run{'s' * (runs > 1)})")
    print(f"{'query':<5} {'engine':<17} {'wall s':>8} {'Mt/s':>6} {'task s':>8} {'python s':>8} "
          f"{'not engine s':>12} {'speedup':>7}")
    for r in results:
        run = r.best
        # Without the status store, the bound: no more than `cores` tasks run at a time.
        measured = run.task_s is not None
        task_s = run.task_s if measured else cores * run.wall_s
        task = f"{task_s:.2f}" if measured else f"<={task_s:.2f}"
        rest = "-" if run.python_s is None else f"{'' if measured else '<='}{task_s - run.python_s:.2f}"
        python = f"{run.python_s:.2f}" if run.python_s is not None else "-"
        ratio = speedup(results, r.query) if r.engine == ENGINE else None
        print(f"{r.query:<5} {r.engine:<17} {run.wall_s:8.2f} {rows / run.wall_s / 1e6:6.2f} {task:>8} "
              f"{python:>8} {rest:>12} {f'{ratio[0]:.2f}' if ratio else '':>7}")
    for query in dict.fromkeys(r.query for r in results):
        ratio = speedup(results, query)
        if ratio:
            print(f"{query}: pyarrow_ops.spark vs best Spark ({ratio[1]}): speedup {ratio[0]:.2f}x")
    print(LEGEND.format(cores=cores))


def _names(text: str, allowed, what: str, parser: argparse.ArgumentParser) -> list[str]:
    names = [x.strip() for x in text.split(",") if x.strip()]
    unknown = [x for x in names if x not in allowed]
    if unknown or not names:
        parser.error(f"unknown or no {what} {', '.join(unknown)}; choose from {', '.join(allowed)}")
    return names


def main(argv: list[str] | None = None) -> dict:
    """Runs the benchmark, prints the tables; returns the figures (as written by ``--json``)."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", default=DEFAULT_ROWS, help="comma-separated total tuple counts")
    parser.add_argument("--queries", default=DEFAULT_QUERIES, help="comma-separated, of the smart-meter queries")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--formulations", default=",".join(peers.SPARK_FORMULATIONS),
                        help="Spark's formulations to time, comma-separated")
    parser.add_argument("--inputs", type=int, default=4, help="inputs (concentrators)")
    parser.add_argument("--partitions", type=int, default=None,
                        help="Spark partitions per input and for pyarrow_ops.spark (default: default parallelism)")
    parser.add_argument("--plain-session", action="store_true",
                        help="a session built with SparkSession.builder.master('local[2]').getOrCreate() only, "
                             "not pyarrow_ops.spark.session() (export PYSPARK_PYTHON first)")
    parser.add_argument("--json", default=None, metavar="PATH", help="also write the figures here")
    args = parser.parse_args(argv)
    rows = [int(x) for x in args.rows.split(",")]
    meter_queries = [k for k, q in QUERIES.items() if q.dataset == "meters"]
    queries = _names(args.queries, meter_queries, "query", parser)
    formulations = _names(args.formulations, peers.SPARK_FORMULATIONS, "formulation", parser)
    if args.repeat < 1 or args.inputs < 1 or any(n < 1 for n in rows):
        parser.error("--repeat, --inputs and --rows must be positive")
    engines = [ENGINE, *(f"spark-{f}" for f in formulations)]

    cpus, load = os.cpu_count(), os.getloadavg()
    print(f"os.cpu_count() {cpus}; load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} (1, 5, 15 min)")
    spark, started = start_spark(args.plain_session)
    cores = spark.sparkContext.defaultParallelism
    kind = "plain session (SparkSession.builder.master(...).getOrCreate())" if args.plain_session else \
        "pyarrow_ops.spark.session()"
    print(f"Spark {spark.version} {spark.sparkContext.master}, {kind}: started in {started:.1f} s (not timed)")
    settings = session_settings(spark)
    print("Settings: " + ", ".join(f"{k}={v}" for k, v in settings.items()), flush=True)
    figures: dict = {"cpu_count": cpus, "load_average": list(load), "spark": spark.version,
                     "master": spark.sparkContext.master, "plain_session": args.plain_session, "settings": settings,
                     "inputs": args.inputs, "repeat": args.repeat, "tables": []}
    for n in rows:
        results = measure(spark, n, args.inputs, queries, engines, args.repeat, args.partitions)
        print_table(results, cores)
        figures["tables"].append({
            "rows": results[0].rows,
            "results": [{**asdict(r), "best_wall_s": r.best.wall_s, "mtuples_per_s": r.rows / r.best.wall_s / 1e6}
                        for r in results],
            "speedup_vs_best_spark": {q: speedup(results, q)[0] for q in queries if speedup(results, q)},
        })
    print(f"\nLoad average at the end {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(figures, f, indent=2)
    return figures


if __name__ == "__main__":
    main()
