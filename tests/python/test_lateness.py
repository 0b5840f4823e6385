"""lateness= and late=: inputs out of time order within a bound (issue 31). Every way in (merge,
aggregate with every design, pipelines, live_aggregate) on random inputs shuffled within and beyond
the bound, random batch sizes and every policy, against a plain model: the same operation on the
inputs the definition makes (each input's rows that are not late, sorted by time then arrival),
and the late rows the definition names."""

import datetime as dt
import threading

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pyarrow_ops as po
from pyarrow_ops import col
from reference import reference_aggregate, reference_merge, run_live, split

INT64_MIN = -(2**63)


def model(table: pa.Table, time: str, bound: int) -> tuple[pa.Table, list[int]]:
    """docs/time.md's rule, row by row: the rows that are not late in (time, arrival) order, and the
    late rows' positions."""
    times = table.column(time).cast(pa.int64()).to_pylist()
    latest, kept, late = None, [], []
    for r, t in enumerate(times):
        if latest is not None and t < latest - bound:
            late.append(r)
            continue
        latest = t if latest is None else max(latest, t)
        kept.append(r)
    kept.sort(key=lambda r: times[r])  # stable: ties keep arrival order
    return table.take(pa.array(kept, pa.int64())), late


def disordered(rng: np.random.Generator, n: int, bound: int, far: float, time_type: pa.DataType,
               start: int = 0) -> pa.Table:
    """Times rising with ties, each moved back by up to the bound, a share `far` of them beyond it."""
    base = start + np.cumsum(rng.integers(0, 3, n))
    back = np.where(rng.random(n) < far, rng.integers(0, 4 * bound + 8, n), rng.integers(0, bound + 1, n))
    times = (base - back).astype(np.int64)
    return pa.table({"t": pa.array(times).cast(time_type), "k": rng.integers(0, 4, n),
                     "v": rng.integers(-50, 50, n).astype(np.float64)})


@st.composite
def cases(draw):
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    inputs = draw(st.integers(1, 4))
    bound = draw(st.sampled_from([0, 1, 3, 10]))
    far = draw(st.sampled_from([0.0, 0.05, 0.3]))
    time_type = draw(st.sampled_from([pa.int64(), pa.int32(), pa.timestamp("ms")]))
    tables = [disordered(rng, int(rng.integers(0, 200)), bound, far, time_type, start=int(rng.integers(0, 20)))
              for _ in range(inputs)]
    late = draw(st.sampled_from(["drop", "side", "error"]))
    per_input = draw(st.booleans())
    lateness = [bound] * inputs if per_input else bound
    if pa.types.is_timestamp(time_type) and draw(st.booleans()):
        lateness = dt.timedelta(milliseconds=bound)
    return seed, tables, bound, lateness, late


def expected(tables, bound):
    models = [model(t, "t", bound) for t in tables]
    cleaned = [m[0] for m in models]
    late_rows = [(i, r) for i, (_, late) in enumerate(models) for r in late]
    return cleaned, late_rows


def check_late(result, tables, late_rows, late):
    assert result.late_counts == [sum(1 for i, _ in late_rows if i == k) for k in range(len(tables))]
    if late != "side":
        assert result.late is None
        return
    side = result.late
    assert list(zip(side["input"].to_pylist(), side["row"].to_pylist())) == late_rows
    for (i, r), got in zip(late_rows, side.drop_columns(["input", "row"]).to_pylist()):
        assert got == tables[i].slice(r, 1).to_pylist()[0]


def batches(tables, rng, max_rows):
    return [pa.RecordBatchReader.from_batches(t.schema, split(t, rng, max_rows)) for t in tables]


@settings(max_examples=60, deadline=None)
@given(cases(), st.integers(1, 3), st.integers(1, 40))
def test_merge_within_lateness_equals_the_model(case, threads, max_rows):
    seed, tables, bound, lateness, late = case
    cleaned, late_rows = expected(tables, bound)
    inputs = batches(tables, np.random.default_rng(seed + 1), max_rows)
    result = po.merge(inputs, time="t", lateness=lateness, late=late, threads=threads, batch_size=max_rows + 3)
    if late == "error" and late_rows:
        with pytest.raises(po.UnsortedInputError, match="within its lateness"):
            result.to_arrow()
        return
    assert result.to_arrow().equals(reference_merge(cleaned, "t").cast(tables[0].schema))
    check_late(result, tables, late_rows, late)


@settings(max_examples=60, deadline=None)
@given(cases(), st.sampled_from(po.DESIGNS), st.integers(1, 40))
def test_aggregate_within_lateness_equals_the_model_for_every_design(case, design, max_rows):
    seed, tables, bound, lateness, late = case
    if pa.types.is_timestamp(tables[0].schema.field("t").type):
        tables = [t.set_column(0, "t", t.column("t").cast(pa.int64())) for t in tables]
        lateness = bound
    cleaned, late_rows = expected(tables, bound)
    aggs = {"n": po.count(), "s": po.sum("v"), "f": po.first("v")}
    result = po.aggregate(batches(tables, np.random.default_rng(seed + 2), max_rows), time="t", key="k",
                          window=po.sliding(6, 2), aggs=aggs, design=design, lateness=lateness, late=late)
    if late == "error" and late_rows:
        with pytest.raises(po.UnsortedInputError, match="within its lateness"):
            result.to_arrow()
        return
    want = reference_aggregate(cleaned, time="t", key=["k"], size=6, advance=2, offset=0,
                               aggs={"n": ("count", None), "s": ("sum", "v"), "f": ("first", "v")})
    assert result.to_arrow().to_pylist() == want.to_pylist()
    check_late(result, tables, late_rows, late)
    assert result.stats()["late"] == [{"source": 0, "late": late, "rows": result.late_counts}]


@settings(max_examples=40, deadline=None)
@given(cases(), st.sampled_from([1, 2, 3]), st.booleans(), st.integers(1, 40))
def test_pipeline_within_lateness_equals_the_model(case, threads, push_down, max_rows):
    seed, tables, bound, lateness, late = case
    cleaned, late_rows = expected(tables, bound)

    def ops(p):
        return p.filter(col("v") > -30).with_columns(w=col("v") * 2).running("k", {"n": po.count(), "s": po.sum("v")})

    p = ops(po.Pipeline(batches(tables, np.random.default_rng(seed + 3), max_rows), time="t", lateness=lateness,
                        late=late))
    result = p.run(threads=threads, push_down=push_down, morsel=max_rows)
    if late == "error" and late_rows:
        with pytest.raises(po.UnsortedInputError, match="within its lateness"):
            result.to_arrow()
        return
    assert result.to_arrow().equals(ops(po.Pipeline(cleaned, time="t")).run(threads=1).to_arrow())
    check_late(result, tables, late_rows, late)
    assert result.stats()["late"] == [{"source": 0, "late": late, "rows": result.late_counts}]


@settings(max_examples=40, deadline=None)
@given(cases(), st.sampled_from(["tumlsc", "mq", "wiml"]), st.integers(1, 40))
def test_live_aggregate_within_lateness_equals_the_model(case, design, max_rows):
    """Pushed batch by batch, the inputs interleaved at random, some heartbeats (at a time no row
    after it goes below, so they add no late rows): the same windows as the batch run on the
    model's inputs, late rows and all."""
    seed, tables, bound, lateness, late = case
    if late == "error":
        late = "drop"
    tables = [t.set_column(0, "t", t.column("t").cast(pa.int64())) for t in tables]
    lateness = bound
    cleaned, late_rows = expected(tables, bound)
    rng = np.random.default_rng(seed + 4)
    live = po.live_aggregate(tables[0].schema, len(tables), time="t", key="k", window=po.tumbling(5),
                             aggs={"n": po.count(), "s": po.sum("v")}, design=design, lateness=lateness, late=late)
    pending = [list(split(t, rng, max_rows)) for t in tables]
    beats = [[rng.random() < 0.3 for _ in p] for p in pending]

    def heartbeat(i, k):
        rest = [t for b in pending[i][k:] for t in b.column(0).to_pylist()]
        if beats[i][k] and rest:
            live.heartbeat(i, min(rest))  # no row after it is earlier

    got_batches = run_live(live, pending, heartbeat)
    got = pa.Table.from_batches(got_batches, schema=live._result.schema)
    want = reference_aggregate(cleaned, time="t", key=["k"], size=5, advance=5, offset=0,
                               aggs={"n": ("count", None), "s": ("sum", "v")})
    assert got.to_pylist() == want.to_pylist()
    assert live.stats()["late"][0]["rows"] == [sum(1 for i, _ in late_rows if i == k) for k in range(len(tables))]
    if late == "side":
        assert list(zip(live.late["input"].to_pylist(), live.late["row"].to_pylist())) == late_rows


def test_lateness_arguments_and_errors():
    a = pa.table({"t": [1, 3, 2, 9, 1], "v": [1.0, 2.0, 3.0, 4.0, 5.0]})
    # A bound of 0 with a policy: rows out of order are late.
    r = po.merge([a], time="t", late="side")
    assert r.to_arrow()["t"].to_pylist() == [1, 3, 9]
    assert r.late.to_pydict() == {"t": [2, 1], "v": [3.0, 5.0], "input": [0, 0], "row": [2, 4]}
    # Per input; None means that input must be sorted.
    b = pa.table({"t": [5, 6], "v": [0.0, 0.0]})
    assert po.merge([a, b], time="t", lateness=[8, None]).to_arrow()["t"].to_pylist() == [1, 1, 2, 3, 5, 6, 9]
    with pytest.raises(po.UnsortedInputError, match=r"input 0 is not sorted by 't' within its lateness: row 4 has 1, "
                                                    r"earlier than its latest time before it, 9, less the lateness of 2"):
        po.merge([a], time="t", lateness=2).to_arrow()
    with pytest.raises(ValueError, match="late must be one of 'error', 'drop', 'side', got 'keep'"):
        po.merge([a], time="t", late="keep")
    with pytest.raises(ValueError, match="lateness has 1 entries for 2 inputs"):
        po.merge([a, b], time="t", lateness=[1])
    with pytest.raises(ValueError, match="lateness of input 0 must not be negative"):
        po.merge([a], time="t", lateness=-1)
    with pytest.raises(TypeError, match="lateness of input 0 is a timedelta but the time column is int64"):
        po.merge([a], time="t", lateness=dt.timedelta(seconds=1))
    with pytest.raises(po.InvalidInputError, match="adds the columns 'input' and 'row'"):
        po.merge([a.append_column("row", pa.array([0] * 5))], time="t", late="side")
    with pytest.raises(ValueError, match="late must be one of"):
        po.Pipeline(a, time="t", late="nope")
    ts = pa.table({"t": pa.array([0, 2000, 1000], pa.timestamp("ms")), "v": [1.0, 2.0, 3.0]})
    out = po.merge([ts], time="t", lateness=dt.timedelta(seconds=1)).to_arrow()
    assert out["v"].to_pylist() == [1.0, 3.0, 2.0]


def test_live_lateness_releases_by_watermark_heartbeat_and_close():
    """Windows close as soon as the watermark (latest time less the bound) passes them, not at the
    end; a heartbeat releases what it proves; close() releases the rest; calls after close are
    refused whole."""
    schema = pa.schema([("t", pa.int64()), ("v", pa.float64())])
    live = po.live_aggregate(schema, 1, time="t", window=po.tumbling(10), aggs={"n": po.count()},
                             lateness=5, late="side")
    it = iter(live)
    live.push(0, pa.record_batch({"t": [1, 12, 8, 3], "v": [0.0] * 4}, schema=schema))  # 3 is late (12 - 5)
    live.push(0, pa.record_batch({"t": [16, 2, 11], "v": [0.0] * 3}, schema=schema))  # 2 is late (16 - 5)
    first = next(it)  # the watermark, 11, closed [0, 10)
    assert first.to_pylist() == [{"window_start": 0, "window_end": 10, "n": 2}]
    live.heartbeat(0, 25)
    assert next(it).to_pylist() == [{"window_start": 10, "window_end": 20, "n": 3}]
    live.push(0, pa.record_batch({"t": [24, 30], "v": [0.0, 0.0]}, schema=schema))  # 24 < heartbeat 25: late
    live.close(0)
    assert [r for b in it for r in b.to_pylist()] == [{"window_start": 30, "window_end": 40, "n": 1}]
    assert live.late.to_pydict() == {"t": [3, 2, 24], "v": [0.0] * 3, "input": [0, 0, 0], "row": [3, 5, 7]}
    with pytest.raises(po.UsageError, match="push\\(\\) on input 0, which is closed"):
        live.push(0, pa.record_batch({"t": [50], "v": [0.0]}, schema=schema))


class FakeClock:
    """Processing time the test moves by hand: idle timeouts without sleeping."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_an_idle_input_stops_holding_the_others_back():
    """idle_timeout by an injected clock: an input silent for the timeout is heartbeated to the
    least floor of the inputs still speaking, windows close exactly then, the idle period is
    reported, and the input's rows must respect that promise once it speaks again."""
    schema = pa.schema([("t", pa.int64()), ("v", pa.float64())])
    clock = FakeClock()
    live = po.live_aggregate(schema, 2, time="t", window=po.tumbling(10), aggs={"n": po.count()},
                             idle_timeout=5, clock=clock)
    it = iter(live)

    def push(i, times):
        live.push(i, pa.record_batch({"t": times, "v": [0.0] * len(times)}, schema=schema))

    push(0, [1, 5, 12, 25])
    push(1, [0])
    clock.now = 3.0
    push(0, [26])
    clock.now = 4.9
    live.check_idle()
    assert live.stats()["idle"] == []
    clock.now = 6.0  # input 1 silent since 0: idle from 5; input 0 spoke at 3
    live.check_idle()
    assert live.stats()["idle"] == [{"input": 1, "from_s": 5.0, "to_s": None}]
    # Input 1 now promises 26 (input 0's latest time): [0, 10) and [10, 20) are final.
    rows = []
    while len(rows) < 2:
        rows += next(it).to_pylist()
    assert rows == [{"window_start": 0, "window_end": 10, "n": 3}, {"window_start": 10, "window_end": 20, "n": 1}]
    clock.now = 7.0
    push(1, [26])  # speaks again, in order from its promise
    assert live.stats()["idle"] == [{"input": 1, "from_s": 5.0, "to_s": 7.0}]
    clock.now = 13.0  # silent again (input 0 since 3): both idle, nobody to advance to
    live.check_idle()
    assert [p["input"] for p in live.stats()["idle"] if p["to_s"] is None] == [0, 1]
    clock.now = 14.0
    push(0, [40])  # input 0 speaks: input 1 is promised 40
    with pytest.raises(po.UnsortedInputError, match="input 1 is not sorted by 't': row 2 has 30, earlier than its "
                                                    "heartbeat at 40"):
        push(1, [30])
    live.cancel()


def test_an_idle_input_with_lateness_sends_its_late_rows_to_the_policy():
    schema = pa.schema([("t", pa.int64()), ("v", pa.float64())])
    clock = FakeClock()
    live = po.live_aggregate(schema, 2, time="t", window=po.tumbling(10), aggs={"n": po.count()},
                             lateness=2, late="side", idle_timeout=dt.timedelta(seconds=5), clock=clock)
    got: list[dict] = []
    consumer = threading.Thread(target=lambda: got.extend(r for b in live for r in b.to_pylist()))
    consumer.start()
    live.push(0, pa.record_batch({"t": [1, 12, 31], "v": [0.0] * 3}, schema=schema))
    clock.now = 5.0  # both silent since 0: both idle; input 1, which never spoke, goes to input 0's 29
    live.check_idle()
    assert [p["input"] for p in live.stats()["idle"]] == [0, 1]
    clock.now = 6.0
    live.push(0, pa.record_batch({"t": [33], "v": [0.0]}, schema=schema))  # input 0 speaks: 1 goes to 31
    live.push(1, pa.record_batch({"t": [20, 32], "v": [0.0, 0.0]}, schema=schema))  # 20 < 31: late
    live.close(0)
    live.close(1)
    consumer.join()
    assert got == [{"window_start": 0, "window_end": 10, "n": 1}, {"window_start": 10, "window_end": 20, "n": 1},
                   {"window_start": 30, "window_end": 40, "n": 3}]
    assert live.late.to_pydict() == {"t": [20], "v": [0.0], "input": [1], "row": [0]}
    periods = live.stats()["idle"]
    assert [(p["input"], p["from_s"], p["to_s"]) for p in periods] == [(0, 5.0, 6.0), (1, 5.0, 6.0)]


def test_idle_timeout_with_the_real_clock_runs_by_itself():
    """The default clock: a watcher thread finds the idle input; the consumer gets its windows
    while input 1 never speaks."""
    schema = pa.schema([("t", pa.int64())])
    live = po.live_aggregate(schema, 2, time="t", window=po.tumbling(10), aggs={"n": po.count()}, idle_timeout=0.05)
    it = iter(live)
    live.push(0, pa.record_batch({"t": [1, 2, 15]}, schema=schema))
    assert next(it).to_pylist() == [{"window_start": 0, "window_end": 10, "n": 2}]
    # Input 1 never spoke: idle from one timeout after the start, and still idle. (Whether input 0
    # also went idle first depends on how long the push took to come.)
    periods = [p for p in live.stats()["idle"] if p["input"] == 1]
    assert len(periods) == 1 and periods[0]["from_s"] > 0.049 and periods[0]["to_s"] is None, periods
    live.cancel()
    with pytest.raises(ValueError, match="idle_timeout must be positive"):
        po.live_aggregate(schema, 1, time="t", window=po.tumbling(10), aggs={"n": po.count()}, idle_timeout=0)
