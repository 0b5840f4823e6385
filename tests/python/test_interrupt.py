"""Ctrl-C during an aggregation: KeyboardInterrupt reaches the caller that iterates the result, the
engine's threads stop, the result stays interrupted, and the interpreter exits cleanly.

Each case runs in a child process that sends SIGINT to its own main thread while that thread
iterates a run that would otherwise never end, then lets the KeyboardInterrupt end the process.
The parent's timeout only guards against a hang; nothing here measures how fast it happens."""

import os
import signal
import subprocess
import sys
import textwrap

import pytest

import pyarrow_ops as po

CHILD = textwrap.dedent(
    """
    import os, signal, sys, threading, time
    import numpy as np, pyarrow as pa
    import pyarrow_ops as po

    design, scenario = sys.argv[1], sys.argv[2]
    schema = pa.schema([("t", pa.int64()), ("k", pa.uint32()), ("v", pa.float64())])

    def batch(t, n, key):
        return pa.record_batch({"t": np.arange(t, t + n, dtype=np.int64), "k": np.full(n, key, np.uint32),
                                "v": np.ones(n)}, schema=schema)

    def endless(key, rows, pause):
        t = 0
        while True:
            yield batch(t, rows, key)
            t += rows
            if pause:
                time.sleep(pause)

    def engine_threads():
        return len(os.listdir("/proc/self/task"))

    base = engine_threads()
    if scenario == "waiting":  # slow inputs: the output thread mostly waits for tuples
        run = po.aggregate([endless(i, 64, 0.01) for i in range(3)], time="t", key="k",
                           window=po.tumbling(10**15), aggs={"n": po.count()}, design=design, threads=2)
    elif scenario == "busy":  # fast inputs, no window ever completes: next() never returns by itself
        run = po.aggregate([endless(i, 4096, 0) for i in range(3)], time="t", key="k",
                           window=po.tumbling(10**15), aggs={"n": po.count()}, design=design, threads=2)
    elif scenario == "pipeline-waiting":  # a pipeline over slow endless inputs
        run = (po.Pipeline([endless(i, 64, 0.01) for i in range(2)], time="t").sessionize("k", gap=5)
               .experimental_parametric("partitioned", cost_us=1.0, key="k").run(threads=2))
    elif scenario == "pipeline-busy":  # busy workers, nothing ever comes out
        run = (po.Pipeline([endless(0, 4096, 0)], time="t").experimental_parametric("stateless", cost_us=0.5)
               .filter(po.col("v") < 0).run(threads=2))
    else:  # live: the inputs are never closed
        run = po.live_aggregate(schema, 2, time="t", key="k", window=po.tumbling(10),
                                aggs={"n": po.count()}, design=design)
        run.push(0, batch(0, 5, 0))

    def work():
        if scenario != "push-full":
            for _ in run:
                pass
            return
        # Input 1 never sends and nobody reads: the engine fills, and a push waits for room.
        t = 5  # after the live scenario's first batch
        while True:
            run.push(0, batch(t, 4096, 0))
            t += 4096

    main = threading.get_ident()
    iterating = threading.Event()

    def interrupter():
        iterating.wait()
        time.sleep(0.2)  # let the main thread get into the engine
        signal.pthread_kill(main, signal.SIGINT)

    sender = threading.Thread(target=interrupter)
    sender.start()
    try:
        iterating.set()
        work()
        print("ended without an interrupt", flush=True)
    except KeyboardInterrupt:
        print("interrupted", flush=True)
        sender.join()
        deadline = time.monotonic() + 30  # a hang guard, not a measurement
        while engine_threads() != base and time.monotonic() < deadline:
            time.sleep(0.01)
        print("threads", base, engine_threads(), flush=True)
        try:
            work()
        except KeyboardInterrupt:
            print("stays interrupted", flush=True)
        except po.UsageError as e:  # a pipeline hands its error out once, then says so
            print("stays interrupted" if "earlier call" in str(e) else repr(e), flush=True)
        raise
    """
)


@pytest.mark.parametrize("scenario", ["waiting", "busy", "live", "push-full"])
@pytest.mark.parametrize("design", po.DESIGNS)
def test_ctrl_c_interrupts_and_stops_the_engine(tmp_path, design, scenario):
    _interrupt_child(tmp_path, design, scenario)


@pytest.mark.parametrize("scenario", ["pipeline-waiting", "pipeline-busy"])
def test_ctrl_c_interrupts_a_pipeline_and_stops_its_workers(tmp_path, scenario):
    _interrupt_child(tmp_path, "auto", scenario)


def _interrupt_child(tmp_path, design, scenario):
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    try:
        proc = subprocess.run([sys.executable, str(script), design, scenario], capture_output=True,
                              text=True, timeout=60, env={**os.environ, "PYTHONFAULTHANDLER": "1"})
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"the interrupted run hung; output so far: {e.stdout!r} {e.stderr!r}")
    lines = proc.stdout.splitlines()
    assert lines[0] == "interrupted", proc.stdout + proc.stderr
    _, base, now = lines[1].split()
    assert now == base, f"engine threads still running after the interrupt: {lines[1]}"
    assert lines[2] == "stays interrupted"
    # The uncaught KeyboardInterrupt ends the process the usual way (SIGINT), after a clean
    # finalization: no fatal error, no std::terminate from a thread torn down mid-call.
    assert proc.returncode == -signal.SIGINT, proc.stderr
    assert proc.stderr.rstrip().endswith("KeyboardInterrupt"), proc.stderr
    assert "Fatal" not in proc.stderr and "terminate" not in proc.stderr, proc.stderr
