"""Closing a run while others use it, and leaving the interpreter while runs go on: a result closed
while another thread reads it stops the run, its reader returns promptly (the stream ends where it
was closed, or the reader gets the cancel), pushes after it are refused, and a script that ends while daemon threads read, push or
feed runs exits with status 0 (pyarrow_ops/shutdown.py). Before, a daemon thread taking the GIL
during finalization inside the engine aborted the process ("terminate called without an active
exception", status 134)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading

import pyarrow as pa
import pytest

import pyarrow_ops as po

SCHEMA = pa.schema([("t", pa.int64()), ("k", pa.int64())])


def test_closing_a_live_run_fails_its_reader_and_refuses_later_pushes() -> None:
    live = po.LiveInput(SCHEMA)
    result = po.Pipeline(live, time="t").sessionize("k", gap=3).run(threads=2)
    live.push(pa.record_batch({"t": [1, 2], "k": [1, 2]}, schema=SCHEMA))
    failures: list[BaseException] = []

    def read() -> None:
        try:
            for _ in result:
                pass
        except po.UsageError as e:
            failures.append(e)

    reader = threading.Thread(target=read)
    reader.start()
    result.close()
    reader.join(30)
    assert not reader.is_alive()
    # The reader's stream ends where it was closed (next_batch: "closed by another thread
    # meanwhile"), or the reader meets the cancel first, or its input's end that is not one, or
    # (when the thread starts late) the reader finds the stream already closed.
    assert all("was cancelled" in str(e) or "was closed" in str(e) for e in failures), failures
    with pytest.raises(po.UsageError, match="the run reading it was closed"):
        live.push(pa.record_batch({"t": [3], "k": [1]}, schema=SCHEMA))
    live.close()  # a producer's own end after the run was closed is no error


def test_closing_a_graph_stops_its_run() -> None:
    live = po.LiveInput(SCHEMA)
    source = po.Pipeline(live, time="t")
    graph = po.run({"a": source.sessionize("k", gap=3), "b": source.filter(po.col("k") > 1)}, threads=2)
    graph.close()
    with pytest.raises(po.UsageError, match="was closed"):
        live.push(pa.record_batch({"t": [1], "k": [1]}, schema=SCHEMA))


SCRIPTS = {
    "a daemon reader waits on a live run": """
        live = po.LiveInput(schema)
        r = po.Pipeline(live, time="t").sessionize("k", gap=3).run(threads=2)
        live.push(pa.record_batch({"t": [1, 2], "k": [1, 2]}, schema=schema))
        threading.Thread(target=lambda: list(r), daemon=True).start()
    """,
    "daemon producer and reader keep a live run busy": """
        live = po.LiveInput(schema, max_batches=4)
        r = po.Pipeline(live, time="t").sessionize("k", gap=3).run(threads=2)
        def produce():
            for i in itertools.count():
                live.push(pa.record_batch({"t": [2 * i, 2 * i + 1], "k": [1, 2]}, schema=schema))
        threading.Thread(target=produce, daemon=True).start()
        threading.Thread(target=lambda: [None for _ in r], daemon=True).start()
    """,
    "a daemon reader pulls a generator-fed run calling Python": """
        def batches():
            for i in itertools.count():
                yield pa.record_batch({"t": [2 * i, 2 * i + 1], "k": [1, 2]}, schema=schema)
        reader = pa.RecordBatchReader.from_batches(schema, batches())
        r = po.Pipeline(reader, time="t").sessionize("k", gap=3).map_batches(abs_k).run(threads=2)
        threading.Thread(target=lambda: [None for _ in r], daemon=True).start()
    """,
    "an unread live run": """
        live = po.LiveInput(schema)
        r = po.Pipeline(live, time="t").sessionize("k", gap=3).run(threads=2)
        live.push(pa.record_batch({"t": [1, 2], "k": [1, 2]}, schema=schema))
    """,
}

PRELUDE = """
import itertools, threading, time
import pyarrow as pa, pyarrow.compute as pc, pyarrow_ops as po
schema = pa.schema([("t", pa.int64()), ("k", pa.int64())])
def abs_k(batch):
    return batch.set_column(1, "k", pc.abs(batch.column(1)))
"""


@pytest.mark.parametrize("scenario", list(SCRIPTS))
def test_the_interpreter_exits_cleanly_while_runs_go_on(scenario: str) -> None:
    script = PRELUDE + textwrap.dedent(SCRIPTS[scenario]) + "time.sleep(0.3)\nprint('exiting')\n"
    for _ in range(3):  # the moment finalization meets a thread varies
        done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr[-2000:]
        assert "exiting" in done.stdout
        assert "terminate called" not in done.stderr and "Fatal Python error" not in done.stderr
