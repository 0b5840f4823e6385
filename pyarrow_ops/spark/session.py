"""The Spark session side of pyarrow_ops.spark: the Arrow settings a query runs under (per query, or
warned about once), the probe of the Python workers, and the convenience session for examples and tests
(docs/spark.md, "Your own session")."""

from __future__ import annotations

import contextlib
import os
import sys
import warnings
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pyspark is an optional dependency (the "spark" extra)
    from pyspark.sql import DataFrame, SparkSession

_session: SparkSession | None = None

# Spark settings for the Arrow UDFs this module runs. With maxBytesPerBatch below Int.MaxValue (its
# default is 64 MiB), Spark measures the Arrow batch it is filling after every row it adds, before
# the row count (maxRecordsPerBatch, 10,000) ends the batch anyway; on the W-OI benchmark (10M
# tuples, local[2]) that measuring took about a quarter of the JVM's samples, and the query ran in
# 6.92 s without it against 9.48 s with it (docs/spark.md, "Performance"). Spark reads it on the
# executors when a job runs, not when a DataFrame is built, so aggregate() and run() put it in force
# around the job that runs the engine (arrow_settings) rather than relying on the session.
ARROW_SETTINGS = {"spark.sql.execution.arrow.maxBytesPerBatch": str(2**31 - 1)}


@contextlib.contextmanager
def settings_in_force(spark: SparkSession, settings: Mapping[str, str]) -> Iterator[SparkSession]:
    """``settings`` in force on ``spark`` for the ``with`` block, then each back as it was (its earlier
    value, or unset). They are the session's while the block runs, so other threads using the same
    session see them too."""
    saved = {name: spark.conf.get(name, None) for name in settings}  # None: not set in the session
    for name, value in settings.items():
        spark.conf.set(name, value)
    try:
        yield spark
    finally:
        for name, value in saved.items():
            if value is None:
                spark.conf.unset(name)
            else:
                spark.conf.set(name, value)


def arrow_settings(spark: SparkSession) -> contextlib.AbstractContextManager[SparkSession]:
    """``ARROW_SETTINGS`` in force on ``spark`` for the ``with`` block, then each setting back as it was
    (:func:`settings_in_force`).

    Spark reads them when an action runs, so wrap the action: ``with ps.arrow_settings(spark):
    out.write.parquet(path)``. :func:`aggregate` and :func:`run` do this themselves for the job that
    runs the engine when they sort their result (the default with a key); the block is for a result
    computed later (``ordered=False``, a split by time) and for your own ``mapInArrow`` with the
    factories below.
    """
    return settings_in_force(spark, ARROW_SETTINGS)


def _has_arrow_settings(spark: SparkSession) -> bool:
    # Spark shows byte sizes with a "b" suffix ("67108864b"); only exactly Int.MaxValue turns the measuring off.
    return all((spark.conf.get(name, None) or "").rstrip("bB") == value for name, value in ARROW_SETTINGS.items())


_warned_lazy: set[str] = set()  # applicationIds of the SparkContexts already warned by _lazy


def _lazy(df: DataFrame, caller: str) -> DataFrame:
    """``df``, which runs the engine only when the caller's action runs: under the session's settings then,
    so a session without ``ARROW_SETTINGS`` gets a warning (once per SparkContext) that names the fix."""
    spark = df.sparkSession
    app = spark.sparkContext.applicationId
    if app not in _warned_lazy and not _has_arrow_settings(spark):
        _warned_lazy.add(app)
        names = ", ".join(f"{k}={v}" for k, v in ARROW_SETTINGS.items())
        warnings.warn(f"pyarrow_ops.spark.{caller}: the result is computed when your action runs, under this "
                      f"session's settings, which lack {names}: Spark then measures every row it hands the "
                      "engine, which slows the query (docs/spark.md, \"Performance\"). Run the action inside "
                      "`with pyarrow_ops.spark.arrow_settings(spark):`, or set them in the session "
                      "(`SparkSession.builder.config(map=pyarrow_ops.spark.ARROW_SETTINGS)`)", stacklevel=3)
    return df


_workers_ok: set[str] = set()  # applicationIds of the SparkContexts whose Python workers passed check_workers


def check_workers(spark: SparkSession) -> None:
    """Raises :class:`~pyarrow_ops.UsageError`, naming the fix, where Spark's Python workers cannot import
    pyarrow and pyarrow_ops (the engine runs in them).

    One probe job of one task, once per SparkContext (the workers' interpreter is fixed when the context
    starts); :func:`aggregate` and :func:`run` call it before they build their plan, so a wrong
    interpreter fails there with this message rather than inside a Java stack trace when the query runs.
    Call it yourself before using the UDF factories. On a cluster the task runs on one executor only.
    """
    from pyarrow_ops._engine import UsageError

    sc = spark.sparkContext
    if sc.applicationId in _workers_ok:
        return

    # Defined here, not at module level, so that cloudpickle ships it by value: a module-level function
    # would be pickled as a reference to pyarrow_ops.spark, which a worker without pyarrow_ops fails to
    # unpickle before the probe could report anything.
    def probe(_: Iterator[Any]) -> Iterator[tuple[str, str | None]]:
        import importlib
        import sys as worker_sys

        for name in ("pyarrow", "pyarrow_ops"):
            try:
                importlib.import_module(name)
            except Exception as e:  # noqa: BLE001 - any failure to import is what the probe reports
                yield worker_sys.executable, f"{type(e).__name__}: {e}"
                return
        yield worker_sys.executable, None

    fix = ("pyarrow_ops.spark runs the engine in Spark's Python workers, which must be an interpreter with "
           "pyarrow-ops installed. Set the environment variable PYSPARK_PYTHON to one before the SparkSession "
           f"starts, e.g. this one: os.environ[\"PYSPARK_PYTHON\"] = sys.executable ({sys.executable}), or "
           f"`export PYSPARK_PYTHON={sys.executable}` in the shell; a session already started keeps its "
           "workers' interpreter, so restart it (spark.stop()). On a cluster, install pyarrow-ops in the "
           "executors' Python (docs/spark.md, \"Scaling out to a cluster\").")
    try:
        ((worker, failure),) = sc.parallelize([0], 1).mapPartitions(probe).collect()
    except Exception as e:
        raise UsageError(f"Spark's Python workers could not run a probe ({_first_error_line(e)}). {fix}") from e
    if failure is not None:
        raise UsageError(f"Spark's Python workers ({worker}) cannot import pyarrow_ops: {failure}. {fix}")
    _workers_ok.add(sc.applicationId)


def _first_error_line(e: Exception) -> str:
    """The line of a (Java) error message that says what failed, not the whole stack trace."""
    lines = [line.strip() for line in str(e).splitlines() if line.strip()]
    for line in lines:
        if line.startswith(("at ", "File ")):
            continue
        if "Error" in line or "Exception" in line:
            return line[:500]
    return lines[0][:500] if lines else type(e).__name__


def session() -> SparkSession:
    """One local[2] SparkSession for the process (created on first use, then reused).

    Settings for a small machine: 2 cores, 4 shuffle partitions (the default 200 makes every small
    query pay for 200 tasks), no web UI or progress bar, 4 GB driver memory (it applies only if this
    call starts the JVM), results of any size collected, Arrow transfers on, session time zone UTC.
    On a cluster, or anywhere you have a session already, use yours: :func:`aggregate` and :func:`run`
    need none of these (docs/spark.md, "Your own session").
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
            .config(map=ARROW_SETTINGS)
            .getOrCreate()
        )
        _session.sparkContext.setLogLevel("ERROR")
    return _session
