"""aggregate() and live_aggregate(): every design equals the plain reference, exactly, on random
inputs; bad input gives clear errors with nothing emitted past the fault."""

import math
import threading
import time

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pyarrow_ops as po
from reference import random_column, reference_aggregate, sorted_times, split

VALUE_TYPES = [pa.int8(), pa.int64(), pa.uint32(), pa.uint64(), pa.float32(), pa.float64(), pa.bool_(),
               pa.string(), pa.timestamp("us"), pa.date32()]
KEY_TYPES = [pa.int64(), pa.uint16(), pa.string(), pa.float64(), pa.bool_(), pa.large_string(), pa.int8()]
TIME_TYPES = [pa.int64(), pa.int32(), pa.timestamp("ms", tz="UTC"), pa.timestamp("ns"), pa.date32()]
FUNCTIONS = ["count", "sum", "mean", "min", "max", "first", "last"]


def applies(function, type_):
    if function in ("sum", "mean"):
        return pa.types.is_integer(type_) or pa.types.is_floating(type_)
    if function in ("min", "max"):
        return not (pa.types.is_string(type_) or pa.types.is_large_string(type_))
    return True


# Floats that exact sums must get right: far apart in magnitude (a sum then outgrows 128 bits),
# subnormal, at the edge of the range (an exact sum past it is infinite), and NaN and infinities.
EXTREMES = [1e300, -1e300, 1e-300, 5e-324, -5e-324, 1.7976931348623157e308, -0.0, 1.0, 2.0**-53, 1e16,
            float("nan"), float("inf"), float("-inf")]


def with_extremes(column, rng):
    """``column`` (floats) with about a quarter of its values drawn from EXTREMES."""
    values = column.to_pylist()
    for i in range(len(values)):
        if values[i] is not None and rng.random() < 0.25:
            values[i] = EXTREMES[int(rng.integers(0, len(EXTREMES)))]
    return pa.array(values, column.type)


def make_agg(function, column):
    return getattr(po, function)(column) if column is not None else po.count()


@st.composite
def queries(draw):
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    k = draw(st.integers(1, 25))
    time_type = draw(st.sampled_from(TIME_TYPES))
    key_types = draw(st.lists(st.sampled_from(KEY_TYPES), max_size=2))
    value_types = draw(st.lists(st.sampled_from(VALUE_TYPES), min_size=1, max_size=3))
    key_null = draw(st.sampled_from([0.0, 0.2]))
    distinct_keys = draw(st.integers(1, 6))
    extremes = draw(st.integers(0, 3)) == 0
    tables = []
    for _ in range(k):
        n = int(rng.integers(0, 40)) if draw(st.booleans()) else int(rng.integers(0, 4))
        cols = {"t": sorted_times(time_type, n, rng, spread=int(rng.integers(0, 4)))}
        for j, kt in enumerate(key_types):
            pool = random_column(kt, distinct_keys, rng, null_rate=0.0)
            idx = rng.integers(0, distinct_keys, n)
            values = pool.take(pa.array(idx)) if n else pool.slice(0, 0)
            mask = rng.random(n) < key_null
            cols[f"k{j}"] = pa.array([None if m else v for v, m in zip(values.to_pylist(), mask)], kt)
        for j, vt in enumerate(value_types):
            cols[f"v{j}"] = random_column(vt, n, rng, null_rate=0.3)
            if pa.types.is_floating(vt) and extremes:
                cols[f"v{j}"] = with_extremes(cols[f"v{j}"], rng)
        tables.append(pa.table(cols))
    aggs = {"n": ("count", None)}
    for j, vt in enumerate(value_types):
        for f in FUNCTIONS:
            if applies(f, vt) and draw(st.booleans()):
                aggs[f"{f}_{j}"] = (f, f"v{j}")
    size = draw(st.integers(1, 12))
    advance = draw(st.integers(1, 14))
    offset = draw(st.integers(-5, 5))
    max_rows = draw(st.integers(1, 8))
    return seed, tables, [f"k{j}" for j in range(len(key_types))], size, advance, offset, aggs, max_rows


def run(tables, keys, size, advance, offset, aggs, design, max_rows, rng, threads=None, batch_size=7):
    inputs = [split(t, rng, max_rows) or [pa.RecordBatch.from_pylist([], t.schema)] for t in tables]
    inputs = [pa.Table.from_batches(batches, t.schema) for batches, t in zip(inputs, tables)]
    return po.aggregate(
        [pa.RecordBatchReader.from_batches(t.schema, t.to_batches(max_chunksize=max_rows)) for t in inputs],
        time="t", key=keys or None, window=po.sliding(size, advance, offset),
        aggs={name: make_agg(f, c) for name, (f, c) in aggs.items()},
        design=design, threads=threads, update_threads=threads, batch_size=batch_size,
    ).to_arrow()


def plain(column):
    """Python values; temporal columns as their stored integers (ns timestamps do not fit datetime)."""
    if pa.types.is_timestamp(column.type):
        column = column.cast(pa.int64())
    elif pa.types.is_date32(column.type):
        column = column.cast(pa.int32())
    return column.to_pylist()


def assert_same(got, want):
    assert [(f.name, f.type) for f in got.schema] == [(f.name, f.type) for f in want.schema]
    # NaN compares unequal to itself: compare per column with NaN-aware equality.
    for name in want.column_names:
        g, w = plain(got[name]), plain(want[name])
        assert len(g) == len(w), name
        for a, b in zip(g, w):
            assert a == b or (a != a and b != b), (name, a, b)


@given(queries(), st.sampled_from(po.DESIGNS), st.integers(1, 3))
def test_every_design_equals_the_reference(query, design, threads):
    seed, tables, keys, size, advance, offset, aggs, max_rows = query
    want = reference_aggregate(tables, time="t", key=keys, size=size, advance=advance, offset=offset, aggs=aggs)
    got = run(tables, keys, size, advance, offset, aggs, design, max_rows, np.random.default_rng(seed), threads)
    assert_same(got, want)


@settings(max_examples=20)
@given(st.integers(0, 2**32 - 1))
def test_designs_agree_with_each_other_on_many_inputs_and_ties(seed):
    rng = np.random.default_rng(seed)
    tables = [pa.table({"t": pa.array(np.sort(rng.integers(0, 50, 300))), "k": rng.integers(0, 5, 300),
                        "v": rng.standard_normal(300), "w": [f"w{x}" for x in rng.integers(0, 1000, 300)]})
              for _ in range(20)]
    # WiML's producers apply 20 inputs unmerged, full of ties: first and last hold only by comparing
    # each tuple's place in the merged order (time, input, position), and float sums and means only
    # by being exact (any order of additions gives the same bits).
    aggs = {"n": ("count", None), "s": ("sum", "v"), "m": ("mean", "v"), "lo": ("min", "v"), "hi": ("max", "v"),
            "f": ("first", "v"), "l": ("last", "v"), "fw": ("first", "w"), "lw": ("last", "w")}
    want = reference_aggregate(tables, time="t", key=["k"], size=10, advance=3, offset=0, aggs=aggs)
    for threads in (2, 3):
        results = [run(tables, ["k"], 10, 3, 0, aggs, d, 17, np.random.default_rng(seed), threads=threads)
                   for d in po.DESIGNS]
        for r in results:
            assert_same(r, want)


def test_float_sums_are_exact_whatever_the_design():
    # Added one at a time, 0.1 + 0.2 + 0.3 is 0.6000000000000001 and 1e300 + 1.0 - 1e300 is 0.0; the
    # exact sums round to 0.6 and 1.0 (docs/semantics.md), in every design and slice shape.
    t = pa.table({"t": [0, 1, 2, 3, 4, 5], "k": [1, 1, 1, 2, 2, 2], "v": [0.1, 0.2, 0.3, 1e300, 1.0, -1e300]})
    for design in po.DESIGNS:
        out = po.aggregate([t.slice(0, 4), t.slice(4)], time="t", key="k", window=po.sliding(6, 3, -3),
                           aggs={"s": po.sum("v"), "m": po.mean("v")}, design=design, threads=2).to_arrow().to_pydict()
        assert out["s"] == [0.6, 0.6, 1.0, 1.0], design
        assert out["m"] == [0.6 / 3, 0.6 / 3, 1.0 / 3, 1.0 / 3], design  # the rounded sum over the count
    # A slice whose sum outgrows 128 bits (1e300 and 1e-300 in [6, 8)), combined with the next slice's
    # -1e300 into window [6, 10): in order, that window's sum would be 0.0.
    t = pa.table({"t": [6, 7, 8, 9], "k": [3, 3, 3, 4], "v": [1e300, 1e-300, -1e300, 5e-324]})
    for design in po.DESIGNS:
        out = po.aggregate([t.slice(0, 2), t.slice(2)], time="t", key="k", window=po.sliding(4, 2),
                           aggs={"s": po.sum("v")}, design=design, threads=2).to_arrow().to_pydict()
        assert out["s"] == [1e300, 1e-300, 5e-324, -1e300, 5e-324], design


def test_nan_and_infinities_survive_combining_slices():
    # A window whose slices hold finite sums and NaN or infinities: combining them must carry the
    # special values over (the fold of two ordinary sums takes an inline path in the engine). Per
    # key k, slice [0, 2) holds 1.0 and slice [2, 4) the special value, so every window [0, 4) and
    # [2, 6) sees it; key 3 holds both infinities: NaN.
    specials = [float("nan"), float("inf"), float("-inf")]
    t = pa.table({"t": [0, 0, 0, 0, 2, 2, 2, 2, 2], "k": [0, 1, 2, 3, 0, 1, 2, 3, 3],
                  "v": [1.0, 1.0, 1.0, 1.0, *specials, float("inf"), float("-inf")]})
    for design in po.DESIGNS:
        out = po.aggregate(t, time="t", key="k", window=po.sliding(4, 2), aggs={"s": po.sum("v"), "m": po.mean("v")},
                           design=design).to_arrow().to_pydict()
        # Windows [-2, 2) (1.0 only), [0, 4) and [2, 6) (the special value), keys 0..3 in each.
        special = [math.nan, math.inf, -math.inf, math.nan]
        want = [(start, k, 1.0 if start == -2 else special[k]) for start in (-2, 0, 2) for k in range(4)]
        got = list(zip(out["window_start"], out["k"], out["s"], out["m"]))
        assert len(got) == len(want), design
        for (start, k, s, m), (w_start, w_k, w) in zip(got, want):
            assert (start, k) == (w_start, w_k), design
            for v in (s, m):
                assert v == w or (math.isnan(v) and math.isnan(w)), (design, start, k, s, m)


@pytest.mark.parametrize("size,advance", [(20, 1), (12, 3), (10, 4)])
def test_sliced_windows_switch_between_combining_by_blocks_and_directly(size, advance):
    # The W-Hive folds windows from per-block prefixes and suffixes while keys are dense (many
    # tuples per key and slice) and folds slices directly while they are sparse, choosing per block
    # (engine/window/whive.h). Phases: dense, sparse (a new key per tuple), a gap that skips
    # windows, dense again with ties; every switch must leave each window's states exact.
    rng = np.random.default_rng(size * 100 + advance)
    dense = np.sort(rng.integers(0, 400, 6000))
    sparse = np.sort(rng.integers(400, 800, 800))
    again = np.sort(rng.integers(2000, 2300, 4000))
    t = np.concatenate([dense, sparse, again])
    k = np.concatenate([rng.integers(0, 4, 6000), 10 + np.arange(800), rng.integers(0, 3, 4000)])
    table = pa.table({"t": t, "k": k, "v": rng.standard_normal(len(t)), "i": rng.integers(-50, 50, len(t))})
    tables = [table.filter(pa.array(rng.integers(0, 3, len(t)) == j)) for j in range(3)]
    aggs = {"n": ("count", None), "s": ("sum", "v"), "m": ("mean", "i"), "lo": ("min", "v"), "hi": ("max", "i"),
            "f": ("first", "v"), "l": ("last", "i")}
    want = reference_aggregate(tables, time="t", key=["k"], size=size, advance=advance, offset=0, aggs=aggs)
    for design in ("sliced", "tumlmc", "wiml"):
        for threads in (1, 2):
            got = run(tables, ["k"], size, advance, 0, aggs, design, 500, np.random.default_rng(1), threads=threads,
                      batch_size=1000)
            assert_same(got, want)


@pytest.mark.parametrize("spread", ["dense", "dense_with_null", "sparse", "negative"])
def test_windows_of_many_keys_sort_and_merge_exactly(spread):
    # A window set's keys leave in key order through one of three sorts (engine/window/keys.cpp):
    # at most 64 keys compared, values dense in their range by a bit per value, others by radix.
    # Hundreds of keys per window take the last two; slices folded into windows take the
    # per-function merge loops (integer sum, mean, min, max; first and last of any type).
    rng = np.random.default_rng(len(spread))
    n = 6000
    t = np.sort(rng.integers(0, 600, n))
    ids = rng.integers(0, 400, n)
    if spread == "sparse":
        ids = ids * 1_000_003 + rng.integers(0, 2, n) * (1 << 40)
    elif spread == "negative":
        ids = ids - 200
    keys = pa.array(ids, pa.int64())
    if spread == "dense_with_null":
        keys = pa.array([None if i % 97 == 0 else int(i) for i in ids], pa.int64())
    table = pa.table({"t": t, "k": keys, "i": rng.integers(-50, 50, n), "u": pa.array(rng.integers(0, 9, n), pa.uint8()),
                      "v": rng.standard_normal(n)})
    tables = [table.filter(pa.array(rng.integers(0, 3, n) == j)) for j in range(3)]
    aggs = {"n": ("count", None), "s": ("sum", "i"), "m": ("mean", "u"), "lo": ("min", "i"), "hi": ("max", "u"),
            "f": ("first", "v"), "l": ("last", "i"), "fu": ("first", "u")}
    want = reference_aggregate(tables, time="t", key=["k"], size=40, advance=5, offset=0, aggs=aggs)
    for design in ("tumlsc", "sliced", "wiml"):
        got = run(tables, ["k"], 40, 5, 0, aggs, design, 300, np.random.default_rng(2), threads=2, batch_size=500)
        assert_same(got, want)


def test_smart_meter_query_k_os_matches_reference():
    from pyarrow_ops.datasets import smart_meter_readings

    tables = smart_meter_readings(rows=20_000, meters=243, concentrators=4, period_ms=30_000, seed=3)
    aggs = {"first": ("first", "kwh"), "n": ("count", None)}
    want = reference_aggregate(tables, time="time", key=["meter"], size=30_000, advance=3_000, offset=0, aggs=aggs)
    for design in po.DESIGNS:
        got = po.aggregate(tables, time="time", key="meter", window=po.sliding(30_000, 3_000),
                           aggs={"first": po.first("kwh"), "n": po.count()}, design=design).to_arrow()
        assert_same(got, want)


def test_timedelta_windows_on_timestamps():
    import datetime as dt

    t = pa.table({"ts": pa.array([0, 1500, 3100], pa.int64()).cast(pa.timestamp("ms")), "v": [1, 2, 3]})
    out = po.aggregate(t, time="ts", window=po.tumbling(dt.timedelta(seconds=2)), aggs={"s": po.sum("v")})
    assert out.to_arrow()["s"].to_pylist() == [3, 3]
    with pytest.raises(ValueError, match="whole number"):
        po.aggregate(t, time="ts", window=po.tumbling(dt.timedelta(microseconds=5)), aggs={"s": po.sum("v")})


def test_result_to_polars_without_copy():
    t = pa.table({"t": [0, 1, 2, 3], "v": [1.0, 2.0, 3.0, 4.0]})
    df = po.aggregate(t, time="t", window=po.tumbling(2), aggs={"m": po.mean("v")}).to_polars()
    assert df["m"].to_list() == [1.5, 3.5]


# ---- bad input ----

def test_unsorted_input_names_input_row_and_values_and_emits_nothing_past_it():
    good = pa.table({"t": list(range(100)), "v": [1] * 100})
    bad = pa.table({"t": list(range(50)) + [10] + list(range(51, 100)), "v": [1] * 100})
    for design in po.DESIGNS:
        rows = []
        with pytest.raises(po.UnsortedInputError, match=r"input 1 is not sorted by 't': row 50 has 10, earlier than 49 at row 49"):
            for batch in po.aggregate([good, bad.to_batches(max_chunksize=10)], time="t", window=po.tumbling(5),
                                      aggs={"n": po.count()}, design=design, batch_size=1):
                rows.extend(batch.to_pylist())
        # Windows emitted before the fault are complete and correct: none reaches past row 49.
        assert all(r["window_end"] <= 50 and r["n"] == 10 for r in rows)


def test_time_column_missing_in_one_input():
    a = pa.table({"t": [1], "v": [1]})
    b = pa.table({"ts": [1], "v": [1]})
    with pytest.raises(po.SchemaMismatchError, match="input 1"):
        po.aggregate([a, b], time="t", window=po.tumbling(5), aggs={"n": po.count()})


def test_mismatched_key_types():
    a = pa.table({"t": [1], "k": pa.array([1], pa.int32())})
    b = pa.table({"t": [1], "k": pa.array(["x"])})
    with pytest.raises(po.SchemaMismatchError, match="input 1 does not match input 0: column 'k'"):
        po.aggregate([a, b], time="t", key="k", window=po.tumbling(5), aggs={"n": po.count()})


def test_null_time():
    a = pa.table({"t": pa.array([1, None, 3], pa.int64())})
    with pytest.raises(po.NullTimeError, match="input 0 has a null time in column 't' at row 1"):
        po.aggregate(a, time="t", window=po.tumbling(5), aggs={"n": po.count()}).to_arrow()


def test_unsupported_aggregate_and_unknown_columns():
    a = pa.table({"t": [1], "s": ["x"]})
    with pytest.raises(po.UnsupportedTypeError, match=r"sum\('s'\)"):
        po.aggregate(a, time="t", window=po.tumbling(5), aggs={"x": po.sum("s")})
    with pytest.raises(po.InvalidInputError, match="key column 'nope' not found"):
        po.aggregate(a, time="t", key="nope", window=po.tumbling(5), aggs={"n": po.count()})
    with pytest.raises(ValueError, match="design"):
        po.aggregate(a, time="t", window=po.tumbling(5), aggs={"n": po.count()}, design="nope")


@pytest.mark.parametrize("design", po.DESIGNS)
def test_stats_of_every_design(design):
    # WiML has no T-Gate: its stats() once dereferenced the missing one and crashed the interpreter.
    tables = [pa.table({"t": [1, 5, 12], "k": [1, 2, 1]}), pa.table({"t": [2, 11, 13], "k": [2, 2, 1]})]
    result = po.aggregate(tables, time="t", key="k", window=po.tumbling(10), aggs={"n": po.count()}, design=design)
    assert result.to_arrow().column("n").to_pylist() == [1, 2, 2, 1]
    stats = result.stats()
    assert stats["tuples"] == 6 and stats["window_sets"] == 2
    has_gate = stats["design"] in ("tumlsc", "sliced", "tumlmc")
    assert (stats["peak_live_arenas"] is not None) == has_gate


# ---- push form ----

def read_while_feeding(live, feeders, schema):
    """Runs each feeder on its own thread while this thread reads the live result, as a consumer would."""
    threads = [threading.Thread(target=f) for f in feeders]
    for t in threads:
        t.start()
    got = pa.Table.from_batches(list(live), schema)
    for t in threads:
        t.join()
    return got


def test_live_aggregate_from_threads_equals_batch_result():
    rng = np.random.default_rng(5)
    tables = [pa.table({"t": np.sort(rng.integers(0, 1000, 2000)), "k": rng.integers(0, 7, 2000),
                        "v": rng.standard_normal(2000)}) for _ in range(4)]
    aggs = {"n": po.count(), "f": po.first("v"), "m": po.max("v")}
    want = po.aggregate(tables, time="t", key="k", window=po.sliding(30, 3), aggs=aggs).to_arrow()
    live = po.live_aggregate(tables[0].schema, inputs=4, time="t", key="k", window=po.sliding(30, 3), aggs=aggs)

    def feed(i):
        for b in tables[i].to_batches(max_chunksize=97):
            live.push(i, b)
            live.heartbeat(i, int(b["t"][-1].as_py()))
        live.close(i)

    got = read_while_feeding(live, [lambda i=i: feed(i) for i in range(4)], want.schema)
    assert got.equals(want)
    stats = live.stats()
    assert stats["tuples"] == 8000 and len(stats["latencies_ns"]) == stats["window_sets"] > 0


@settings(max_examples=40)
@given(queries(), st.sampled_from(po.DESIGNS))
def test_live_from_one_thread_that_pushes_every_input_then_reads(query, design):
    # One thread pushes the inputs' batches in a random interleaving (each input in order), with
    # heartbeats, closes them, and only then reads. A push must never wait for the reader here:
    # the T-Gate and the queues buffer up to 16 batches an input, and WiML holds what the W-Hive
    # cannot take yet (before, a WiML push waited for the reader from the first batch: a hang).
    seed, tables, keys, size, advance, offset, aggs, max_rows = query
    want = reference_aggregate(tables, time="t", key=keys, size=size, advance=advance, offset=offset, aggs=aggs)
    rng = np.random.default_rng(seed)
    live = po.live_aggregate(tables[0].schema, inputs=len(tables), time="t", key=keys or None,
                             window=po.sliding(size, advance, offset),
                             aggs={name: make_agg(f, c) for name, (f, c) in aggs.items()}, design=design)
    pending = [list(t.to_batches(max_chunksize=max(max_rows, 3))) for t in tables]
    while any(pending):
        i = int(rng.choice([j for j, b in enumerate(pending) if b]))
        batch = pending[i].pop(0)
        live.push(i, batch)
        if rng.random() < 0.3 and batch.num_rows:
            live.heartbeat(i, plain(batch.column("t"))[-1])
    for i in range(len(tables)):
        live.close(i)
    got = list(live)
    assert_same(pa.Table.from_batches(got) if got else want.slice(0, 0), want)


def test_live_wiml_push_waiting_on_a_busy_slice_counts_its_rows_once_and_keeps_first_and_last():
    # Input 0 runs 200 slices ahead of input 1, so its push finds a slice's slot still held by an
    # older slice and waits there until input 1 lets the output thread emit. The rows applied
    # before such a wait were once counted twice in stats()["tuples"]. The inputs tie on every
    # time, so first and last also check the positions counted across the waits.
    n = 400
    a = pa.table({"t": np.arange(n, dtype=np.int64), "k": np.arange(n) % 3, "v": np.arange(n, dtype=np.int64)})
    b = a.set_column(2, "v", pa.array(-np.arange(n, dtype=np.int64)))
    aggs = {"n": po.count(), "f": po.first("v"), "l": po.last("v")}
    want = po.aggregate([a, b], time="t", key="k", window=po.tumbling(2), aggs=aggs, design="sliced").to_arrow()
    live = po.live_aggregate(a.schema, inputs=2, time="t", key="k", window=po.tumbling(2), aggs=aggs,
                             design="wiml")

    def ahead():
        live.push(0, a.to_batches()[0])
        live.close(0)

    def behind():
        time.sleep(0.2)
        for batch in b.to_batches(max_chunksize=10):
            live.push(1, batch)
        live.close(1)

    got = read_while_feeding(live, [ahead, behind], want.schema)
    assert got.equals(want)
    assert live.stats()["tuples"] == 2 * n


def test_latency_counts_from_the_input_that_completes_the_window_set():
    # Input 0's tuple at 12 waits for input 1; the window set [0, 10) is complete only when input 1
    # gets past 10, so its latency is measured from that push, not from input 0's.
    schema = pa.schema([("t", pa.int64())])
    live = po.live_aggregate(schema, inputs=2, time="t", window=po.tumbling(10), aggs={"n": po.count()})
    live.push(0, pa.record_batch({"t": [1, 12]}, schema=schema))
    time.sleep(0.05)
    before = time.monotonic_ns()
    live.push(1, pa.record_batch({"t": [15]}, schema=schema))
    it = iter(live)
    assert next(it).to_pylist() == [{"window_start": 0, "window_end": 10, "n": 1}]
    after = time.monotonic_ns()
    (latency,) = live.stats()["latencies_ns"]
    assert 0 <= latency <= after - before  # both clocks are CLOCK_MONOTONIC durations
    live.close(0)
    live.close(1)
    assert [r["n"] for b in it for r in b.to_pylist()] == [2]
    stats = live.stats()
    assert len(stats["latencies_ns"]) == stats["window_sets"] == 2


def test_live_heartbeats_release_windows_and_must_not_go_back():
    schema = pa.schema([("t", pa.int64())])
    live = po.live_aggregate(schema, inputs=2, time="t", window=po.tumbling(10), aggs={"n": po.count()})
    live.push(0, pa.record_batch({"t": [1, 2]}, schema=schema))
    live.heartbeat(0, 10)
    live.heartbeat(1, 10)  # input 1 idle: its heartbeat completes window [0, 10)
    it = iter(live)
    assert next(it).to_pylist() == [{"window_start": 0, "window_end": 10, "n": 2}]
    with pytest.raises(po.UnsortedInputError, match="heartbeat"):
        live.heartbeat(1, 5)
    with pytest.raises(po.UnsortedInputError):
        next(it)


@pytest.mark.parametrize("offset", [0, 1, -(2**62) - 7, 2**63 - 5])
def test_times_at_the_ends_of_the_int64_range(offset):
    # A time is refused, naming the input, row and value, when a window holding it could start or
    # end outside int64 (within size + advance of either end). Just inside, every design and the
    # pipeline operator equal the reference whatever the offset: window and slice numbers stay
    # inside int64 and off the W-Hive's INT64_MIN sentinel (before, tuples there were dropped, and
    # the sliced designs could hang).
    lo, hi = -(2**63), 2**63 - 1
    size, advance = 5, 3
    aggs = {"n": ("count", None), "f": ("first", "v"), "s": ("sum", "v")}
    for base, rel in [(lo + size + advance, [0, 0, 1, 4, 9]), (hi - size - advance, [-9, -4, -1, 0, 0])]:
        t = pa.table({"t": pa.array([base + r for r in rel], pa.int64()), "k": [1, 2, 1, 1, 2],
                      "v": [1.0, 2.0, 3.0, 4.0, 5.0]})
        inputs = [t.slice(0, 2), t.slice(2)]
        want = reference_aggregate(inputs, time="t", key=["k"], size=size, advance=advance, offset=offset, aggs=aggs)
        assert want.num_rows > 0
        window = po.sliding(size, advance, offset)
        named = {"n": po.count(), "f": po.first("v"), "s": po.sum("v")}
        for design in po.DESIGNS:
            got = po.aggregate(inputs, time="t", key="k", window=window, aggs=named, design=design, threads=2)
            assert_same(got.to_arrow(), want)
        piped = po.Pipeline(inputs, time="t").window_aggregate(window, named, key="k").run(threads=2).to_arrow()
        order = [("window_start", "ascending"), ("k", "ascending")]
        assert piped.sort_by(order).to_pylist() == want.sort_by(order).to_pylist()
    for bad, row in [(lo + size + advance - 1, 0), (hi - size - advance + 1, 1)]:
        t = pa.table({"t": pa.array([0, bad] if bad > 0 else [bad, 0], pa.int64()), "k": [1, 1], "v": [1.0, 2.0]})
        message = f"input 1 has {bad} in 't' at row {row}, outside the times whose windows"
        for design in po.DESIGNS:
            with pytest.raises(po.InvalidInputError, match=message):
                po.aggregate([t.slice(0, 0), t], time="t", key="k", window=po.sliding(size, advance, offset),
                             aggs={"n": po.count()}, design=design).to_arrow()
        with pytest.raises(po.InvalidInputError, match=f"has {bad}, outside the times whose windows"):
            po.Pipeline(t, time="t").window_aggregate(po.sliding(size, advance, offset), {"n": po.count()},
                                                      key="k").run(threads=2).to_arrow()
