"""Ownership is exact: producers' buffers live exactly as long as the engine or its outputs hold
them, and every release callback runs exactly once, on success, error and cancellation."""

import gc
import threading
import time

import numpy as np
import pyarrow as pa
import pytest

import pyarrow_ops as po
from pyarrow_ops._testing import CountingStream


def table_of(batches, start=0, rows=100):
    return pa.Table.from_batches(
        [pa.record_batch({"t": np.arange(start + b * rows, start + (b + 1) * rows), "v": np.ones(rows)}) for b in range(batches)]
    )


def counting(table, fail_after=-1):
    return CountingStream(table.__arrow_c_stream__(), fail_after)


def assert_all_released(*streams):
    gc.collect()
    for s in streams:
        assert s.stream_releases == 1
        assert s.repeated_releases == 0
        assert s.arrays_released == s.arrays_made


pytestmark = pytest.mark.usefixtures("no_leaked_exports")


def test_gathered_output_releases_inputs_once():
    a, b = counting(table_of(5)), counting(table_of(5, start=50))
    out = po.merge([a, b], time="t").to_arrow()
    assert a.arrays_made == b.arrays_made == 5
    assert out.num_rows == 1000
    del out
    assert_all_released(a, b)


def test_pass_through_buffers_live_as_long_as_the_output():
    a = counting(table_of(3))
    out = po.merge(a, time="t").to_arrow()
    gc.collect()
    assert a.arrays_made == 3
    assert a.arrays_released == 0  # the output table is made of the producer's buffers
    assert a.stream_releases == 1  # but the stream itself was given back at its end
    del out
    assert_all_released(a)


def test_inputs_are_read_lazily():
    a = counting(table_of(50))
    result = po.merge(a, time="t")
    assert a.arrays_made == 0
    batches = iter(result)
    next(batches)
    assert a.arrays_made == 1
    next(batches)
    assert a.arrays_made == 2
    del batches
    result.close()
    assert_all_released(a)


def test_cancelled_result_releases_everything():
    a, b = counting(table_of(20)), counting(table_of(20))
    result = po.merge([a, b], time="t", batch_size=10)
    first = next(iter(result))
    assert first.num_rows == 10
    result.close()
    del first
    assert_all_released(a, b)
    assert result.closed
    with pytest.raises(po.UsageError, match="this stream was closed"):
        result.to_arrow()


def test_dropped_result_releases_everything():
    a = counting(table_of(4))
    result = po.merge([a, counting(table_of(4))], time="t")
    next(iter(result))
    del result
    assert_all_released(a)


def test_producer_failure_releases_once_and_names_the_input():
    ok, broken = counting(table_of(5)), counting(table_of(5), fail_after=2)
    result = po.merge([ok, broken], time="t")
    with pytest.raises(po.InputFailedError, match="input 1 failed: injected producer failure"):
        result.to_arrow()
    assert_all_released(ok, broken)  # released at the failure, not at teardown
    with pytest.raises(po.InputFailedError):  # the result stays failed
        result.to_arrow()


class StreamOnly:
    """Offers only __arrow_c_stream__ (as Polars frames do), so the input goes through pyarrow's
    reader before it reaches the engine."""

    def __init__(self, inner):
        self.inner = inner

    def __arrow_c_stream__(self, requested_schema=None):
        return self.inner.__arrow_c_stream__(requested_schema)


def test_inputs_read_through_pyarrow_release_once():
    ok, broken = counting(table_of(5)), counting(table_of(5), fail_after=3)
    out = po.merge([StreamOnly(ok), StreamOnly(counting(table_of(2)))], time="t").to_arrow()
    assert out.num_rows == 700
    del out
    with pytest.raises(po.InputFailedError, match="input 0 failed: .*injected producer failure"):
        po.merge([StreamOnly(broken)], time="t").to_arrow()
    assert_all_released(ok, broken)


def test_unsorted_input_releases_once():
    bad = pa.Table.from_batches([pa.record_batch({"t": [1, 2], "v": [0.0, 0.0]}), pa.record_batch({"t": [0], "v": [0.0]})])
    a, b = counting(table_of(3)), counting(bad)
    with pytest.raises(po.UnsortedInputError):
        po.merge([a, b], time="t").to_arrow()
    assert_all_released(a, b)


def test_schema_mismatch_at_construction_releases_once():
    a, b = counting(table_of(2)), counting(table_of(2).cast(pa.schema({"t": pa.int64(), "v": pa.float32()})))
    with pytest.raises(po.SchemaMismatchError):
        po.merge([a, b], time="t")
    assert_all_released(a, b)


def test_exported_stream_consumed_by_pyarrow_releases_once():
    a, b = counting(table_of(3)), counting(table_of(3, start=10))
    reader = pa.RecordBatchReader.from_stream(po.merge([a, b], time="t", batch_size=7))
    total = sum(batch.num_rows for batch in reader)
    assert total == 600
    del reader
    assert_all_released(a, b)


def test_exported_stream_dropped_unread_releases_once():
    a = counting(table_of(3))
    capsule = po.merge(a, time="t").__arrow_c_stream__()
    del capsule
    assert_all_released(a)


@pytest.mark.parametrize("design", ["tumlsc", "wiml"])
def test_an_ended_input_is_released_while_the_run_goes_on(design):
    # The aggregate's producers give an input's stream back once its end is published, on a
    # thread of its own, while the other inputs still run (here: one held open by a generator).
    go_on = threading.Event()
    schema = table_of(1).schema

    def held_open():
        yield from table_of(2, start=0).to_batches()
        go_on.wait(60)
        yield from table_of(2, start=200).to_batches()

    short = counting(table_of(3))
    held = pa.RecordBatchReader.from_batches(schema, held_open())
    result = po.aggregate([short, held], time="t", window=po.tumbling(50), aggs={"n": po.count()},
                          design=design, threads=2)
    outputs = []
    reader = threading.Thread(target=lambda: outputs.append(result.to_arrow()))
    reader.start()  # WiML's windows move only as the result is read
    deadline = time.monotonic() + 30
    while short.stream_releases == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert short.stream_releases == 1  # released before the run could end
    assert not go_on.is_set()
    go_on.set()
    reader.join(30)
    assert outputs[0].column("n").to_pylist() == [100] * 6 + [50] * 2  # windows of 50: t < 300, then 300..399
    del outputs, result
    assert_all_released(short)


def test_the_buffer_pool_reuses_and_releases_large_buffers():
    # Column buffers of 64 KiB and more come back for the next batches (engine/core/buffer_pool.h):
    # a run over 200,000 rows in morsels frees and allocates the same sizes again and again.
    t = pa.table({"t": list(range(200_000)), "v": [1.0] * 200_000})
    po.release_memory()
    before = po.memory_pool()
    out = po.Pipeline(t, time="t").with_columns(w=po.col("v") * 2).filter(po.col("t") % 2 == 0).run(threads=2).to_arrow()
    assert out.num_rows == 100_000
    after = po.memory_pool()
    assert after["reused"] + after["fresh"] > before["reused"] + before["fresh"]
    idle = after["idle_bytes"]
    assert 0 <= idle <= 256 << 20
    assert po.release_memory() == idle
    assert po.memory_pool()["idle_bytes"] == 0
    assert out.column("w").to_pylist()[:3] == [2.0, 2.0, 2.0]  # the result's buffers are its own


def test_a_fork_while_other_threads_allocate_leaves_the_child_working():
    # The buffer pool's lists are locked around fork() (pthread_atfork), so a child forked while
    # another thread allocates or frees never inherits a list locked for good: each child runs a
    # pipeline of its own and exits 0 within the timeout.
    import os
    import threading
    import time

    t = pa.table({"t": list(range(300_000)), "v": [1.0] * 300_000})
    stop = threading.Event()

    def churn() -> None:
        while not stop.is_set():
            po.Pipeline(t, time="t").with_columns(w=po.col("v") * 2).run(threads=2).to_arrow()

    worker = threading.Thread(target=churn)
    worker.start()
    try:
        for _ in range(8):
            time.sleep(0.01)
            pid = os.fork()
            if pid == 0:  # the child: a run of its own, then out without Python's teardown
                try:
                    out = po.Pipeline(t, time="t").with_columns(w=po.col("v") + 1).run(threads=2).to_arrow()
                    os._exit(0 if out.num_rows == 300_000 else 3)
                except BaseException:
                    os._exit(4)
            deadline = time.monotonic() + 60
            while True:
                done, status = os.waitpid(pid, os.WNOHANG)
                if done:
                    assert os.waitstatus_to_exitcode(status) == 0
                    break
                if time.monotonic() > deadline:
                    os.kill(pid, 9)
                    os.waitpid(pid, 0)
                    raise AssertionError("a forked child hung")
                time.sleep(0.01)
    finally:
        stop.set()
        worker.join()


@pytest.mark.parametrize("mib", ["0", "1"])
def test_the_idle_limit_comes_from_the_environment(mib):
    # PYARROW_OPS_IDLE_MIB bounds what the pool keeps (0: nothing is recycled), read at its first use.
    import os
    import subprocess
    import sys

    script = (
        "import pyarrow as pa, pyarrow_ops as po\n"
        "t = pa.table({'t': list(range(300_000)), 'v': [1.0] * 300_000})\n"
        "po.Pipeline(t, time='t').with_columns(w=po.col('v') * 2).run(threads=2).to_arrow()\n"
        "s = po.memory_pool()\n"
        "assert s['idle_limit'] == int(__import__('os').environ['PYARROW_OPS_IDLE_MIB']) << 20, s\n"
        "assert s['idle_bytes'] <= s['idle_limit'], s\n"
        "assert s['reused'] == 0 or s['idle_limit'] > 0, s\n"
        "print('ok')\n"
    )
    env = {**os.environ, "PYARROW_OPS_IDLE_MIB": mib}
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    # The last line: an editable install may print its rebuild before the script runs.
    assert out.returncode == 0 and out.stdout.strip().splitlines()[-1] == "ok", out.stderr[-2000:]
