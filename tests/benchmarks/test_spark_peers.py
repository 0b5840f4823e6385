"""The Spark peer of aggregate() (benchmarks/peers.py: spark_aggregate) in a real local[2] Spark, against
reference_aggregate and the engine.

Spark is slow to start (~10 s) and to run even tiny queries (~0.5-2 s each), so these are a few chosen cases
rather than many seeds; test_peers.py covers the shared parts (schema, time conversion) more widely. Skipped
without PySpark or Java (the project's ``spark`` extra).
"""

import shutil

import numpy as np
import pyarrow as pa
import pytest

pytest.importorskip("pyspark")
if shutil.which("java") is None:
    pytest.skip("Spark needs Java", allow_module_level=True)

from reference import reference_aggregate  # noqa: E402
from test_peers import ALL_AGGS, assert_matches, peers, random_inputs  # noqa: E402

FORMULATIONS = pytest.mark.parametrize("formulation", peers.SPARK_FORMULATIONS)

# (seed, (size, advance, offset), time type, key): sliding with size a multiple of the advance or not,
# tumbling, gaps (advance > size), offsets negative and beyond one advance; int64 and timestamp times
# (and the other time types once each).
CASES = [
    (0, (7, 3, -11), pa.int64(), ["k"]),
    (1, (2, 5, 1), pa.timestamp("ms", tz="UTC"), ["k", "s"]),
    (2, (30, 3, 0), pa.timestamp("ns"), ["s"]),
    (3, (4, 4, -3), pa.int64(), []),
    (4, (6, 2, 1), pa.timestamp("us", tz="Asia/Tokyo"), ["k8", "k"]),
    (5, (3, 7, -4), pa.int64(), ["k"]),
    (6, (10, 4, -1), pa.int32(), ["k"]),
    (7, (9, 3, 2), pa.date32(), ["s", "k"]),
]


@pytest.fixture(scope="module")
def spark():
    session = peers.spark_session()
    yield session
    session.stop()


@FORMULATIONS
@pytest.mark.parametrize("seed, window, time_type, key", CASES, ids=[f"case{c[0]}" for c in CASES])
def test_random_inputs_match_the_reference(spark, formulation, seed, window, time_type, key):
    rng = np.random.default_rng(seed + 500)
    size, advance, offset = window
    tables = random_inputs(rng, time_type, inputs=int(rng.integers(1, 6)), max_rows=40)
    args = dict(time="t", key=key, size=size, advance=advance, offset=offset, aggs=ALL_AGGS)
    expected = reference_aggregate(tables, **args)
    assert_matches(peers.spark_aggregate(tables, formulation=formulation, spark=spark, **args), expected)


@FORMULATIONS
def test_empty_inputs_and_batches_between_others(spark, formulation):
    """PySpark 4.3's createDataFrame(pa.Table) drops every row after an empty record batch: the peer drops those."""
    rng = np.random.default_rng(11)
    a, b, c = random_inputs(rng, pa.int64(), inputs=3, max_rows=30)
    b = pa.concat_tables([b.slice(0, 5), b.slice(0, 0), b.slice(5)])  # an empty chunk inside an input
    tables = [a, a.slice(0, 0), b, c]
    args = dict(time="t", key=["k"], size=6, advance=2, offset=0, aggs=ALL_AGGS)
    expected = reference_aggregate(tables, **args)
    assert_matches(peers.spark_aggregate(tables, formulation=formulation, spark=spark, **args), expected)

    empty = [t.slice(0, 0) for t in tables]
    args["key"] = ["k", "s"]
    expected = reference_aggregate(empty, **args)
    assert expected.num_rows == 0
    assert_matches(peers.spark_aggregate(empty, formulation=formulation, spark=spark, **args), expected)


@FORMULATIONS
def test_only_ties_and_only_nulls(spark, formulation):
    n = 12
    tables = [
        pa.table(
            {
                "t": pa.array([5] * n, pa.int64()),
                "k": pa.array([None, 1] * (n // 2), pa.int64()),
                "x": pa.array([None] * n, pa.float64()),
                "v": pa.array([None if i % 3 else i + 10 * j for i in range(n)], pa.int64()),
            }
        )
        for j in range(3)
    ]
    aggs = {
        "n": ("count", None), "s": ("sum", "x"), "m": ("mean", "x"), "lo": ("min", "x"), "f": ("first", "v"),
        "l": ("last", "v"), "sv": ("sum", "v"), "fx": ("first", "x"),
    }
    args = dict(time="t", key=["k"], size=4, advance=2, offset=1, aggs=aggs)
    expected = reference_aggregate(tables, **args)
    assert expected.num_rows == 4
    assert_matches(peers.spark_aggregate(tables, formulation=formulation, spark=spark, **args), expected,
                   approximate={"m"})


@FORMULATIONS
def test_nanosecond_timestamps_of_today(spark, formulation):
    """Stored nanoseconds of 2026 read as microseconds are far past year 9999: Spark's window arithmetic is
    plain 64-bit integers, so it stays exact."""
    rng = np.random.default_rng(3)
    tables = []
    for _ in range(3):
        n = 200
        times = np.sort(rng.integers(0, 100 * 10**9, n)) + 1_767_225_600 * 10**9
        tables.append(pa.table({"t": pa.array(times, pa.timestamp("ns", tz="UTC")),
                                "k": pa.array(rng.integers(0, 5, n)), "x": rng.standard_normal(n)}))
    aggs = {"n": ("count", None), "f": ("first", "x"), "l": ("last", "x"), "m": ("mean", "x")}
    args = dict(time="t", key=["k"], size=30 * 10**9, advance=3 * 10**9, offset=7, aggs=aggs)
    expected = reference_aggregate(tables, **args)
    assert_matches(peers.spark_aggregate(tables, formulation=formulation, spark=spark, **args), expected,
                   approximate={"m"})


@FORMULATIONS
def test_benchmark_queries_match_the_engine(spark, formulation):
    """The benchmark's meter queries (30 s / 3 s and 40 s / 2 s windows) on a small workload."""
    import pyarrow_ops as po
    from pyarrow_ops.datasets import smart_meter_readings

    tables = smart_meter_readings(rows=6000, meters=50, concentrators=4, period_ms=1_000, seed=2)
    aggs = {"n": po.count(), "f": po.first("kwh"), "l": po.last("voltage"), "m": po.mean("kwh"),
            "s": po.sum("kwh"), "lo": po.min("voltage"), "hi": po.max("kwh")}
    for size, advance in ((30_000, 3_000), (40_000, 2_000)):
        expected = po.aggregate(tables, time="time", key="meter", window=po.sliding(size, advance),
                                aggs=aggs).to_arrow()
        got = peers.spark_aggregate(
            tables, time="time", key=["meter"], size=size, advance=advance,
            aggs={name: (agg.function, agg.column) for name, agg in aggs.items()},
            formulation=formulation, spark=spark,
        )
        assert got.schema.names == expected.schema.names and got.schema.types == expected.schema.types
        # The engine marks the window bounds non-nullable; the peers do not.
        assert_matches(got, expected.cast(got.schema), approximate={"m", "s"})


def test_unsupported_arguments_raise(spark):
    table = pa.table({"t": pa.array([1], pa.int64()), "f": [1.5], "b": [True]})
    base = dict(time="t", size=2, advance=1, spark=spark)
    with pytest.raises(NotImplementedError):
        peers.spark_aggregate([table], key=["f"], aggs={"n": ("count", None)}, **base)
    with pytest.raises(NotImplementedError):
        peers.spark_aggregate([table], key=[], aggs={"m": ("max", "b")}, **base)
    with pytest.raises(ValueError):
        peers.spark_aggregate([table], key=[], aggs={"n": ("count", None)}, formulation="panes", **base)
