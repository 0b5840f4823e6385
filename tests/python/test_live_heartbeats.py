"""LiveInput heartbeats: a quiet input promises that nothing earlier than t follows, and the merge,
the pipelines (with and without operators below the merge, with lateness) and the pulled aggregate
release the other inputs' rows up to t without waiting for it.

Random scripts of pushes and heartbeats, one call at a time: after each call, the consumer must
receive at least every row the model proves ready (a row is ready once every other open input's
floor, its last time or heartbeat, comes after it in the merged order), while every input is still
open; at the end, the output equals the plain merge of what was pushed. A watchdog turns a hang into
a failure. Also: the errors of misuse (a row below a heartbeat, a heartbeat going back, a
heartbeat after close, a datetime before the time column is known)."""

from __future__ import annotations

import datetime as dt
import threading
import time

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pyarrow_ops as po
from pyarrow_ops import col
from reference import reference_aggregate, reference_merge

SCHEMA = pa.schema([("t", pa.int64()), ("k", pa.int64()), ("v", pa.float64())])
WATCHDOG_S = 20.0
CONSUMERS = ("merge", "pipeline", "pushed-below", "lateness", "keyed-union")


class Reader:
    """Reads a result on a thread of its own; wait_for(n) waits until n rows have come."""

    def __init__(self, result) -> None:
        self.batches: list[pa.RecordBatch] = []
        self.rows = 0
        self.failure: BaseException | None = None
        self._changed = threading.Condition()
        self._thread = threading.Thread(target=self._read, args=(result,), daemon=True)
        self._thread.start()

    def _read(self, result) -> None:
        try:
            for b in result:
                with self._changed:
                    self.batches.append(b)
                    self.rows += b.num_rows
                    self._changed.notify_all()
        except BaseException as e:  # reported by wait_for / join
            self.failure = e
        with self._changed:
            self._changed.notify_all()

    def wait_for(self, rows: int, what: str) -> None:
        with self._changed:
            ok = self._changed.wait_for(lambda: self.rows >= rows or self.failure is not None
                                        or not self._thread.is_alive(), WATCHDOG_S)
        if self.failure is not None:
            raise self.failure
        if not ok or self.rows < rows:
            pytest.fail(f"{what}: {self.rows} rows came, the model proves {rows} ready (waited {WATCHDOG_S} s)")

    def join(self) -> pa.Table:
        self._thread.join(WATCHDOG_S)
        if self._thread.is_alive():
            pytest.fail(f"the consumer did not end within {WATCHDOG_S} s of the last close")
        if self.failure is not None:
            raise self.failure
        return pa.Table.from_batches(self.batches, schema=SCHEMA) if self.batches else SCHEMA.empty_table()


def ready_rows(pushed: list[list[tuple[int, int]]], floor: list[int | None]) -> int:
    """How many rows the merged order releases while every input is open: a row (t, i) is ready
    once every other input j has a floor f_j (its last time or heartbeat) with (t, i) < (f_j, j)."""
    count = 0
    for i, rows in enumerate(pushed):
        for t, _ in rows:
            if all(j == i or (floor[j] is not None and (t, i) < (floor[j], j)) for j in range(len(pushed))):
                count += 1
    return count


def start(consumer: str, lives: list[po.LiveInput], threads: int):
    if consumer == "merge":
        return po.merge(lives, time="t")
    if consumer == "pipeline":  # a keyed operator after the merge: the merge feeds the runtime
        return po.Pipeline(lives, time="t").running("k", {"total": po.sum("v")}).select("t", "k", "v").run(
            threads=threads)
    if consumer == "pushed-below":  # the filter runs per input, a union takes the merge's place
        return po.Pipeline(lives, time="t").filter(col("v") > -1000).run(threads=threads)
    if consumer == "lateness":
        return po.Pipeline(lives, time="t", lateness=0, late="error").filter(col("v") > -1000).run(threads=threads)
    # Each input through a keyed operator of its own, then a union: heartbeats pass the
    # partitioned operators as pulses.
    keyed = [po.Pipeline(live, time="t").running("k", {"n": po.count()}) for live in lives]
    return po.union(*keyed).select("t", "k", "v").run(threads=threads)


@st.composite
def scripts(draw):
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    k = draw(st.integers(2, 4))
    calls = []
    floor = [0] * k
    for _ in range(draw(st.integers(1, 30))):
        i = int(rng.integers(0, k))
        if rng.random() < 0.6:
            n = int(rng.integers(0, 5))
            times = np.sort(floor[i] + rng.integers(0, 10, n)).astype(np.int64)
            calls.append(("push", i, times))
            if n:
                floor[i] = int(times[-1])
        else:
            floor[i] += int(rng.integers(0, 12))
            calls.append(("heartbeat", i, floor[i]))
    return k, calls


def batch_of(times: np.ndarray, i: int, serial: int) -> pa.RecordBatch:
    n = len(times)
    return pa.record_batch([pa.array(times, pa.int64()), pa.array([i] * n, pa.int64()),
                            pa.array(np.arange(serial, serial + n, dtype=np.float64))], schema=SCHEMA)


def play(calls: list[tuple], lives: list[po.LiveInput], reader: Reader, ready, what: str) -> list[pa.Table]:
    """Makes the script's calls one at a time; after each, waits until the consumer has the rows
    ``ready(pushed, floor)`` proves final (pushed: per input, its (time, input) rows; floor: per
    input, its last time or heartbeat). Closes every input at the end; returns what each was given."""
    k = len(lives)
    pushed: list[list[tuple[int, int]]] = [[] for _ in range(k)]
    floor: list[int | None] = [None] * k
    given: list[list[pa.RecordBatch]] = [[] for _ in range(k)]
    serial = 0
    try:
        for step, (kind, i, value) in enumerate(calls):
            if kind == "push":
                b = batch_of(value, i, serial)
                serial += len(value)
                lives[i].push(b)
                given[i].append(b)
                pushed[i].extend((int(t), i) for t in value)
                if len(value):
                    floor[i] = int(value[-1])
            else:
                lives[i].heartbeat(value)
                floor[i] = value if floor[i] is None else max(floor[i], value)
            reader.wait_for(ready(pushed, floor), f"{what}, after call {step} {kind} of input {i}")
    finally:
        for live in lives:
            if not live._closed:
                live.close()
    return [pa.Table.from_batches(b, schema=SCHEMA) for b in given]


@pytest.mark.parametrize("consumer", CONSUMERS)
@settings(max_examples=25, deadline=None)
@given(script=scripts(), threads=st.sampled_from([1, 2]))
def test_heartbeats_release_the_other_inputs_rows_while_every_input_is_open(consumer, script, threads):
    k, calls = script
    lives = [po.LiveInput(SCHEMA, max_batches=1000) for _ in range(k)]
    result = start(consumer, lives, threads)
    reader = Reader(result)
    tables = play(calls, lives, reader, ready_rows, consumer)
    assert reader.join().to_pylist() == reference_merge(tables, "t").to_pylist()


def test_a_heartbeat_lets_the_pulled_aggregate_close_windows_while_an_input_is_quiet():
    a, b = po.LiveInput(SCHEMA), po.LiveInput(SCHEMA)
    result = po.aggregate([a, b], time="t", window=po.tumbling(10), aggs={"n": po.count()})
    reader = Reader(result)
    a.push(batch_of(np.array([1, 2, 13, 25]), 0, 0))
    b.heartbeat(21)  # windows [0, 10) and [10, 20) are complete
    reader.wait_for(2, "aggregate after the heartbeat")
    a.close()
    b.close()
    reader._thread.join(WATCHDOG_S)
    rows = [r for batch in reader.batches for r in batch.to_pylist()]
    expected = reference_aggregate([pa.Table.from_batches([batch_of(np.array([1, 2, 13, 25]), 0, 0)])], time="t",
                                   key=[], size=10, advance=10, offset=0, aggs={"n": ("count", None)})
    assert rows == expected.to_pylist()


def test_a_row_below_a_heartbeat_fails_the_run_naming_the_input_and_the_heartbeat():
    a, b = po.LiveInput(SCHEMA), po.LiveInput(SCHEMA)
    result = po.merge([a, b], time="t")
    b.heartbeat(10)
    b.push(batch_of(np.array([12, 13]), 1, 0))
    b.push(batch_of(np.array([15, 16]), 1, 2))
    b.heartbeat(20)
    b.push(batch_of(np.array([19]), 1, 4))
    a.close()
    b.close()
    with pytest.raises(po.UnsortedInputError, match=r"input 1 .*row 4 has 19, earlier than its heartbeat at 20"):
        result.to_arrow()


def test_heartbeat_misuse_is_refused_and_changes_nothing():
    ts = pa.schema([("t", pa.timestamp("ms")), ("v", pa.int64())])
    unbound = po.LiveInput(ts)
    with pytest.raises(po.UsageError, match="pass the input to a Pipeline first"):
        unbound.heartbeat(dt.datetime(2026, 1, 1))
    a, b = po.LiveInput(ts), po.LiveInput(ts)
    result = po.Pipeline([a, b], time="t").filter(col("v") >= 0).run(threads=2)
    reader = Reader(result)
    a.push(pa.record_batch({"t": [dt.datetime(2026, 1, 1, 0, 0, 1), dt.datetime(2026, 1, 1, 0, 0, 3)],
                            "v": [1, 2]}, schema=ts))
    b.heartbeat(dt.datetime(2026, 1, 1, 0, 0, 2))  # a datetime, converted to the column's ms
    reader.wait_for(1, "the row before the datetime heartbeat")
    with pytest.raises(po.UnsortedInputError, match="earlier than its previous heartbeat"):
        b.heartbeat(dt.datetime(2026, 1, 1, 0, 0, 1))
    with pytest.raises(TypeError, match="heartbeat time"):
        b.heartbeat("soon")
    b.close()
    with pytest.raises(po.UsageError, match=r"heartbeat\(\) on live input 1, which is closed"):
        b.heartbeat(dt.datetime(2026, 1, 1, 0, 0, 9))
    a.close()
    assert reader.join is not None
    reader._thread.join(WATCHDOG_S)
    assert [r["v"] for batch in reader.batches for r in batch.to_pylist()] == [1, 2]


class Clock:
    """Processing time the test moves by hand: idle timeouts without sleeping."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.mark.parametrize("pushed_below", [True, False])
def test_an_idle_live_input_stops_holding_the_others_back(pushed_below):
    """idle_timeout on a pipeline of live inputs, by an injected clock: an input silent for the
    timeout is heartbeated to the least floor of the live inputs still speaking, the rows that frees
    come out while every input is open, and the idle period is reported."""
    clock = Clock()
    a, b = po.LiveInput(SCHEMA), po.LiveInput(SCHEMA)
    p = po.Pipeline([a, b], time="t", idle_timeout=5, clock=clock)
    result = (p.filter(col("v") > -1000) if pushed_below else p.running("k", {"n": po.count()}).select("t", "k", "v")
              ).run(threads=2)
    reader = Reader(result)
    b.push(batch_of(np.array([0]), 1, 0))  # input 1 speaks once, then goes quiet
    clock.now = 4.0
    a.push(batch_of(np.array([1, 5, 12]), 0, 1))
    reader.wait_for(1, "the row before input 0's first")
    result.check_idle()
    assert result.stats()["idle"] == []
    clock.now = 6.0  # input 1 silent since 0: idle from 5, promised 12 (input 0's latest time)
    result.check_idle()
    assert result.stats()["idle"] == [{"input": 1, "from_s": 5.0, "to_s": None}]
    reader.wait_for(4, "the rows the idle heartbeat frees")
    clock.now = 7.0
    b.push(batch_of(np.array([13]), 1, 4))  # speaks again: the period ends
    assert result.stats()["idle"] == [{"input": 1, "from_s": 5.0, "to_s": 7.0}]
    a.close()
    b.close()
    out = reader.join()
    assert out.column("t").to_pylist() == [0, 1, 5, 12, 13]


def test_a_row_below_an_idle_promise_fails_the_run_naming_the_heartbeat():
    clock = Clock()
    a, b = po.LiveInput(SCHEMA), po.LiveInput(SCHEMA)
    result = po.Pipeline([a, b], time="t", idle_timeout=dt.timedelta(seconds=5), clock=clock).run(threads=1)
    a.push(batch_of(np.array([3, 9]), 0, 0))
    clock.now = 5.0  # both silent since 0: input 1 never spoke, so it goes to input 0's floor, 9
    result.check_idle()
    b.push(batch_of(np.array([4]), 1, 2))
    a.close()
    b.close()
    with pytest.raises(po.UnsortedInputError, match=r"input 1 .*row 0 has 4, earlier than its heartbeat at 9"):
        result.to_arrow()


def test_the_real_clock_frees_a_quiet_live_input_by_itself():
    a, b = po.LiveInput(SCHEMA), po.LiveInput(SCHEMA)
    result = po.Pipeline([a, b], time="t", idle_timeout=0.05).run(threads=2)
    reader = Reader(result)
    a.push(batch_of(np.array([1, 2, 3]), 0, 0))  # input 1 never speaks: its watcher frees input 0's rows
    reader.wait_for(3, "input 0's rows once input 1 is idle")
    # Input 1 is idle from the timeout on (input 0 may be idle too by now): an open period. Its
    # start is the run's start + 0.05 s less the run's start, in floats: 0.05 within rounding.
    quiet = [p for p in result.stats()["idle"] if p["input"] == 1]
    assert len(quiet) == 1 and quiet[0]["from_s"] >= 0.05 - 1e-9 and quiet[0]["to_s"] is None
    a.close()
    b.close()
    assert reader.join().column("t").to_pylist() == [1, 2, 3]


WINDOWED = {
    "tumbling": lambda p: p.window_aggregate(po.tumbling(10), {"n": po.count(), "s": po.sum("v")}),
    "sliding-by-window": lambda p: p.window_aggregate(po.sliding(20, 5), {"n": po.count()}, "k", by_window=True),
    "sessions": lambda p: p.window_aggregate(po.session(6), {"n": po.count(), "last": po.last("v")}, "k"),
    # A partitioned operator before the windows passes heartbeats on.
    "keyed-then-tumbling": lambda p: p.sessionize("k", gap=3).window_aggregate(po.tumbling(10), {"n": po.count()}),
}


def windows_ready(consumer: str, pushed: list[list[tuple[int, int]]], floor: list[int | None]) -> int:
    """Rows a windowed pipeline has proved final once every input's floor is known: F, the least
    floor, is what the merged stream promises; a window closes when F reaches its end, a session
    when F passes it."""
    if any(f is None for f in floor):
        return 0
    f = min(floor)  # type: ignore[type-var]
    rows = [r for rows in pushed for r in rows]
    if consumer in ("tumbling", "keyed-then-tumbling"):
        return len({t // 10 for t, _ in rows if (t // 10 + 1) * 10 <= f})
    if consumer == "sliding-by-window":
        return len({(s, k) for t, k in rows for s in range(t - t % 5 - 15, t + 1, 5) if s + 20 <= f})
    ends: dict[int, list[int]] = {}  # per key, each session's last time, by the gap rule
    for t, k in sorted(rows):
        last = ends.setdefault(k, [])
        if last and t <= last[-1] + 6:
            last[-1] = t
        else:
            last.append(t)
    return sum(1 for lasts in ends.values() for last in lasts if last + 6 < f)


@pytest.mark.parametrize("consumer", list(WINDOWED))
@settings(max_examples=20, deadline=None)
@given(script=scripts(), threads=st.sampled_from([1, 2]), one=st.booleans())
def test_heartbeats_close_a_pipelines_windows_and_sessions_while_inputs_are_open(consumer, script, threads, one):
    """A heartbeat (or a later row) on every input closes the windows and sessions the merged
    stream's promise proves final, while the inputs stay open; the output is exactly the run's
    over the same rows without any heartbeat."""
    k, calls = script
    if one:  # a single live input: the pipeline's source is that input alone
        k, calls = 1, [(kind, 0, value) for kind, _, value in calls]
        fl = 0
        fixed = []
        for kind, _, value in calls:  # one input's times and heartbeats never go back
            if kind == "push":
                value = np.sort(np.maximum(value, fl))
                fl = int(value[-1]) if len(value) else fl
            else:
                value = max(value, fl)
                fl = value
            fixed.append((kind, 0, value))
        calls = fixed
    lives = [po.LiveInput(SCHEMA, max_batches=1000) for _ in range(k)]
    result = WINDOWED[consumer](po.Pipeline(lives, time="t")).run(threads=threads)
    reader = Reader(result)
    tables = play(calls, lives, reader, lambda pushed, floor: windows_ready(consumer, pushed, floor), consumer)
    reader._thread.join(WATCHDOG_S)
    assert reader.failure is None
    out = pa.Table.from_batches(reader.batches, schema=result.schema) if reader.batches else None
    whole = WINDOWED[consumer](po.Pipeline(tables, time="t"))
    expected = whole.run(threads=1).to_arrow()
    assert (out.to_pylist() if out is not None else []) == expected.to_pylist()


def test_a_row_that_moves_no_watermark_does_not_hold_the_other_inputs_back():
    """With lateness=, a pushed row inside the bound and behind the latest releases nothing and
    moves nothing: its input must not look ready, or the engine waits on its producer while the
    other input's progress, which frees rows, sits unread. The sleeps only order the events as the
    fault needed them (the engine takes the first pushes, then polls input 0 holding that row)."""
    a, b = po.LiveInput(SCHEMA), po.LiveInput(SCHEMA)
    result = po.Pipeline([a, b], time="t", lateness=5).filter(col("v") > -1000).run(threads=2)
    reader = Reader(result)
    b.heartbeat(0)
    a.push(batch_of(np.array([5, 12]), 0, 0))  # watermark 7: row 5 leaves the buffer, 12 is held
    time.sleep(0.3)  # the engine sends row 5 on, then waits on input 1, the least floor (0)
    a.push(batch_of(np.array([9]), 0, 2))      # inside the bound, behind 12: nothing moves
    b.heartbeat(3)   # the engine turns back to input 0, which must not look ready
    time.sleep(0.3)
    b.push(batch_of(np.array([20]), 1, 3))     # watermark 15: input 0's row 5 is ready
    reader.wait_for(1, "input 0's row 5 once input 1's watermark passed it")
    a.close()
    b.close()
    assert reader.join().column("t").to_pylist() == [5, 9, 12, 20]
