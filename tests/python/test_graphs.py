"""Operator graphs (docs/graphs.md): random graphs of every operator kind with fan-out, unions,
interval and as-of joins and several outputs, run on the engine in several configurations, must
equal the plain-Python reference (graph_reference.py) on every output, row for row."""

from __future__ import annotations

import random

import hypothesis.strategies as st
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import HealthCheck, given, settings

import pyarrow_ops as po
from graph_reference import Graph
from pyarrow_ops import col

CONFIGS = [
    dict(threads=1),
    dict(threads=2, fuse=False),
    dict(threads=2, morsel=1, reorder_capacity=2, max_inflight=8),  # one tuple at a time
    dict(threads=3, scheduler="lp", reorder="locked", partitioning="partitioned", morsel=7),
    dict(threads=2, scheduler="qst", partitioning="shared", morsel=5, partitions=3),
    dict(threads=4, scheduler="et"),
]
BASE = ["ts", "k", "v", "item"]


def _table(rng: random.Random, rows: int, keys: int) -> pa.Table:
    n = rng.randrange(0, rows + 1)
    ts = sorted(rng.randrange(0, rows * 2 + 1) for _ in range(n))
    return pa.table({
        "ts": pa.array(ts, pa.int64()),
        "k": pa.array([None if rng.random() < 0.05 else rng.randrange(keys) for _ in range(n)], pa.int64()),
        "v": pa.array([None if rng.random() < 0.1 else rng.randrange(-50, 50) for _ in range(n)], pa.int64()),
        "item": pa.array([rng.randrange(6) for _ in range(n)], pa.int64()),
    })


def _drop_odd_items(b: pa.RecordBatch) -> pa.RecordBatch:
    return b.filter(pc.not_equal(pc.bit_wise_and(b.column("item"), 1), 1))


class _Both:
    """A random graph built twice, on the engine (pipelines) and on the reference (node ids)."""

    def __init__(self, rng: random.Random, rows: int, keys: int) -> None:
        self.rng, self.ref = rng, Graph()
        self.nodes: list[tuple[po.Pipeline, int, list[str]]] = []  # engine, reference, column names
        for _ in range(rng.randrange(1, 3)):
            inputs = [_table(rng, rows, keys) for _ in range(rng.randrange(1, 3))]
            self.nodes.append((po.Pipeline(inputs, time="ts"), self.ref.source(inputs, "ts"), list(BASE)))
        self.used = 0

    def grow(self) -> None:
        rng = self.rng
        self.used += 1
        u = self.used
        base_like = [n for n in self.nodes if n[2][:4] == BASE and not any(c.endswith(("_right", "_left")) for c in n[2])]
        choice = rng.choice(["filter", "with_columns", "sessionize", "running", "lag", "dedupe", "map",
                             "union", "union", "join", "join", "asof", "asof", "table"])
        p, r, cols = rng.choice(self.nodes)
        c = rng.randrange(-20, 20)
        if choice == "filter":
            self._unary(p.filter(col("v") > c), r, {"op": "filter", "pred": lambda x, c=c: None if x["v"] is None else x["v"] > c}, cols)
        elif choice == "with_columns":
            self._unary(p.with_columns(**{f"w{u}": col("v") * 2 + c}), r,
                        {"op": "with_columns", "named": {f"w{u}": (lambda x, c=c: None if x["v"] is None else x["v"] * 2 + c, pa.int64())}},
                        cols + [f"w{u}"])
        elif choice == "sessionize":
            gap = rng.randrange(0, 8)
            self._unary(p.sessionize("k", gap=gap, name=f"s{u}"), r, {"op": "sessionize", "key": "k", "gap": gap, "name": f"s{u}"}, cols + [f"s{u}"])
        elif choice == "running":
            aggs = {f"n{u}": po.count(), f"m{u}": po.max("v")}
            self._unary(p.running("k", aggs), r, {"op": "running", "key": "k", "aggs": aggs}, cols + list(aggs))
        elif choice == "lag":
            self._unary(p.lag("k", "v", suffix=f"_p{u}"), r, {"op": "lag", "key": "k", "columns": "v", "suffix": f"_p{u}"}, cols + [f"v_p{u}"])
        elif choice == "dedupe":
            self._unary(p.dedupe("k", within=3), r, {"op": "dedupe", "key": "k", "within": 3}, cols)
        elif choice == "map":
            self._unary(p.map_batches(_drop_odd_items), r, {"op": "map_batches", "fn": _drop_odd_items}, cols)
        elif choice == "union":
            same = [n for n in self.nodes if n[2] == cols]
            q, rq, _ = rng.choice(same)
            self.nodes.append((po.union(p, q), self.ref.union(r, rq), cols))
        elif choice in ("join", "asof", "table") and len(base_like) >= 1:
            (p, r, cols), (q, rq, qcols) = rng.choice(base_like), rng.choice(base_like)
            if choice == "join":
                lo = rng.randrange(-6, 4)
                hi = lo + rng.randrange(0, 6)
                how = rng.choice(["inner", "left"])
                right = [x for x in qcols if x != "k"]
                names = cols + [x + "_right" if x in cols else x for x in right] + ["ts_left"]
                self.nodes.append((p.join(q, on="k", within=(lo, hi), how=how),
                                   self.ref.join(r, rq, "k", (lo, hi), how), names))
            elif choice == "asof":
                tolerance = rng.choice([None, 0, 3])
                right = [x for x in qcols if x != "k"]
                names = cols + [x + "_right" if x in cols else x for x in right]
                self.nodes.append((p.join_asof(q, by="k", tolerance=tolerance), self.ref.join_asof(r, rq, "k", tolerance), names))
            elif "price" not in cols:  # a second tariff table would rename its price, which the names here do not model
                table = pa.table({"k": pa.array([rng.randrange(4) for _ in range(5)], pa.int64()),
                                  "price": pa.array([rng.randrange(100) for _ in range(5)], pa.int64())})
                self.nodes.append((p.join_asof(table, by="k"), self.ref.join_asof(r, table, "k"), cols + ["price"]))

    def _unary(self, p: po.Pipeline, r: int, spec: dict, cols: list[str]) -> None:
        self.nodes.append((p, self.ref.op(r, spec), cols))


def _same(got: pa.Table, expected: pa.Table, what: str) -> None:
    assert got.schema.names == expected.schema.names, what
    assert [f.type for f in got.schema] == [f.type for f in expected.schema], what
    assert got.to_pylist() == expected.to_pylist(), what


RUNS = {"graphs": 0, "runs": 0}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), rows=st.integers(0, 120), keys=st.integers(1, 6), size=st.integers(1, 7))
def test_random_graphs_equal_the_reference_in_every_configuration(seed, rows, keys, size):
    rng = random.Random(seed)
    g = _Both(rng, rows, keys)
    for _ in range(size):
        g.grow()
    picks = rng.sample(range(len(g.nodes)), min(len(g.nodes), rng.randrange(1, 4)))
    outputs = {f"out{i}": g.nodes[i] for i in picks}
    expected = g.ref.evaluate({name: ref for name, (_, ref, _) in outputs.items()})
    RUNS["graphs"] += 1
    for config in rng.sample(CONFIGS, 3):
        got = po.run({name: p for name, (p, _, _) in outputs.items()}, **config).to_arrow()
        for name in outputs:
            _same(got[name], expected[name], f"{name} with {config}")
        RUNS["runs"] += 1


def test_fan_out_computes_a_shared_node_once_and_feeds_every_consumer():
    t = pa.table({"ts": list(range(100)), "k": [i % 3 for i in range(100)], "v": list(range(100))})
    calls = []

    def counted(b: pa.RecordBatch) -> pa.RecordBatch:
        calls.append(b.num_rows)
        return b

    shared = po.Pipeline(t, time="ts").map_batches(counted)
    out = po.run({"a": shared.filter(col("v") < 10), "b": shared.sessionize("k", gap=1), "c": shared}, threads=2)
    tables = out.to_arrow()
    assert sum(calls) == 100  # once, not three times
    assert tables["a"].num_rows == 10 and tables["b"].num_rows == 100 and tables["c"].num_rows == 100


def test_union_order_ties_by_argument_then_position():
    a = po.Pipeline(pa.table({"t": [1, 1, 3], "x": ["a0", "a1", "a2"]}), time="t")
    b = po.Pipeline(pa.table({"t": [0, 1, 3], "x": ["b0", "b1", "b2"]}), time="t")
    assert po.union(a, b).run(threads=2).to_arrow()["x"].to_pylist() == ["b0", "a0", "a1", "b1", "a2", "b2"]
    assert po.union(b, a).run(threads=2).to_arrow()["x"].to_pylist() == ["b0", "b1", "a0", "a1", "b2", "a2"]


def test_union_refuses_an_unsorted_stream_naming_it():
    a = po.Pipeline(pa.table({"t": [1, 2, 3], "x": [1, 2, 3]}), time="t")
    backwards = a.with_columns(t=col("t") * -1)
    with pytest.raises(po.UnsortedInputError, match="union's input 1 is not sorted by 't'"):
        po.union(a, backwards).run(threads=2).to_arrow()


def test_join_errors_name_the_problem():
    a = po.Pipeline(pa.table({"t": [1], "k": [1]}), time="t")
    b = po.Pipeline(pa.table({"t": [1], "k": ["x"]}), time="t")
    with pytest.raises(po.SchemaMismatchError, match="key column 'k' has type int64 on the left and string"):
        a.join(b, on="k", within=(0, 1)).run().to_arrow()
    with pytest.raises(ValueError, match="how"):
        a.join(a, on="k", within=(0, 1), how="outer")
    with pytest.raises(po.InvalidInputError, match="lo <= hi"):
        a.join(a, on="k", within=(2, 1)).run().to_arrow()


def test_reading_one_output_alone_waits_but_closing_the_other_lets_it_finish():
    t = pa.table({"ts": list(range(50_000)), "k": [i % 7 for i in range(50_000)]})
    p = po.Pipeline(t, time="ts")
    out = po.run({"a": p.filter(col("k") == 1), "b": p}, threads=2, max_inflight=8, morsel=256)
    out["b"].close()  # not wanted: the run stops keeping its rows
    assert out["a"].to_arrow().num_rows == sum(1 for i in range(50_000) if i % 7 == 1)


def test_static_table_join_asof_is_a_lookup():
    readings = po.Pipeline(pa.table({"t": [1, 2, 3], "meter": [1, 2, 3]}), time="t")
    tariffs = pa.table({"meter": [1, 2, 1], "price": [10, 20, 11]})
    got = readings.join_asof(tariffs, by="meter").run(threads=2).to_arrow()
    assert got.to_pydict() == {"t": [1, 2, 3], "meter": [1, 2, 3], "price": [11, 20, None]}
    with pytest.raises(ValueError, match="tolerance"):
        readings.join_asof(tariffs, by="meter", tolerance=3)


@pytest.mark.filterwarnings("ignore:Sortedness of columns cannot be checked")
def test_join_asof_equals_polars_backward_join_asof():
    pl = pytest.importorskip("polars")
    rng = random.Random(4)
    left = pa.table({"t": sorted(rng.randrange(1000) for _ in range(500)), "k": [rng.randrange(5) for _ in range(500)],
                     "a": list(range(500))})
    right = pa.table({"t": sorted(rng.randrange(1000) for _ in range(300)), "k": [rng.randrange(5) for _ in range(300)],
                      "b": list(range(300))})
    for tolerance in (None, 7):
        got = (po.Pipeline(left, time="t").join_asof(po.Pipeline(right, time="t"), by="k", tolerance=tolerance)
               .run(threads=2).to_polars())
        expected = pl.from_arrow(left).join_asof(pl.from_arrow(right).with_columns(pl.col("t").alias("t_right")),
                                                 on="t", by="k", strategy="backward", tolerance=tolerance)
        assert got.select("t", "k", "a", "t_right", "b").rows() == expected.select("t", "k", "a", "t_right", "b").rows()


def test_interval_join_equals_a_polars_join_then_filter():
    pl = pytest.importorskip("polars")
    rng = random.Random(5)
    sales = pa.table({"t": sorted(rng.randrange(2000) for _ in range(400)), "item": [rng.randrange(20) for _ in range(400)],
                      "sale": list(range(400))})
    returns = pa.table({"t": sorted(rng.randrange(2000) for _ in range(200)), "item": [rng.randrange(20) for _ in range(200)],
                        "ret": list(range(200))})
    got = (po.Pipeline(sales, time="t").join(po.Pipeline(returns, time="t"), on="item", within=(0, 50))
           .run(threads=2).to_polars())
    expected = (pl.from_arrow(sales).join(pl.from_arrow(returns), on="item", suffix="_right")
                .filter((pl.col("t_right") - pl.col("t") >= 0) & (pl.col("t_right") - pl.col("t") <= 50)))
    assert sorted(got.select("sale", "ret", "t_left", "t_right").rows()) == sorted(
        expected.select("sale", "ret", pl.col("t").alias("t_left"), "t_right").rows())
    assert got["t"].to_list() == sorted(got["t"].to_list())
    assert got.select((pl.col("t") == pl.max_horizontal("t_left", "t_right")).all()).item()


def test_explain_shows_regions_fused_chains_shuffles_and_outputs():
    t = pa.table({"ts": [1, 2], "user": [1, 2], "item": [3, 4], "v": [5, 6]})
    clicks = po.Pipeline(t, time="ts").filter(col("v") > 0).with_columns(w=col("v") * 2)
    sessions = clicks.sessionize("user", gap=30)
    items = sessions.dedupe("item")
    assert po.explain({"items": items}).splitlines() == [
        "source 0  ts, user, item, v",
        "0 filter  stateless  selectivity: at most one  parallelism: every worker  <- source 0",
        "1 with_columns  stateless  selectivity: exactly one  parallelism: every worker  <- 0",
        "2 sessionize  partitioned by [user]  selectivity: exactly one  parallelism: partitions  <- 1",
        "3 dedupe  partitioned by [item]  selectivity: at most one  parallelism: partitions  <- 2",
        "region 0: operators 0, 1, 2  routing: hash by [user]  ordering: seqno and pulses",
        "region 1: operators 3  routing: hash by [item]  ordering: seqno and pulses",
        "fused: 0+1 (filter+with_columns)",
        "shuffle: region 0 -> region 1 by [item]",
        "output items <- 3",
    ]
    data = po.plan({"items": items}, fuse=False)
    assert data["fused"] == [] and [r["operators"] for r in data["regions"]] == [[0, 1, 2], [3]]
    assert data["operators"][3]["keys"] == ["item"] and data["operators"][0]["preserves_time"]


def test_partitioned_operators_of_one_key_fuse_and_equal_unfused_runs():
    """sessionize, running (keyed by the session epoch), lag and delta over one key run as one
    keyed chain: one routing, each operator on the same pieces, the later ones taking the first
    one's key ids. Every configuration gives the unfused run's output; stats() still reports each
    operator, its time included."""
    rng = np.random.default_rng(5)
    n = 6000
    t = pa.table({"ts": np.sort(rng.integers(0, 3000, n)), "k": rng.integers(0, 300, n),
                  "v": pa.array(rng.normal(0, 1, n), mask=rng.random(n) < 0.1)})
    p = (po.Pipeline(t, time="ts").sessionize("k", gap=20)
         .running(["k", "session"], {"n": po.count(), "s": po.sum("v"), "f": po.first("v")})
         .lag("k", ["v"]).delta("k", ["v"]))
    assert "fused: 0+1+2+3 (sessionize+running+lag+delta)" in p.explain()
    expected = p.run(threads=1, fuse=False).to_arrow()
    for config in (dict(threads=2), dict(threads=2, morsel=1), dict(threads=3, partitions=5, morsel=17),
                   dict(threads=2, partitioning="shared"), dict(threads=1, threading="manual")):
        result = p.run(**config)
        assert result.to_arrow().equals(expected), config
    ops = result.stats()["operators"]
    assert [o["name"] for o in ops] == ["sessionize", "running", "lag", "delta"]
    assert all(o["fused"] and o["kind"] == "partitioned" and o["tuples_in"] == n and o["busy_ns"] > 0 for o in ops)
    # The chain's CPU time, split in proportion to its operators' busy_ns.
    assert all(0 < o["cpu_ns"] <= o["busy_ns"] for o in ops)
    # lag first: sessionize and running take its key ids.
    r = po.Pipeline(t, time="ts").lag("k", ["v"]).sessionize("k", gap=20).running("k", {"n": po.count()})
    assert "fused: 0+1+2 (lag+sessionize+running)" in r.explain()
    assert r.run(threads=2, morsel=33).to_arrow().equals(r.run(threads=1, fuse=False).to_arrow())
    # A string column appended by lag cannot be laid out for a later operator: the chain stops there.
    s = pa.table({"ts": [1, 2, 3], "k": [1, 1, 2], "name": ["a", "b", "c"]})
    q = po.Pipeline(s, time="ts").lag("k", ["name"]).sessionize("k", gap=1).running("k", {"n": po.count()})
    assert "fused: 1+2 (sessionize+running)" in q.explain()
    assert q.run(threads=2).to_arrow().equals(q.run(threads=2, fuse=False).to_arrow())


def test_fused_chains_report_each_operator_and_equal_unfused_runs():
    t = pa.table({"ts": list(range(5000)), "k": [i % 13 for i in range(5000)], "v": list(range(5000))})
    p = po.Pipeline(t, time="ts").filter(col("v") % 3 != 0).with_columns(w=col("v") * 2).select("ts", "k", "w")
    fused = p.run(threads=2)
    got = fused.to_arrow()
    assert got.equals(p.run(threads=2, fuse=False).to_arrow())
    ops = fused.stats()["operators"]
    assert [o["name"] for o in ops] == ["filter", "with_columns", "select"]
    assert all(o["fused"] for o in ops)
    assert ops[0]["tuples_in"] == 5000 and ops[0]["tuples_out"] == ops[1]["tuples_in"] == got.num_rows

