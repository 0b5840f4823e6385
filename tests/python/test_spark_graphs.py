"""Graphs on real PySpark (local[2]): every output of ``pyarrow_ops.spark.run`` over a graph of
fan-out, unions, interval and as-of joins and chains is the table an in-process ``po.run`` gives,
row for row (docs/spark.md, "Graphs"); random graphs from test_graphs.py's generator, plus the
cases where the join's emission order is subtle (left joins with hi < 0, equal times, empty
buckets)."""

from __future__ import annotations

import random
import warnings

import hypothesis.strategies as st
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, example, given, settings

import pyarrow_ops as po
from pyarrow_ops import col

pyspark = pytest.importorskip("pyspark")
ps = pytest.importorskip("pyarrow_ops.spark")

import test_graphs  # noqa: E402  (after the skips)
from test_graphs import _Both  # noqa: E402

# The random graphs' map_batches function lives in test_graphs, which Spark's Python workers cannot
# import (tests/python is on the driver's path only): ship the module's functions by value.
from pyspark import cloudpickle  # noqa: E402

cloudpickle.register_pickle_by_value(test_graphs)

RUNS = {"graphs": 0, "outputs": 0}


@pytest.fixture(scope="module")
def spark():
    return ps.session()


def _frame(spark, table: pa.Table):
    from benchmarks.peers import _to_spark

    return _to_spark(spark, table)


def _same(got: pa.Table, expected: pa.Table, what: str) -> None:
    assert got.column_names == expected.column_names, what
    assert got.to_pylist() == expected.to_pylist(), what


def _run_both(spark, outputs: dict[str, po.Pipeline], sources: list[po.Pipeline], **options) -> None:
    expected = po.run(outputs, threads=2).to_arrow()
    inputs = {s: [_frame(spark, t) for t in s._inputs] for s in sources}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # stateful stages warn that they run in one partition
        got = ps.run(outputs, inputs, **options)
    assert set(got) == set(outputs)
    for name in outputs:
        _same(got[name].toArrow(), expected[name], name)
        RUNS["outputs"] += 1


CLICKS = pa.table({"ts": [1, 2, 3, 9, 10, 40, 41, 41], "user": [1, 2, 1, 1, 2, 1, 2, None],
                   "item": [7, 7, 8, 7, 9, 8, 7, 7], "v": [1, 2, 3, 4, 5, 6, 7, 8]})


def test_fan_out_union_and_both_joins(spark):
    c = po.Pipeline(CLICKS, time="ts")
    sess = c.sessionize("user", gap=5)
    late = c.filter(col("v") > 2)
    outputs = {"sess": sess, "u": po.union(sess.select("ts", "user", "item", "v"), late),
               "j": c.join(late, on="user", within=(-3, 3), how="left"),
               "a": c.join_asof(late, by="user", tolerance=5)}
    _run_both(spark, outputs, [c], partitions=3)


@pytest.mark.parametrize("within", [(-5, -1), (0, 0), (2, 6), (-4, 4)])
def test_left_interval_joins_emit_in_engine_order(spark, within):
    """Unmatched left rows leave at their deadline (hi >= 0) or right after themselves (hi < 0),
    pairs at their later row: the emission keys must reproduce it across buckets."""
    left = pa.table({"ts": [0, 1, 1, 5, 9, 9, 12], "k": [1, 2, 1, 3, 1, 2, 3], "a": list("abcdefg")})
    right = pa.table({"ts": [1, 1, 4, 9, 10, 20], "k": [1, 1, 3, 2, 1, 9], "b": list("uvwxyz")})
    lp, rp = po.Pipeline(left, time="ts"), po.Pipeline(right, time="ts")
    outputs = {"left": lp.join(rp, on="k", within=within, how="left"),
               "inner": lp.join(rp, on="k", within=within)}
    _run_both(spark, outputs, [lp, rp], partitions=2)


def test_one_pipeline_graph_takes_plain_dataframes(spark):
    a = pa.table({"ts": [1, 4, 8], "k": [1, 2, 1], "v": [1, 2, 3]})
    b = pa.table({"ts": [2, 4, 9], "k": [1, 1, 2], "v": [4, 5, 6]})
    p = po.Pipeline([a, b], time="ts")
    graph = po.union(p.filter(col("v") > 1), p.with_columns(v=col("v") * 10)).running("k", {"n": po.count()})
    expected = graph.run().to_arrow()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = ps.run(graph, [spark.createDataFrame(a), spark.createDataFrame(b)])
    _same(got.toArrow(), expected, "union then running")


def test_graph_errors_name_the_problem(spark):
    a = po.Pipeline(pa.table({"ts": [1], "k": [1]}), time="ts")
    b = po.Pipeline(pa.table({"ts": [1], "k": [1]}), time="ts")
    graph = {"j": a.join(b, on="k", within=(0, 1))}
    df = spark.createDataFrame(pa.table({"ts": [1], "k": [1]}))
    with pytest.raises(TypeError, match="reads 2 sources"):
        ps.run(graph, df)
    with pytest.raises(ValueError, match="source 1 of the graph has no DataFrames"):
        ps.run(graph, {a: df})
    with pytest.raises(TypeError, match="map each source pipeline"):
        ps.run(graph, {a.filter(col("k") > 0): df, b: df})
    with pytest.raises(po.UsageError, match="for chains"):
        ps.run(graph, {a: df, b: df}, order_by="ts")


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1), rows=st.integers(0, 40), keys=st.integers(1, 5), size=st.integers(1, 5),
       partitions=st.integers(1, 4))
@example(seed=7, rows=0, keys=1, size=3, partitions=2)  # empty inputs
def test_random_graphs_on_spark_equal_in_process(spark, seed, rows, keys, size, partitions):
    rng = random.Random(seed)
    g = _Both(rng, rows, keys)
    sources = [p for p, _, _ in g.nodes]
    for _ in range(size):
        g.grow()
    picks = rng.sample(range(len(g.nodes)), min(len(g.nodes), rng.randrange(1, 4)))
    outputs = {f"out{i}": g.nodes[i][0] for i in picks}
    used = [s for s in sources if any(s._inputs is x for x in _graph_inputs(outputs))]
    _run_both(spark, outputs, used, partitions=partitions)
    RUNS["graphs"] += 1


def _graph_inputs(outputs):
    from pyarrow_ops.pipeline import _Graph

    return _Graph(outputs).inputs


def test_report_spark_graph_counts():
    print(f"\nspark graphs: {RUNS['graphs']} random graphs, {RUNS['outputs']} outputs equal in-process")
