"""Session windows (window=po.session(gap), issue 31) against a Polars reference: randomized inputs
(ties, several inputs, null keys, random batches), every design that computes sessions and the
pushed form; rows leave as soon as readiness proves a session's gap has passed."""

import numpy as np
import polars as pl
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pyarrow_ops as po
from reference import _order_key, reference_merge, run_live, split

SESSION_DESIGNS = ["auto", "mq", "mqlf", "tumlsc"]
AGGS = {"n": po.count(), "s": po.sum("v"), "f": po.first("v"), "l": po.last("v"), "lo": po.min("v"),
        "hi": po.max("v"), "m": po.mean("v")}


def polars_sessions(tables: list[pa.Table], keys: list[str], gap: int) -> list[dict]:
    """Sessions by their definition, with Polars: the merged order (time, input, position), per key a
    new session where a tuple is more than `gap` after the key's previous one; one row per session,
    sorted by window_end and then key (the engine's key order)."""
    df = pl.from_arrow(reference_merge(tables, "t"))
    by = keys or [pl.lit(0).alias("_all")]
    if not keys:
        df = df.with_columns(_all=pl.lit(0))
        by = ["_all"]
    df = df.with_columns(_new=((pl.col("t") - pl.col("t").shift(1)).over(by) > gap).fill_null(True))
    df = df.with_columns(_sid=pl.col("_new").cast(pl.Int64).cum_sum().over(by))
    g = df.group_by([*by, "_sid"], maintain_order=True).agg(
        window_start=pl.col("t").first(), window_end=pl.col("t").last() + gap, n=pl.len().cast(pl.Int64),
        s=pl.col("v").sum(), f=pl.col("v").first(), l=pl.col("v").last(), lo=pl.col("v").min(), hi=pl.col("v").max(),
        m=pl.col("v").mean())
    rows = g.select(["window_start", "window_end", *keys, *AGGS]).to_dicts()
    key_types = [tables[0].schema.field(k).type for k in keys]
    rows.sort(key=lambda r: (r["window_end"], *(_order_key(r[k], t) for k, t in zip(keys, key_types))))
    return rows


@st.composite
def cases(draw):
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    inputs = draw(st.integers(1, 4))
    keyed = draw(st.booleans())
    null_keys = draw(st.sampled_from([0.0, 0.1]))
    tables = []
    for _ in range(inputs):
        n = int(rng.integers(0, 150))
        t = np.cumsum(rng.integers(0, int(draw(st.sampled_from([2, 8, 30]))), n)).astype(np.int64)
        k = pa.array(rng.integers(0, 5, n), pa.int64(), mask=rng.random(n) < null_keys)
        tables.append(pa.table({"t": t, "k": k, "v": rng.integers(-20, 20, n).astype(np.float64)}))
    gap = draw(st.sampled_from([0, 1, 5, 20]))
    return seed, tables, ["k"] if keyed else [], gap


@settings(max_examples=80, deadline=None)
@given(cases(), st.sampled_from(SESSION_DESIGNS), st.integers(1, 3), st.integers(1, 30))
def test_sessions_equal_the_polars_reference(case, design, threads, max_rows):
    seed, tables, keys, gap = case
    rng = np.random.default_rng(seed + 1)
    inputs = [pa.RecordBatchReader.from_batches(t.schema, split(t, rng, max_rows)) for t in tables]
    out = po.aggregate(inputs, time="t", key=keys or None, window=po.session(gap), aggs=AGGS, design=design,
                       threads=threads, batch_size=max_rows)
    assert out.to_arrow().to_pylist() == polars_sessions(tables, keys, gap)


@settings(max_examples=30, deadline=None)
@given(cases(), st.sampled_from(["auto", "mq", "tumlsc"]), st.integers(1, 30))
def test_live_sessions_equal_the_polars_reference(case, design, max_rows):
    """Pushed by one thread per input: the same rows as the batch reference."""
    seed, tables, keys, gap = case
    live = po.live_aggregate(tables[0].schema, len(tables), time="t", key=keys or None, window=po.session(gap),
                             aggs=AGGS, design=design)
    batches = [split(t, np.random.default_rng(seed + 10 + i), max_rows) for i, t in enumerate(tables)]
    got = [r for b in run_live(live, batches) for r in b.to_pylist()]
    assert got == polars_sessions(tables, keys, gap)


@settings(max_examples=40, deadline=None)
@given(cases(), st.integers(1, 3), st.integers(1, 30))
def test_pipeline_sessions_equal_the_polars_reference(case, threads, morsel):
    """window_aggregate(po.session(gap)) after a stateless step, on every thread count: the same
    rows as aggregate() (stateful: one worker; the runtime keeps the input order)."""
    seed, tables, keys, gap = case
    p = (po.Pipeline(tables, time="t").with_columns(v=po.col("v") * 1)
         .window_aggregate(po.session(gap), AGGS, key=keys or None))
    out = p.run(threads=threads, morsel=morsel).to_arrow()
    assert out.to_pylist() == polars_sessions(tables, keys, gap)
    assert "window_aggregate  stateful" in po.explain({"out": p})  # one worker, in the input order


def test_a_session_leaves_once_the_gap_has_passed():
    """Not at the end of the input: as soon as every input is past the session's end (here by a
    later tuple, then by a heartbeat)."""
    schema = pa.schema([("t", pa.int64()), ("user", pa.int64())])
    live = po.live_aggregate(schema, 1, time="t", key="user", window=po.session(10), aggs={"n": po.count()})
    it = iter(live)
    live.push(0, pa.record_batch({"t": [0, 4, 9, 12], "user": [1, 2, 1, 2]}, schema=schema))
    live.push(0, pa.record_batch({"t": [20], "user": [3]}, schema=schema))  # past user 1's end, 19
    assert next(it).to_pylist() == [{"window_start": 0, "window_end": 19, "user": 1, "n": 2}]
    live.heartbeat(0, 23)  # past user 2's end, 22
    assert next(it).to_pylist() == [{"window_start": 4, "window_end": 22, "user": 2, "n": 2}]
    live.close(0)
    assert [r for b in it for r in b.to_pylist()] == [{"window_start": 20, "window_end": 30, "user": 3, "n": 1}]


def test_session_arguments_and_designs():
    t = pa.table({"t": [0, 1], "k": [1, 1]})
    for design in ("sliced", "tumlmc", "wiml"):
        with pytest.raises(po.InvalidInputError, match="session windows are computed by the designs mq, mqlf and "
                                                       "tumlsc"):
            po.aggregate(t, time="t", key="k", window=po.session(1), aggs={"n": po.count()}, design=design)
    with pytest.raises(ValueError, match="session gap must be at least 0"):
        po.aggregate(t, time="t", key="k", window=po.session(-1), aggs={"n": po.count()})
    assert po.aggregate(t, time="t", key="k", window=po.session(5), aggs={"n": po.count()}).stats()["design"] == "tumlsc"
    # Times whose session end would pass the column's range are refused, naming the bound.
    big = pa.table({"t": pa.array([2**31 - 5], pa.int32()), "k": [1]})
    with pytest.raises(po.InvalidInputError, match="whose sessions end"):
        po.aggregate(big, time="t", key="k", window=po.session(10), aggs={"n": po.count()}).to_arrow()
