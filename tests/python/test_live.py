"""The live forms, live_aggregate and LiveInput, driven by random scripts of push, heartbeat and
close calls, misuse included (any call on an input already closed), against a plain reference
model: every misuse raises UsageError naming the input and changes nothing, and the result equals
the reference on what was accepted, in every design. A watchdog fails a run that hangs instead of
letting the suite hang. Also: results reach a live consumer while every input is still open."""

from __future__ import annotations

import os
import queue
import threading
import time
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pyarrow_ops as po
from pyarrow_ops import col
from reference import reference_aggregate, reference_merge

SCHEMA = pa.schema([("t", pa.int64()), ("k", pa.int64()), ("v", pa.float64())])
AGGS = {"n": po.count(), "s": po.sum("v"), "first": po.first("v"), "last": po.last("v"), "hi": po.max("v")}
REFERENCE_AGGS = {"n": ("count", None), "s": ("sum", "v"), "first": ("first", "v"), "last": ("last", "v"),
                  "hi": ("max", "v")}
SIZE, ADVANCE = 20, 5
WATCHDOG_S = 60.0


@dataclass
class Script:
    inputs: int
    calls: list[tuple]  # ("push", i, batch) | ("heartbeat", i, t) | ("close", i)
    accepted: list[list[pa.RecordBatch]] = field(default_factory=list)  # per input, what the model accepts
    refused: int = 0  # calls the model expects refused


@st.composite
def scripts(draw) -> Script:
    """Calls in an order a single thread makes them; each input's times and heartbeats never go
    back, so the only faults are calls on a closed input (and a second close)."""
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    k = draw(st.integers(1, 4))
    floor = [0] * k  # the least time each input may still send
    closed = [False] * k
    script = Script(k, [], [[] for _ in range(k)])
    for _ in range(draw(st.integers(0, 40))):
        i = int(rng.integers(0, k))
        kinds = ["push", "push", "push", "close", "heartbeat"]
        kind = kinds[int(rng.integers(0, len(kinds)))]
        if kind == "push":
            n = int(rng.integers(0, 6))
            times = np.sort(floor[i] + rng.integers(0, 12, n)).astype(np.int64)
            batch = pa.record_batch([pa.array(times), pa.array(rng.integers(0, 3, n)),
                                     pa.array(rng.integers(-50, 50, n).astype(np.float64))], schema=SCHEMA)
            script.calls.append(("push", i, batch))
            if closed[i]:
                script.refused += 1
            else:
                script.accepted[i].append(batch)
                if n:
                    floor[i] = int(times[-1])
        elif kind == "heartbeat":
            t = floor[i] + int(rng.integers(0, 10))
            script.calls.append(("heartbeat", i, t))
            if closed[i]:
                script.refused += 1
            else:
                floor[i] = t
        else:
            script.calls.append(("close", i))
            script.refused += closed[i]
            closed[i] = True
    for i in range(k):  # the end: every input still open is closed, as a well-behaved producer does
        if not closed[i]:
            script.calls.append(("close", i))
    return script


def run_with_watchdog(read, act, cancel) -> tuple[list[pa.RecordBatch], list[str]]:
    """Reads on a consumer thread while this thread makes the calls; fails the test if either
    has not finished within WATCHDOG_S (and cancels the run so that nothing is left behind)."""
    batches: list[pa.RecordBatch] = []
    failure: list[BaseException] = []

    def consume():
        try:
            batches.extend(read())
        except BaseException as e:  # reported below
            failure.append(e)

    consumer = threading.Thread(target=consume, daemon=True)
    consumer.start()
    refusals: list[str] = []
    done = threading.Event()

    def produce():
        try:
            refusals.extend(act())
        except BaseException as e:
            failure.append(e)
        finally:
            done.set()

    producer = threading.Thread(target=produce, daemon=True)
    producer.start()
    producer.join(WATCHDOG_S)
    consumer.join(WATCHDOG_S if done.is_set() else 0)
    if producer.is_alive() or consumer.is_alive():
        cancel()
        pytest.fail(f"hang: producer alive={producer.is_alive()}, consumer alive={consumer.is_alive()} after "
                    f"{WATCHDOG_S} s")
    if failure:
        raise failure[0]
    return batches, refusals


def expect_refused(call, *args) -> str | None:
    """The UsageError message of a refused call, or None if it was accepted."""
    try:
        call(*args)
    except po.UsageError as e:
        return str(e)
    return None


def check_refusals(script: Script, refusals: list[str]) -> None:
    assert len(refusals) == script.refused, (refusals, script.refused)
    for message in refusals:
        assert "which is closed" in message and "changed nothing" in message, message


@pytest.mark.parametrize("design", po.DESIGNS)
@settings(max_examples=25, deadline=None)
@given(script=scripts())
def test_live_aggregate_scripts_with_misuse_equal_the_reference(design, script):
    live = po.live_aggregate(SCHEMA, inputs=script.inputs, time="t", key="k", window=po.sliding(SIZE, ADVANCE),
                             aggs=AGGS, design=design)

    def act():
        refusals = []
        for call in script.calls:
            kind, i = call[0], call[1]
            fn = {"push": live.push, "heartbeat": live.heartbeat, "close": live.close}[kind]
            message = expect_refused(fn, i, *call[2:])
            if message is not None:
                assert f"input {i}" in message, message
                refusals.append(message)
        return refusals

    batches, refusals = run_with_watchdog(lambda: list(live), act, live.cancel)
    check_refusals(script, refusals)
    out = pa.Table.from_batches(batches, schema=live._result.schema) if batches else None
    tables = [pa.Table.from_batches(b, schema=SCHEMA) for b in script.accepted]
    expected = reference_aggregate(tables, time="t", key=["k"], size=SIZE, advance=ADVANCE, offset=0,
                                   aggs=REFERENCE_AGGS)
    assert (out.to_pylist() if out is not None else []) == expected.to_pylist()


@settings(max_examples=40, deadline=None)
@given(script=scripts(), threads=st.sampled_from([1, 2]))
def test_live_input_scripts_with_misuse_equal_the_reference(script, threads):
    # Queues deep enough for any script: one thread pushes every input, and the merge cannot take
    # from an input until every other has a batch or is closed.
    lives = [po.LiveInput(SCHEMA, max_batches=1000) for _ in range(script.inputs)]
    result = po.Pipeline(lives, time="t").filter(col("v") > -1000).run(threads=threads)

    def act():
        refusals = []
        for call in script.calls:
            kind, i = call[0], call[1]
            fn = {"push": lives[i].push, "heartbeat": lives[i].heartbeat, "close": lives[i].close}[kind]
            message = expect_refused(fn, *call[2:])
            if message is not None:
                assert f"live input {i}" in message, message
                refusals.append(message)
        return refusals

    def cancel():  # end every input first: closing the result joins the thread pulling them
        for live in lives:
            expect_refused(live.close)
        result.close()

    batches, refusals = run_with_watchdog(lambda: list(result), act, cancel)
    check_refusals(script, refusals)
    out = pa.Table.from_batches(batches, schema=result.schema)
    tables = [pa.Table.from_batches(b, schema=SCHEMA) for b in script.accepted]
    assert out.to_pylist() == reference_merge(tables, "t").to_pylist()


def test_a_refused_call_changes_nothing_in_any_design():
    # The faults once seen: a push after close hung tumlsc and sliced, lost a window in mq and
    # mqlf, and dropped the row in wiml, tumlmc and auto.
    for design in po.DESIGNS:
        live = po.live_aggregate(SCHEMA, inputs=2, time="t", window=po.tumbling(10), aggs={"n": po.count()},
                                 design=design)
        live.push(0, pa.record_batch({"t": [1, 12], "k": [0, 0], "v": [1.0, 2.0]}, schema=SCHEMA))
        live.close(0)
        late = pa.record_batch({"t": [13], "k": [0], "v": [3.0]}, schema=SCHEMA)
        with pytest.raises(po.UsageError, match=r"push\(\) on input 0, which is closed"):
            live.push(0, late)
        with pytest.raises(po.UsageError, match=r"heartbeat\(\) on input 0, which is closed"):
            live.heartbeat(0, 20)
        with pytest.raises(po.UsageError, match=r"close\(\) on input 0, which is closed"):
            live.close(0)
        live.push(1, pa.record_batch({"t": [2, 15], "k": [0, 0], "v": [1.0, 2.0]}, schema=SCHEMA))
        live.close(1)
        assert [(r["window_start"], r["n"]) for b in live for r in b.to_pylist()] == [(0, 2), (10, 2)], design


def test_live_input_refuses_push_and_close_after_close():
    other, live = po.LiveInput(SCHEMA), po.LiveInput(SCHEMA)
    result = po.Pipeline([other, live], time="t").filter(col("v") > 0).run(threads=1)
    live.push(_batch([3]))
    live.close()
    with pytest.raises(po.UsageError, match=r"push\(\) on live input 1, which is closed"):
        live.push(_batch([4]))
    with pytest.raises(po.UsageError, match=r"close\(\) on live input 1, which is closed"):
        live.close()
    other.push(_batch([1, 5]))
    other.close()
    assert result.to_arrow().column("t").to_pylist() == [1, 3, 5]  # the refused push left no trace


# --- Prompt results: nothing waits for batch_size rows while every input is open. ---------------

def _first_arrival(read, feed) -> tuple[list, float, threading.Thread]:
    """Starts a consumer, feeds, and waits (at most WATCHDOG_S) for the consumer's first batch;
    returns it, the delay from the end of feeding to its arrival, and the consumer thread (to join
    once the inputs are ended)."""
    arrived: queue.Queue = queue.Queue()
    consumer = threading.Thread(target=lambda: [arrived.put((time.perf_counter(), b)) for b in read()], daemon=True)
    consumer.start()
    fed = feed()
    try:
        at, first = arrived.get(timeout=WATCHDOG_S)
    except queue.Empty:
        pytest.fail(f"no result within {WATCHDOG_S} s while the inputs were open")
    return [first], max(0.0, at - fed), consumer


def _batch(times, k=0):
    return pa.record_batch({"t": times, "k": [k] * len(times), "v": [1.0] * len(times)}, schema=SCHEMA)


def test_two_open_live_inputs_reach_a_pipeline_consumer_without_any_close():
    pa.record_batch({"t": [0]})  # pyarrow's first dict conversion imports lazily: keep it out of the delay
    a, b = po.LiveInput(SCHEMA), po.LiveInput(SCHEMA)
    result = po.Pipeline([a, b], time="t").filter(col("v") > 0).run(threads=2)

    def feed():
        a.push(_batch([1, 5, 9]))
        b.push(_batch([2, 6, 20]))
        a.push(_batch([30]))  # input 0 has moved past input 1's 20: every row up to 20 is ready
        return time.perf_counter()

    first, delay, consumer = _first_arrival(lambda: result, feed)
    print(f"pipeline, two open live inputs: first rows {delay * 1e3:.2f} ms after the pushes")
    assert first[0].num_rows > 0 and first[0].column("t").to_pylist()[0] == 1
    a.close()
    b.close()
    consumer.join(WATCHDOG_S)
    assert not consumer.is_alive()


@pytest.mark.parametrize("design", po.DESIGNS)
def test_two_open_inputs_reach_a_live_aggregate_consumer_without_any_close(design):
    live = po.live_aggregate(SCHEMA, inputs=2, time="t", window=po.tumbling(10), aggs={"n": po.count()}, design=design)

    def feed():
        live.push(0, _batch([1, 4, 12]))
        live.push(1, _batch([2, 11]))  # both past 10: window [0, 10) is complete
        return time.perf_counter()

    first, delay, consumer = _first_arrival(lambda: live, feed)
    print(f"live_aggregate {design}, two open inputs: first window {delay * 1e3:.2f} ms after the pushes")
    assert first[0].to_pylist()[0] == {"window_start": 0, "window_end": 10, "n": 3}
    live.close(0)
    live.close(1)
    consumer.join(WATCHDOG_S)
    assert not consumer.is_alive()


def _open_inputs(n):
    """n live generator inputs fed through queues, each with its first batch already queued
    (the engine reads an iterable's first batch to learn its schema)."""
    queues = [queue.Queue() for _ in range(n)]

    def gen(q):
        while (item := q.get()) is not None:
            yield item

    return queues, [gen(q) for q in queues]


def test_closing_a_result_while_another_thread_reads_it_ends_the_read_cleanly():
    # close() from another thread while a read waits inside the engine once freed the stream under
    # the read (a crash); it now takes effect when the read returns, which then ends the iteration.
    queues, gens = _open_inputs(2)
    queues[0].put(_batch([1]))
    queues[1].put(_batch([2]))
    result = po.merge(gens, time="t")
    seen: list = []
    consumer = threading.Thread(target=lambda: seen.extend(result), daemon=True)
    consumer.start()
    time.sleep(0.2)  # the consumer is now waiting for input 0's next batch
    result.close()
    assert result.closed
    queues[0].put(_batch([3]))
    queues[1].put(None)
    queues[0].put(None)
    consumer.join(WATCHDOG_S)
    assert not consumer.is_alive()
    assert sum(b.num_rows for b in seen) <= 3


def test_two_open_inputs_reach_merge_and_pulled_aggregate_consumers_without_any_close():
    for name in ("merge", "aggregate"):
        queues, gens = _open_inputs(2)
        queues[0].put(_batch([1, 5, 12]))
        queues[1].put(_batch([2, 11]))
        if name == "merge":
            result = po.merge(gens, time="t")
        else:
            result = po.aggregate(gens, time="t", window=po.tumbling(10), aggs={"n": po.count()})
        first, delay, consumer = _first_arrival(lambda: result, lambda: time.perf_counter())
        print(f"{name}, two open inputs: first batch {delay * 1e3:.2f} ms after the consumer started")
        rows = first[0].to_pylist()
        if name == "merge":
            assert [r["t"] for r in rows][:3] == [1, 2, 5]
        else:
            assert rows[0] == {"window_start": 0, "window_end": 10, "n": 3}
        for q in queues:
            q.put(None)
        consumer.join(WATCHDOG_S)
        assert not consumer.is_alive()


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="a pusher helps only while a core would idle")
def test_pushers_waiting_for_room_run_the_pipeline_operators():
    """One worker, a queue of one batch per input, a costly operator: the pushers, waiting for
    room, run operators on the workers' behalf (stats()["helper_steps"]), and the result is the
    same pipeline's over the pushed tables."""
    schema = pa.schema([("ts", pa.int64()), ("k", pa.int64())])
    tables = [pa.table({"ts": np.arange(i, 40_000, 2), "k": np.arange(i, 40_000, 2) % 97}, schema=schema)
              for i in range(2)]

    def pipeline(inputs):
        return (po.Pipeline(inputs, time="ts").sessionize("k", gap=5)
                .experimental_parametric("partitioned", cost_us=2.0, key="k").running("k", {"n": po.count()}))

    inputs = [po.LiveInput(schema, max_batches=1) for _ in range(2)]
    result = pipeline(inputs).run(threads=1)

    def produce(i: int) -> None:
        for batch in tables[i].to_batches(max_chunksize=500):
            inputs[i].push(batch)
        inputs[i].close()

    producers = [threading.Thread(target=produce, args=(i,)) for i in range(2)]
    for p in producers:
        p.start()
    got = result.to_arrow()
    for p in producers:
        p.join()
    assert got.equals(pipeline(tables).run(threads=1).to_arrow())
    assert result.stats()["helper_steps"] > 0
    assert all(x._helper is None for x in inputs)  # closed: the run is not kept
