"""Pipelines on the engine against the plain reference (pipeline_reference.py), and the ordered
execution promise: every combination of threads, scheduler, reorder scheme, partitioning and
morsel size gives the byte-identical table of the sequential run."""

from __future__ import annotations

import gc
import itertools
import os
import random
import threading

import hypothesis.strategies as st
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import HealthCheck, given, settings

import pyarrow_ops as po
from pipeline_reference import run_reference
from pyarrow_ops import col

CONFIGS = [
    dict(threads=1),
    dict(threads=2, morsel=1, reorder_capacity=2, max_inflight=4),  # the debug setting: one tuple at a time
    dict(threads=2, scheduler="lp", reorder="locked", partitioning="partitioned", morsel=7),
    dict(threads=3, scheduler="et", partitioning="shared", morsel=5, partitions=3),
    dict(threads=4, scheduler="qst", reorder="locked", morsel=3),
    dict(threads=2, scheduler="ct", partitioning="hybrid"),
    dict(threads=2, push_down=False, morsel=2),  # several inputs merged before every operator
    dict(threads="auto", morsel=4),  # elastic: workers above the level wait
    dict(threads=2, fuse=False, morsel=6),  # every operator its own task, keyed ones included
    dict(threading="manual", morsel=3),  # the reader's thread runs everything
    dict(threading="dedicated", morsel=5),  # a thread per operator
    dict(threading="dynamic", threads=3, morsel=6),  # the free-list scheduler
    dict(threading="dynamic", threads="auto", morsel=2),
]
RUNS = {"configurations": 0}


def _inputs(rng: random.Random, n_inputs: int, rows: int, keys: int, string_keys: bool) -> list[pa.Table]:
    out = []
    for i in range(n_inputs):
        n = rng.randrange(0, rows + 1)
        ts = sorted(rng.randrange(0, rows * 3) for _ in range(n))
        k = [rng.randrange(keys) for _ in range(n)]
        out.append(pa.table({
            "ts": pa.array(ts, pa.int64()),
            "k": pa.array([f"u{x}" for x in k] if string_keys else k, pa.string() if string_keys else pa.int64()),
            "v": pa.array([None if rng.random() < 0.1 else rng.randrange(-50, 50) for _ in range(n)], pa.int64()),
            "item": pa.array([rng.randrange(6) for _ in range(n)], pa.int64()),
        }))
    return out


def _random_chain(rng: random.Random) -> list[tuple]:
    """(engine method, args, kwargs, reference spec) per operator; schema-preserving ones first,
    then at most one that reshapes the rows."""
    chain = []
    used = 0
    session = None  # the latest sessionize's column, while it lasts: running may key by it too
    for _ in range(rng.randrange(1, 5)):
        used += 1
        choice = rng.choice(["filter", "with_columns", "select", "sessionize", "lag", "running", "delta", "dedupe",
                             "map"])
        c = rng.randrange(-20, 20)
        if choice == "filter":
            chain.append(("filter", (col("v") > c,), {},
                          {"op": "filter", "pred": lambda r, c=c: None if r["v"] is None else r["v"] > c}))
        elif choice == "with_columns":
            name = f"w{used}"
            chain.append(("with_columns", (), {name: col("v") * 2 + c},
                          {"op": "with_columns",
                           "named": {name: (lambda r, c=c: None if r["v"] is None else r["v"] * 2 + c, pa.int64())}}))
        elif choice == "select":  # keeps the columns later operators use, adds one, drops the rest
            name = f"e{used}"
            session = None
            chain.append(("select", ("ts", "k", "v", "item"), {name: (col("v") % 7) == c % 7},
                          {"op": "select", "columns": ["ts", "k", "v", "item"],
                           "named": {name: (lambda r, c=c: None if r["v"] is None else r["v"] % 7 == c % 7,
                                            pa.bool_())}}))
        elif choice == "sessionize":
            gap = rng.randrange(0, 10)
            session = f"s{used}"
            chain.append(("sessionize", ("k",), {"gap": gap, "name": f"s{used}"},
                          {"op": "sessionize", "key": "k", "gap": gap, "name": f"s{used}"}))
        elif choice == "lag":
            chain.append(("lag", ("k", "v"), {"suffix": f"_p{used}"},
                          {"op": "lag", "key": "k", "columns": "v", "suffix": f"_p{used}"}))
        elif choice == "delta":
            chain.append(("delta", ("k", ["v", "ts"]), {"suffix": f"_d{used}"},
                          {"op": "delta", "key": "k", "columns": ["v", "ts"], "suffix": f"_d{used}"}))
        elif choice == "running":
            aggs = {f"n{used}": po.count(), f"r{used}": po.sum("v"), f"f{used}": po.first("v"), f"m{used}": po.max("v")}
            # Per key and session (right after sessionize, the planner keys it by k alone and
            # restarts at each new session: Operator::keyed_by_epoch), or per key.
            key = rng.choice([["k", session], [session, "k"]]) if session and rng.random() < 0.7 else "k"
            chain.append(("running", (key, aggs), {}, {"op": "running", "key": key, "aggs": aggs}))
        elif choice == "dedupe":
            within = rng.choice([None, 3])
            chain.append(("dedupe", ("k",), {"within": within}, {"op": "dedupe", "key": "k", "within": within}))
        else:
            def fn(b: pa.RecordBatch) -> pa.RecordBatch:
                return b.filter(pc.not_equal(pc.bit_wise_and(b.column("item"), 1), 1))
            chain.append(("map_batches", (fn,), {}, {"op": "map_batches", "fn": fn}))
    tail = rng.choice(["none", "pairs", "window", "window_topk", "global_window"])
    if tail == "pairs":
        gap = rng.randrange(0, 8)
        chain.append(("pairs", ("k", "item", gap), {}, {"op": "pairs", "key": "k", "item": "item", "gap": gap}))
    elif tail in ("window", "window_topk"):
        w = po.sliding(size=rng.randrange(2, 9), advance=rng.randrange(1, 5))
        aggs = {"n": po.count(), "total": po.sum("v"), "last": po.last("v")}
        by_window = rng.random() < 0.5  # every key's windows together, window by window
        chain.append(("window_aggregate", (w, aggs), {"key": "k", "by_window": by_window},
                      {"op": "window_aggregate", "window": (w.size, w.advance), "aggs": aggs, "key": "k",
                       "by_window": by_window}))
        if tail == "window_topk":
            chain.append(("top_k", (2, "n"), {"per": "window_start"},
                          {"op": "top_k", "k": 2, "by": "n", "per": "window_start"}))
    elif tail == "global_window":
        w = po.tumbling(rng.randrange(2, 9))
        aggs = {"n": po.count(), "mx": po.max("v")}
        chain.append(("window_aggregate", (w, aggs), {},
                      {"op": "window_aggregate", "window": (w.size, w.advance), "aggs": aggs}))
    return chain


def _engine_pipeline(inputs: list[pa.Table], chain: list[tuple]) -> po.Pipeline:
    p = po.Pipeline(inputs, time="ts")
    for method, args, kwargs, _ in chain:
        p = getattr(p, method)(*args, **kwargs)
    return p


def _same(got: pa.Table, expected: pa.Table) -> None:
    assert got.schema.names == expected.schema.names
    assert [f.type for f in got.schema] == [f.type for f in expected.schema]
    assert got.to_pylist() == expected.to_pylist()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), n_inputs=st.integers(1, 3), rows=st.integers(0, 300),
       keys=st.integers(1, 12), string_keys=st.booleans())
def test_random_pipelines_equal_the_reference_in_every_configuration(seed, n_inputs, rows, keys, string_keys):
    rng = random.Random(seed)
    inputs = _inputs(rng, n_inputs, rows, keys, string_keys)
    chain = _random_chain(rng)
    expected = run_reference(inputs, "ts", [spec for *_, spec in chain])
    for config in CONFIGS:
        got = _engine_pipeline(inputs, chain).run(**config).to_arrow()
        _same(got, expected)
        RUNS["configurations"] += 1


def test_every_option_combination_equals_the_sequential_run():
    rng = random.Random(7)
    inputs = _inputs(rng, 2, 2000, 30, False)
    p = (po.Pipeline(inputs, time="ts").filter(col("v").is_not_null()).sessionize("k", gap=4)
         .experimental_parametric("partitioned", cost_us=0.0, key="k").experimental_parametric("stateful", cost_us=0.0)
         .with_columns(x=col("v") + 1).running("k", {"n": po.count()}))
    expected = p.run(threads=1, morsel=4096).to_arrow()
    count = 0
    for threads, scheduler, reorder, partitioning, morsel in itertools.product(
            (1, 2, 4), po.pipeline.SCHEDULERS, po.pipeline.REORDERS, po.pipeline.PARTITIONINGS, (1, 16, None)):
        got = p.run(threads=threads, scheduler=scheduler, reorder=reorder, partitioning=partitioning,
                    morsel=morsel).to_arrow()
        assert got.equals(expected), (threads, scheduler, reorder, partitioning, morsel)
        count += 1
    assert count == 3 * 4 * 2 * 3 * 3


def test_running_per_session_is_keyed_by_the_key_alone_right_after_sessionize():
    """The planner keys running over [k, session] right after sessionize("k") by k alone, restarting
    at each new session (one state per key, not per key and session); the output is that of running
    per key and session in every configuration. Not where another operator comes between."""
    rng = random.Random(3)
    inputs = _inputs(rng, 2, 3000, 40, False)
    aggs = {"n": po.count(), "total": po.sum("v"), "first": po.first("v")}
    for key in (["k", "session"], ["session", "k"]):
        p = po.Pipeline(inputs, time="ts").sessionize("k", gap=3).running(key, aggs)
        lines = p.explain().splitlines()
        assert lines[2].startswith("1 running  partitioned by [k]  "), lines
        expected = run_reference(inputs, "ts", [{"op": "sessionize", "key": "k", "gap": 3, "name": "session"},
                                                {"op": "running", "key": key, "aggs": aggs}])
        for config in CONFIGS:
            _same(p.run(**config).to_arrow(), expected)
    between = po.Pipeline(inputs, time="ts").sessionize("k", gap=3).with_columns(w=col("v")).running(["k", "session"], aggs)
    assert "running  partitioned by [k, session]" in between.explain()


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="the ingress helps only while a core would idle")
def test_the_ingress_runs_operators_while_back_pressure_holds_it():
    """One worker on a machine of several cores and room for two morsels: the ingress, held back,
    runs operators itself (stats()["ingress_steps"]), and the result is the sequential run's."""
    rng = random.Random(8)
    inputs = _inputs(rng, 2, 60_000, 500, False)
    p = (po.Pipeline(inputs, time="ts").sessionize("k", gap=3)
         .experimental_parametric("partitioned", cost_us=2.0, key="k").running("k", {"n": po.count()}))
    expected = p.run(threads=1, threading="manual").to_arrow()
    result = p.run(threads=1, max_inflight=2, morsel=256)
    assert result.to_arrow().equals(expected)
    assert result.stats()["ingress_steps"] > 0
    assert p.run(threading="manual").stats()["ingress_steps"] == 0  # no ingress thread there


def test_an_elastic_run_starts_with_small_morsels_that_double():
    """threads="auto" cuts its first source morsels at 64, 128, 256, ... rows up to the usual size
    (rows / (2 x cores), within 64..32768), so that the controller knows its operators' costs within
    its first periods; a fixed thread count cuts the usual size from the start. Same result."""
    rows = 10_000
    table = pa.table({"ts": np.arange(rows, dtype=np.int64), "v": np.arange(rows, dtype=np.float64)})
    p = po.Pipeline(table, time="ts").with_columns(u=po.col("v") * 2)
    cores = os.cpu_count() or 1
    usual = min(max(-(-rows // (2 * cores)), 64), 32768)
    cuts, start, small = [], 0, 64
    while start < rows:
        length = min(usual, rows - start)
        if small < usual:
            length = min(length, small)
            small *= 2
        cuts.append(length)
        start += length
    fixed = p.run(threads=cores, fuse=False)
    elastic = p.run(threads="auto", fuse=False)
    assert elastic.to_arrow().equals(fixed.to_arrow())
    assert fixed.stats()["operators"][0]["morsels"] == -(-rows // usual)
    assert elastic.stats()["operators"][0]["morsels"] == len(cuts)
    assert cuts[:2] == [64, 128]


def test_threads_auto_adapts_the_level_and_keeps_the_result():
    """threads="auto": the elastic controller reports a level per period (100 ms), from one worker
    up to the cores, and the result equals a fixed thread count's."""
    rng = random.Random(5)
    inputs = _inputs(rng, 1, 60_000, 500, False)
    p = (po.Pipeline(inputs, time="ts").sessionize("k", gap=3)
         .experimental_parametric("partitioned", cost_us=5.0, key="k").running("k", {"n": po.count()}))
    fixed = p.run(threads=1).to_arrow()
    result = p.run(threads="auto")
    assert result.to_arrow().equals(fixed)
    levels = result.stats()["thread_levels"]
    assert levels, "a run of several periods reports its levels"
    assert levels[0]["threads"] == 1
    assert all(1 <= level["threads"] <= (os.cpu_count() or 1) and level["tuples_per_s"] >= 0 for level in levels)
    assert [level["at_ns"] for level in levels] == sorted(level["at_ns"] for level in levels)
    assert p.run(threads=2).stats()["thread_levels"] == []
    with pytest.raises(ValueError, match="threads must be a positive int or None, or 'auto', got 'many'"):
        p.run(threads="many")


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="counts threads through Linux's /proc")
def test_threading_models():
    """threading="manual": the run starts no thread; reading it runs the operators, and a graph's
    outputs equal an ordered run's. "dedicated" (a thread per operator) and "dynamic" (the free-list
    scheduler): the same outputs."""
    rng = random.Random(11)
    inputs = _inputs(rng, 2, 20_000, 50, False)
    clicks = po.Pipeline(inputs, time="ts")
    graph = {"sessions": clicks.sessionize("k", gap=3).running(["k", "session"], {"n": po.count()}),
             "big": clicks.filter(col("v") > 10)}
    ordered = po.run(graph, threads=2).to_arrow()
    before = len(os.listdir("/proc/self/task"))
    result = po.run(graph, threading="manual", morsel=256)
    assert len(os.listdir("/proc/self/task")) == before
    assert result.to_arrow() == ordered
    with pytest.raises(ValueError, match="threads must be None or 1, got 2"):
        clicks.run(threads=2, threading="manual")
    with pytest.raises(ValueError, match="threads='auto' needs threading='ordered' or 'dynamic', got 'manual'"):
        clicks.run(threads="auto", threading="manual")
    with pytest.raises(ValueError, match="threads must be None, got 2"):
        clicks.run(threads=2, threading="dedicated")
    with pytest.raises(ValueError, match="threading must be one of 'ordered', 'manual', 'dedicated', 'dynamic', got 'x'"):
        clicks.run(threading="x")
    assert po.run(graph, threading="dynamic", threads=2).to_arrow() == ordered
    dedicated = po.run(graph, threading="dedicated")
    assert dedicated.to_arrow() == ordered
    # A thread per stage: a fused chain (here sessionize+running) is one.
    chains = po.plan(graph)["fused"]
    stages = len(dedicated.stats()["operators"]) - sum(len(chain) - 1 for chain in chains)
    assert chains and dedicated.stats()["threads"] == stages


def test_result_converts_to_arrow_and_polars_without_copying():
    t = pa.table({"ts": list(range(100)), "k": [i % 3 for i in range(100)]})
    p = po.Pipeline(t, time="ts").filter(col("k") >= 0)
    out = p.run(threads=2, morsel=100).to_arrow()
    assert out.column("ts").chunks[0].buffers()[1].address == t.column("ts").chunks[0].buffers()[1].address
    df = po.Pipeline(t, time="ts").sessionize("k", gap=1).run(threads=2).to_polars()
    assert df.columns == ["ts", "k", "session"]


def test_explain_lists_kinds_keys_selectivity_and_parallelism():
    t = pa.table({"ts": [1], "k": [1], "v": [1.0]})
    text = (po.Pipeline(t, time="ts").filter(col("v") > 0).sessionize("k", gap=5).top_k(3, "v").explain())
    assert text.splitlines() == [
        "source 0  ts, k, v",
        "0 filter  stateless  selectivity: at most one  parallelism: every worker  <- source 0",
        "1 sessionize  partitioned by [k]  selectivity: exactly one  parallelism: partitions  <- 0",
        "2 top_k  stateful  selectivity: any  parallelism: 1  <- 1",
        "region 0: operators 0, 1  routing: hash by [k]  ordering: seqno and pulses",
        "output result <- 2",
    ]


def test_stats_report_every_operator():
    t = pa.table({"ts": list(range(1000)), "k": [i % 7 for i in range(1000)]})
    p = po.Pipeline(t, time="ts").filter(col("k") != 0).sessionize("k", gap=10)
    result = p.run(threads=2)
    n = result.to_arrow().num_rows
    s = p.stats()
    assert [o["name"] for o in s["operators"]] == ["filter", "sessionize"]
    assert s["tuples_in"] == 1000 and s["tuples_out"] == n
    assert s["operators"][0]["tuples_out"] == s["operators"][1]["tuples_in"] == n
    assert s["operators"][1]["kind"] == "partitioned"
    # Worker time by the clock, and the part of it the workers ran: CPU time is read inside the
    # clock's reads, so never more.
    assert all(0 < o["cpu_ns"] <= o["busy_ns"] for o in s["operators"])


def _merged_reference(inputs: list[pa.Table]) -> pa.Table:
    """The inputs in the merged order (time, input index, position), plainly."""
    tagged = [t.append_column("_i", pa.array([i] * t.num_rows, pa.int64()))
               .append_column("_p", pa.array(range(t.num_rows), pa.int64())) for i, t in enumerate(inputs)]
    merged = pa.concat_tables(tagged).sort_by([("ts", "ascending"), ("_i", "ascending"), ("_p", "ascending")])
    return merged.drop_columns(["_i", "_p"])


def test_filters_and_projections_run_on_each_input_before_the_merge():
    rng = random.Random(29)
    inputs = _inputs(rng, 4, 3000, 20, False)
    p = (po.Pipeline(inputs, time="ts").filter(col("v").is_not_null() & (col("item") != 3)).select("ts", "k", "v")
         .with_columns(w=col("v") * 2).sessionize("k", gap=5))
    lines = p.explain().splitlines()
    # Per input: its source, its filter and select; a union in the merge's place; then the rest.
    assert [line for line in lines if line.startswith(("0 ", "1 "))] == [
        "0 filter  stateless  selectivity: at most one  parallelism: every worker  <- source 0 input 0",
        "1 select  stateless  selectivity: exactly one  parallelism: every worker  <- 0"]
    assert "8 union  4 inputs  selectivity: exactly one  parallelism: 1  <- 1, 3, 5, 7" in lines
    assert "9 with_columns  stateless  selectivity: exactly one  parallelism: every worker  <- 8" in lines
    assert "source 0 input 3" in p.explain() and "union" not in p.explain(push_down=False)
    data = po.plan({"r": p})
    assert [op["number"] for op in data["operators"]] == [0, 1] * 4 + [4, 2, 3]  # copies keep their numbers

    merged = _merged_reference(inputs)
    v, item = merged["v"], merged["item"]
    keep = pc.and_(pc.is_valid(v), pc.not_equal(item, 3)).fill_null(False)
    expected = (po.Pipeline(merged.filter(keep).select(["ts", "k", "v"]), time="ts").with_columns(w=col("v") * 2)
                .sessionize("k", gap=5).run(threads=1).to_arrow())
    for config in CONFIGS:
        got = p.run(**config).to_arrow()
        assert got.equals(expected), config
    result = p.run(threads=2)
    assert result.to_arrow().equals(expected)
    ops = result.stats()["operators"]
    assert [(o["name"], o["copies"]) for o in ops] == [("filter", 4), ("select", 4), ("with_columns", 1),
                                                       ("sessionize", 1), ("union", 1)]
    assert ops[0]["tuples_in"] == sum(t.num_rows for t in inputs) and ops[4]["tuples_out"] == expected.num_rows


def test_what_stays_after_the_merge():
    inputs = _inputs(random.Random(3), 3, 50, 5, False)
    def pushed(p: po.Pipeline) -> bool:
        return "input 1" in p.explain()
    base = po.Pipeline(inputs, time="ts")
    assert pushed(base.filter(col("v") > 0))
    assert not pushed(base.with_columns(w=col("v") + 1))  # adds columns only: the union would copy more
    assert not pushed(base.filter(col("v") // col("item") > 0))  # may fail: its error names a merged row
    assert not pushed(base.with_columns(ts=col("ts") + 1).filter(col("v") > 0))  # rewrites the time
    assert not pushed(base.sessionize("k", gap=3))
    assert not pushed(po.Pipeline(inputs[0], time="ts").filter(col("v") > 0))  # one input: no merge to move
    # Inputs two pipelines read are not taken apart; a pushed filter two pipelines read is the union's.
    assert "input 1" not in po.explain({"a": base.filter(col("v") > 0), "b": base.filter(col("v") < 0)})
    shared = base.filter(col("v") > 0)
    assert "input 1" in po.explain({"a": shared, "b": shared.with_columns(w=col("v"))})
    got = po.run({"a": shared, "b": shared.with_columns(w=col("v"))}, threads=2).to_arrow()
    expected = po.run({"a": shared, "b": shared.with_columns(w=col("v"))}, threads=2, push_down=False).to_arrow()
    assert got["a"].equals(expected["a"]) and got["b"].equals(expected["b"]) and got["a"].num_rows > 0
    # ... so it still names the row of the merged stream: input 1's row 0 comes first there.
    with pytest.raises(po.InvalidInputError, match=r"operator 0 \(filter\), row 3 of its input: integer division"):
        po.Pipeline([pa.table({"ts": [1, 2, 3], "v": [1, 1, 0]}), pa.table({"ts": [0], "v": [1]})], time="ts") \
            .filter(col("v") // col("v") > 0).run(threads=2).to_arrow()


@pytest.mark.parametrize("time_type", [pa.timestamp("ms", "UTC"), pa.date32(), pa.int32()])
def test_filters_below_the_merge_with_every_time_type(time_type):
    times = pa.array([1, 3, 3, 7], pa.int64() if pa.types.is_timestamp(time_type) else pa.int32()).cast(time_type)
    a = pa.table({"t": times, "v": [1, -2, 3, 4]})
    b = pa.table({"t": times, "v": [5, 6, -7, 8]})
    p = po.Pipeline([a, b], time="t").filter(col("v") > 0).select("t", "v")
    assert "source 0 input 1" in p.explain()
    got = p.run(threads=2).to_arrow()
    assert got.equals(p.run(threads=2, push_down=False).to_arrow())
    assert got["v"].to_pylist() == [1, 5, 3, 6, 4, 8] and got.schema.field("t").type == time_type  # ties: input 0 first


@pytest.mark.parametrize("push_down", [True, False])
def test_input_errors_below_the_merge_name_the_input_and_row_as_the_merge_does(push_down):
    good = pa.table({"ts": [1, 2, 3, 4], "v": [1, 2, 3, 4]})
    bad = pa.table({"ts": [1, 2, 9, 3], "v": [1, 2, 3, 4]})
    def run(tables):
        return po.Pipeline(tables, time="ts").filter(col("v") > 1).run(threads=2, push_down=push_down).to_arrow()
    with pytest.raises(po.UnsortedInputError, match="input 2 is not sorted by 'ts': row 3 has 3, earlier than 9 at row 2"):
        run([good, good, bad])
    with pytest.raises(po.NullTimeError, match="input 1 has a null time in column 'ts' at row 2"):
        run([good, pa.table({"ts": pa.array([1, 2, None], pa.int64()), "v": [1, 2, 3]}), good])
    with pytest.raises(po.SchemaMismatchError, match="input 1 does not match input 0: column 'v' has type double"):
        run([good, pa.table({"ts": [1], "v": [1.5]})])


def test_map_batches_error_reaches_the_caller_unchanged():
    t = pa.table({"ts": list(range(1000)), "k": [1] * 1000})

    class Boom(Exception):
        pass

    def fn(b):
        if b.num_rows and b.column("ts")[0].as_py() > 500:
            raise Boom("bad batch")
        return b

    with pytest.raises(Boom, match="bad batch"):
        po.Pipeline(t, time="ts").map_batches(fn).run(threads=2, morsel=10).to_arrow()


def test_map_batches_wrong_schema_names_the_operator():
    t = pa.table({"ts": list(range(100)), "k": [1] * 100})
    calls = {"n": 0}

    def fn(b):
        calls["n"] += 1
        return b if calls["n"] < 3 else b.select(["ts"])

    with pytest.raises(po.SchemaMismatchError, match=r"map_batches \(operator 0\)"):
        po.Pipeline(t, time="ts").map_batches(fn).run(threads=2, morsel=10).to_arrow()


def test_bad_expressions_and_arguments_give_clear_errors():
    t = pa.table({"ts": [1, 2], "k": ["a", "b"]})
    with pytest.raises(po.InvalidInputError, match=r"operator 0 \(filter\).*'nope'"):
        po.Pipeline(t, time="ts").filter(col("nope") > 1).run()
    with pytest.raises((po.InvalidInputError, TypeError), match=r"operator 0 \(filter\)"):
        po.Pipeline(t, time="ts").filter(col("k") + 1 > 1).run()
    with pytest.raises(po.InvalidInputError, match="sessionize"):
        po.Pipeline(t, time="ts").sessionize("missing", gap=1).run()
    with pytest.raises(ValueError, match="scheduler"):
        po.Pipeline(t, time="ts").filter(col("ts") > 0).run(scheduler="fifo")


def test_unsorted_input_names_input_and_row():
    t = pa.table({"ts": [1, 5, 3], "k": [1, 1, 1]})
    with pytest.raises(po.UnsortedInputError, match="input 0"):
        po.Pipeline(t, time="ts").sessionize("k", gap=1).run(threads=2).to_arrow()


def test_a_failed_run_releases_its_batches():
    t = pa.table({"ts": list(range(5000)), "k": [i % 5 for i in range(5000)]})
    before = po._engine.live_exports()

    def fn(b):
        raise RuntimeError("stop")

    schema = pa.schema([("ts", pa.int64()), ("k", pa.int64()), ("session", pa.int64())])
    for _ in range(3):
        try:
            po.Pipeline(t, time="ts").sessionize("k", gap=3).map_batches(fn, schema=schema).run(
                threads=2, morsel=50).to_arrow()
        except RuntimeError as e:
            assert "stop" in str(e)
        else:
            pytest.fail("the run did not fail")
    # The exception's traceback held the batch handed to fn; it is gone with the except block.
    gc.collect()
    assert po._engine.live_exports() == before


def test_live_inputs_pushed_from_threads_give_the_batch_result():
    rng = random.Random(11)
    tables = _inputs(rng, 2, 3000, 20, False)
    expected = po.Pipeline(tables, time="ts").sessionize("k", gap=3).running("k", {"n": po.count()}).run(
        threads=1).to_arrow()
    lives = [po.LiveInput(t.schema, max_batches=2) for t in tables]
    result = po.Pipeline(lives, time="ts").sessionize("k", gap=3).running("k", {"n": po.count()}).run(threads=2)

    def produce(live, table):
        for b in table.to_batches(max_chunksize=37):
            live.push(b)
        live.close()

    threads = [threading.Thread(target=produce, args=(lv, t)) for lv, t in zip(lives, tables)]
    for th in threads:
        th.start()
    got = result.to_arrow()
    for th in threads:
        th.join()
    assert got.equals(expected)


def test_live_input_checks_pushed_schemas():
    live = po.LiveInput(pa.schema([("ts", pa.int64())]))
    with pytest.raises(po.SchemaMismatchError, match="live input, batch 0"):
        live.push(pa.record_batch({"ts": pa.array([1], pa.int32())}))
    live.close()
    with pytest.raises(po.UsageError, match="closed"):
        live.push(pa.record_batch({"ts": [1]}))


def test_carried_row_numbers_name_each_output_rows_producer():
    """The lineage pyarrow_ops.spark.run relies on (ops::carry_column): an int64 column carried
    through operators that make new rows, null for rows emitted at the end of the input; and
    reserved __pao_ columns do not change the parametric operator's hashes."""
    t = pa.table({"ts": [1, 2, 3, 12, 13], "k": [1, 1, 2, 1, 2], "item": [5, 6, 5, 7, 6],
                  "__pao_row": pa.array([10, 11, 12, 13, 14], pa.int64())})
    options = po._engine.PipelineOptions(threads=2)
    pairs = po.Pipeline(t, time="ts").pairs("k", "item", gap=5)._start(options, carry="__pao_row").to_arrow()
    assert pairs.column("__pao_row").to_pylist() == [11]  # (5, 6) of key 1, made by the row with item 6
    windows = (po.Pipeline(t, time="ts").window_aggregate(po.tumbling(10), {"n": po.count()}, key="k")
               ._start(options, carry="__pao_row").to_arrow())
    # Each key's first window closes at its tuple at 12 or 13 (rows 13, 14); the rest at the end: null.
    assert windows.select(["window_start", "k", "n", "__pao_row"]).to_pylist() == [
        {"window_start": 0, "k": 1, "n": 2, "__pao_row": 13},
        {"window_start": 0, "k": 2, "n": 1, "__pao_row": 14},
        {"window_start": 10, "k": 1, "n": 1, "__pao_row": None},
        {"window_start": 10, "k": 2, "n": 1, "__pao_row": None},
    ]
    with pytest.raises(po.InvalidInputError, match=r"operator 0 \(select\).*carry"):
        po.Pipeline(t, time="ts").select("ts", "k")._start(options, carry="__pao_row")
    plain = po.Pipeline(t.drop_columns(["__pao_row"]), time="ts").experimental_parametric("partitioned", cost_us=0, key="k")
    marked = po.Pipeline(t, time="ts").experimental_parametric("partitioned", cost_us=0, key="k")
    assert (plain.run().to_arrow().column("p_state").to_pylist()
            == marked.run().to_arrow().column("p_state").to_pylist())


# --- Errors name the operator and the row within its input; order-dependent operators check. ---

def test_an_expression_error_names_the_operator_and_the_row_of_its_input():
    n = 100_000
    d = np.ones(n, dtype=np.int64)
    d[77_777] = 0
    t = pa.table({"t": np.arange(n), "a": np.ones(n, dtype=np.int64), "d": d})
    for threads in (1, 2):
        p = po.Pipeline(t, time="t").with_columns(q=col("a") // col("d"))
        with pytest.raises(po.InvalidInputError, match=r"^operator 0 \(with_columns\), row 77777 of its input: "
                                                       r"integer division by zero in \(col\(\"a\"\) // col\(\"d\"\)\)$"):
            p.run(threads=threads, morsel=1000).to_arrow()
    # After a filter, the row counts within the filter's output, the next operator's input.
    p = po.Pipeline(t, time="t").filter(col("t") % 2 == 1).with_columns(q=col("a") // col("d"))
    with pytest.raises(po.InvalidInputError, match=r"operator 1 \(with_columns\), row 38888 of its input"):
        p.run(threads=2).to_arrow()


ORDER_DEPENDENT = {
    "sessionize": lambda p: p.sessionize("k", gap=3),
    "lag": lambda p: p.lag("k", "v"),
    "delta": lambda p: p.delta("k"),
    "running": lambda p: p.running("k", {"n": po.count()}),
    "dedupe": lambda p: p.dedupe("k"),
    "dedupe within": lambda p: p.dedupe("k", within=1),
    "pairs": lambda p: p.pairs("k", "v", gap=3),
    "window_aggregate by key": lambda p: p.window_aggregate(po.tumbling(4), {"n": po.count()}, key="k"),
    "window_aggregate": lambda p: p.window_aggregate(po.tumbling(4), {"n": po.count()}),
}


@pytest.mark.parametrize("name", ORDER_DEPENDENT)
def test_order_dependent_operators_refuse_a_rewritten_time_that_goes_back(name):
    # A sawtooth time (0..4, 0..4, ...) once made dedupe drop rows silently.
    t = pa.table({"t": np.arange(40), "k": np.zeros(40, dtype=np.int64), "v": np.arange(40) % 7})
    op = name.split()[0]
    for threads in (1, 2):
        p = ORDER_DEPENDENT[name](po.Pipeline(t, time="t").with_columns(t=col("t") % 5))
        with pytest.raises(po.UnsortedInputError, match=rf"^operator 1 \({op}\), row 5 of its input: time column 't'"):
            p.run(threads=threads).to_arrow()
        # A rewrite that keeps each key's order runs as before.
        ORDER_DEPENDENT[name](po.Pipeline(t, time="t").with_columns(t=col("t") * 10)).run(threads=threads).to_arrow()


def test_order_checks_are_per_key():
    # Times that go back across keys but not within one: each key's order is what the operators use.
    t = pa.table({"t": np.arange(8), "k": [0, 0, 0, 0, 1, 1, 1, 1]})
    p = po.Pipeline(t, time="t").with_columns(t=col("t") % 4).sessionize("k", gap=1)
    assert p.run(threads=2).to_arrow().column("session").to_pylist() == [0] * 8


def test_steps_are_the_plan_as_data_and_build_the_same_pipeline():
    t = pa.table({"ts": [1, 2, 40, 41], "user": [1, 1, 1, 2], "page": [3, 4, 5, 6]})
    p = po.Pipeline(t, time="ts").filter(col("page") > 3).sessionize("user", gap=30)
    assert [s.name for s in p.steps] == ["filter", "sessionize"]
    assert p.time == "ts" and p.input_schema == t.schema
    rebuilt = po.Pipeline.from_steps(p.steps, time=p.time).with_inputs(t)
    assert rebuilt.run(threads=2).to_arrow().equals(p.run(threads=2).to_arrow())
    # Steps carry plain values, so Spark can pickle them to its workers.
    import pickle
    assert pickle.loads(pickle.dumps(p.steps[1])) == p.steps[1]
    with pytest.raises(po.UsageError, match="no inputs"):
        po.Pipeline.from_steps(p.steps, time="ts").plan()
    assert [op["name"] for op in po.Pipeline.from_steps(p.steps, time="ts").plan(t.schema)] == ["filter", "sessionize"]


def test_experiment_is_the_one_benchmark_option_and_changes_no_result():
    t = pa.table({"ts": list(range(100)), "k": [i % 3 for i in range(100)]})
    p = po.Pipeline(t, time="ts").sessionize("k", gap=5)
    assert p.run(threads=2, experiment=po.Experiment(rate=1e6)).to_arrow().equals(p.run(threads=2).to_arrow())
    with pytest.raises(ValueError, match="rate"):
        po.Experiment(rate=-1)
    with pytest.raises(TypeError, match="Experiment"):
        p.run(experiment={"rate": 1.0})
    with pytest.raises(TypeError, match="Experiment"):
        po.aggregate(t, time="ts", window=po.tumbling(10), aggs={"n": po.count()}, experiment=0.5)


@pytest.mark.parametrize("threading", ["ordered", "manual", "dedicated", "dynamic"])
def test_a_pipeline_of_no_operators_merges_its_inputs_under_every_threading(threading: str) -> None:
    # Dedicated threading once gave its one worker stage 0 of a run that has none (a crash).
    t = pa.table({"t": list(range(20000))})
    for _ in range(5):
        out = po.Pipeline([t, t], time="t").run(threading=threading).to_arrow()
        assert out["t"].to_pylist() == sorted(list(range(20000)) * 2)
