"""Checkpoints and restore (docs/checkpoints.md): a run snapshotted at a random point, abandoned,
and restored gives exactly the uninterrupted run's output (the rows that had left, then the
restored run's; half the runs are snapshotted again at once after the restore, while the rows go
back in, and restored from that), on random inputs, windows, designs, lateness policies and
batchings; the file sink's output is byte for byte the uninterrupted run's; damaged snapshots are
refused whole. The kill tests (real SIGKILLs of a subprocess) are in test_kill_restore.py."""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

import pyarrow_ops as po
from benchmarks.lateness import arrival_within
from reference import run_live

SCHEMA = pa.schema([("t", pa.int64()), ("k", pa.string()), ("v", pa.float64())])
AGGS = {"n": po.count(), "s": po.sum("v"), "lo": po.min("v"), "first": po.first("v"), "last": po.last("v"),
        "m": po.mean("v")}
# Without first and last, a run folds every row into window states at once (no order to keep).
UNORDERED_AGGS = {name: agg for name, agg in AGGS.items() if name not in ("first", "last")}
LIVE_DESIGNS = ("mq", "mqlf", "tumlsc", "sliced", "tumlmc", "wiml")
SESSION_DESIGNS = ("mq", "mqlf", "tumlsc")  # the designs whose one updater sees the merged order


@dataclass
class Case:
    seed: int
    window: po.Window | po.Session
    design: str
    lateness: int | None
    late: str
    batches: list[list[pa.RecordBatch]]  # per input, in arrival order
    schedule: list[int]                  # which input pushes its next batch, in order
    batch_size: int                      # of the output: small ones split a window set's rows
    pause_after: int | None              # the consumer stops after about so many rows, for the snapshot
    compact_rows: int                    # rows the logs hold before they are folded into window states
    aggs: dict

    def live(self, **kw) -> po.LiveAggregate:
        return po.live_aggregate(SCHEMA, len(self.batches), time="t", key="k", window=self.window, aggs=self.aggs,
                                 design=self.design, lateness=self.lateness, late=self.late,
                                 batch_size=self.batch_size, **kw)


def make_case(seed: int, sessions: bool = False) -> Case:
    rng = np.random.default_rng(seed)
    inputs = int(rng.integers(1, 4))
    size = int(rng.integers(2, 40))
    shape = 1.0 if sessions else rng.random()
    window = (po.tumbling(size) if shape < 0.4 else po.sliding(size, int(rng.integers(1, size + 1))) if shape < 0.8
              else po.session(int(rng.integers(0, 25))))
    lateness = None if rng.random() < 0.5 else int(rng.integers(0, 30))
    late = "error" if lateness is None else ["drop", "side"][int(rng.integers(0, 2))]
    batches = []
    for _ in range(inputs):
        n = int(rng.integers(0, 400))
        times = np.sort(rng.integers(0, 600, n)).astype(np.int64)
        if lateness is not None:  # out of order within the bound, and some rows beyond it
            times = times[arrival_within(times, lateness)]
            beyond = rng.random(n) < 0.03
            times[beyond] -= rng.integers(0, 80, int(beyond.sum()))
        keys = np.array(["a", "b", "c", "dd"])[rng.integers(0, 4, n)].astype(object)
        keys[rng.random(n) < 0.05] = None
        values = rng.normal(0, 100, n)
        table = pa.table({"t": times, "k": pa.array(keys, pa.string()),
                          "v": pa.array(values, mask=rng.random(n) < 0.1)}, schema=SCHEMA)
        cuts = np.sort(rng.integers(0, n + 1, int(rng.integers(0, 8))))
        edges = [0, *cuts.tolist(), n]
        batches.append([table.slice(a, b - a).combine_chunks().to_batches()[0] if b > a else
                        pa.record_batch([pa.array([], f.type) for f in SCHEMA], schema=SCHEMA)
                        for a, b in zip(edges, edges[1:])])
    schedule = [i for i in range(inputs) for _ in batches[i]]
    rng.shuffle(schedule)
    designs = SESSION_DESIGNS if isinstance(window, po.Session) else LIVE_DESIGNS
    return Case(seed, window, designs[int(rng.integers(0, len(designs)))], lateness, late, batches,
                [int(i) for i in schedule], int(rng.choice([1, 2, 3, 65536])),
                None if rng.random() < 0.5 else int(rng.integers(0, 200)),
                int(rng.choice([0, int(rng.integers(1, 200)), 1 << 20])), AGGS if rng.random() < 0.5 else UNORDERED_AGGS)


def uninterrupted(case: Case) -> tuple[pa.Table, pa.Table | None]:
    live = case.live()
    got = run_live(live, case.batches)
    return pa.Table.from_batches(got, schema=live._result.schema), live.late


class Consumer(threading.Thread):
    """Reads a live run into a list (or a sink); quiet() waits until it has read what is there, or
    (``pause_after``) until it has read that many rows and waits (snapshots inside a window set's
    rows), until resume()."""

    def __init__(self, live: po.LiveAggregate, sink: Path | None = None, pause_after: int | None = None) -> None:
        super().__init__(daemon=True)
        self.live, self.sink, self.got, self.error = live, sink, [], None
        self.pause_after, self.paused, self.go = pause_after, threading.Event(), threading.Event()

    def run(self) -> None:
        try:
            batches = iter(self.live) if self.sink is None else None
            if self.sink is not None:
                self.live.write_ipc(self.sink, rows_per_batch=7)
                return
            for batch in batches:
                self.got.append(batch)
                if self.pause_after is not None and sum(b.num_rows for b in self.got) >= self.pause_after:
                    self.pause_after = None
                    self.paused.set()
                    self.go.wait()
        except po.PyArrowOpsError as e:  # cancelled: the abandoned run
            self.error = e

    def quiet(self) -> None:
        last, still = -1, 0
        while still < 3 and not self.paused.is_set():
            time.sleep(0.005)
            now = self.live._left.rows
            still, last = (still + 1, last) if now == last else (0, now)

    def resume(self) -> None:
        self.go.set()


def push_steps(live: po.LiveAggregate, case: Case, steps: list[int], done: list[int]) -> None:
    """Pushes the schedule's next batches for `steps`; closes an input after its last batch."""
    for i in steps:
        live.push(i, case.batches[i][done[i]])
        done[i] += 1
        if done[i] == len(case.batches[i]):
            live.close(i)


def interrupted(case: Case, directory: Path, cut: int, extra: int, sink: Path | None = None,
                twice: bool = False) -> pa.Table:
    """Runs the case to step `cut`, snapshots, pushes `extra` more steps (work the snapshot does not
    hold), abandons the run; restores and finishes. Returns the rows that had left before the
    snapshot followed by the restored run's."""
    live = case.live(checkpointable=True)
    live._compact_rows = case.compact_rows
    consumer = Consumer(live, sink, case.pause_after if sink is None else None)
    consumer.start()
    done = [0] * len(case.batches)
    for i in range(len(case.batches)):
        if not case.batches[i]:
            live.close(i)
    push_steps(live, case, case.schedule[:cut], done)
    consumer.quiet()
    path = live.checkpoint(directory / "snapshot")
    left = json.loads((path / "manifest.json").read_text())["body"]["state"]["left"]["rows"]
    consumer.resume()
    push_steps(live, case, case.schedule[cut:cut + extra], done)
    live.cancel()
    consumer.join()

    again = po.restore(path)
    if twice:  # a snapshot of the restored run at once, while its rows are still going back in
        second = again.checkpoint(directory / "second")
        again.cancel()
        again = po.restore(second)
    again._compact_rows = case.compact_rows
    assert again.positions == [sum(b.num_rows for b in case.batches[i][:k]) for i, k in
                               enumerate(_batches_done(case, cut))]
    resumed = Consumer(again, sink)
    resumed.start()
    done = _batches_done(case, cut)
    push_steps(again, case, case.schedule[cut:], done)
    resumed.join()
    assert resumed.error is None
    schema = again._result.schema
    if sink is not None:
        return pa.ipc.open_stream(sink).read_all()
    head = pa.Table.from_batches(consumer.got, schema=schema).slice(0, left)
    return pa.concat_tables([head, pa.Table.from_batches(resumed.got, schema=schema)]), again.late


def _batches_done(case: Case, cut: int) -> list[int]:
    done = [0] * len(case.batches)
    for i in case.schedule[:cut]:
        done[i] += 1
    return done


@pytest.mark.parametrize("seed", range(60))
def test_a_restored_live_aggregation_equals_the_uninterrupted_run(seed: int, tmp_path: Path) -> None:
    case = make_case(seed)
    expected, expected_late = uninterrupted(case)
    rng = np.random.default_rng(seed + 1000)
    cut = int(rng.integers(0, len(case.schedule) + 1))
    got, late = interrupted(case, tmp_path, cut, int(rng.integers(0, 3)), twice=seed % 2 == 1)
    assert got.equals(expected), (case.design, case.window, case.lateness, cut)
    if case.late == "side":
        assert late.equals(expected_late)


@pytest.mark.parametrize("seed", range(30))
def test_a_restored_live_session_aggregation_equals_the_uninterrupted_run(seed: int, tmp_path: Path) -> None:
    """Sessions: the open ones are saved as states, those the folding closed as their rows."""
    case = make_case(seed + 5000, sessions=True)
    expected, expected_late = uninterrupted(case)
    rng = np.random.default_rng(seed + 3000)
    cut = int(rng.integers(0, len(case.schedule) + 1))
    got, late = interrupted(case, tmp_path, cut, int(rng.integers(0, 3)), twice=seed % 2 == 1)
    assert got.equals(expected), (case.design, case.window, case.lateness, cut)
    if case.late == "side":
        assert late.equals(expected_late)


@pytest.mark.parametrize("seed", range(20))
def test_the_file_sink_after_a_restore_is_byte_identical(seed: int, tmp_path: Path) -> None:
    case = make_case(seed)
    whole = tmp_path / "whole.arrow"
    live = case.live()
    consumer = Consumer(live, whole)
    consumer.start()
    push_steps(live, case, case.schedule, [0] * len(case.batches))
    for i in range(len(case.batches)):
        if not case.batches[i]:
            live.close(i)
    consumer.join()
    rng = np.random.default_rng(seed + 2000)
    cut = int(rng.integers(0, len(case.schedule) + 1))
    part = tmp_path / "part.arrow"
    interrupted(case, tmp_path, cut, int(rng.integers(0, 3)), sink=part, twice=seed % 2 == 1)
    assert part.read_bytes() == whole.read_bytes()
    assert pa.ipc.open_stream(whole).read_all().equals(uninterrupted(case)[0])


# --- Pipelines and graphs ------------------------------------------------------------------------


def clicks(seed: int, inputs: int = 2, rows: int = 3000) -> list[pa.Table]:
    rng = np.random.default_rng(seed)
    return [pa.table({"t": np.sort(rng.integers(0, rows, rows)).astype(np.int64),
                      "k": pa.array(np.array(["a", "b", "c"])[rng.integers(0, 3, rows)]),
                      "v": rng.normal(0, 10, rows)}, schema=SCHEMA) for _ in range(inputs)]


def chain(inputs: list[pa.Table]) -> po.Pipeline:
    # sessionize and both runnings fuse into one keyed chain (the first running keyed by the
    # session epoch, taking sessionize's key ids and new sessions): its state is restored too.
    return (po.Pipeline(inputs, time="t").filter(po.col("v") > -8).sessionize("k", gap=5)
            .running(["k", "session"], {"n": po.count(), "s": po.sum("v")}).running("k", {"m": po.count()}))


@pytest.mark.parametrize("seed", range(6))
def test_a_pipeline_restored_from_any_checkpoint_writes_the_same_file(seed: int, tmp_path: Path) -> None:
    rng = np.random.default_rng(seed)
    # In chunks: a run reads its inputs a chunk at a time, so the snapshots fall inside them.
    inputs = [pa.Table.from_batches(t.to_batches(max_chunksize=int(rng.integers(50, 400)))) for t in clicks(seed)]
    chain(inputs).run(threads=2).write_ipc(tmp_path / "whole.arrow", rows_per_batch=100)
    out = tmp_path / "out.arrow"
    # A few morsels in flight: a snapshot takes the rows already made into the file, and with the
    # whole output made ahead there would be one snapshot.
    chain(inputs).run(threads=int(rng.integers(1, 4)), batch_size=int(rng.integers(50, 500)),
                      max_inflight=int(rng.integers(1, 4))).write_ipc(
        out, rows_per_batch=100, checkpoint_dir=tmp_path / "ck", checkpoint_every=int(rng.integers(150, 900)),
        keep_checkpoints=100)
    snapshots = sorted(p for p in (tmp_path / "ck").iterdir() if p.name.isdigit())
    assert len(snapshots) >= 2
    for k, snapshot in enumerate(snapshots):  # each restore cuts the file back to its snapshot, writes the rest
        restored = po.restore(snapshot, inputs=inputs)
        if k % 2:  # snapshotted again before its file is resumed: the snapshot keeps the file's state
            again = restored.checkpoint(tmp_path / "again")
            restored.close()
            restored = po.restore(again, inputs=inputs)
        restored.write_ipc()
        assert out.read_bytes() == (tmp_path / "whole.arrow").read_bytes()


def test_a_graph_restores_every_output(tmp_path: Path) -> None:
    inputs = clicks(7)
    other = po.Pipeline(inputs[:1], time="t").window_aggregate(po.tumbling(50), {"s": po.sum("v")}, key="k")

    def outputs() -> dict[str, po.Pipeline]:
        return {"chain": chain(inputs), "windows": other}

    paths = {"chain": tmp_path / "a.arrow", "windows": tmp_path / "b.arrow"}
    po.run(outputs(), threads=2).write_parquet(paths, rows_per_batch=64)
    whole = {k: p.read_bytes() for k, p in paths.items()}
    po.run(outputs(), threads=1).write_parquet(paths, rows_per_batch=64, checkpoint_dir=tmp_path / "ck",
                                               checkpoint_every=200, keep_checkpoints=100)
    for snapshot in sorted(p for p in (tmp_path / "ck").iterdir() if p.name.isdigit()):
        po.restore(snapshot, inputs=[inputs, inputs[:1]]).write_parquet()
        assert {k: p.read_bytes() for k, p in paths.items()} == whole


def test_a_pipeline_read_in_part_continues_after_its_snapshot(tmp_path: Path) -> None:
    inputs = clicks(3)
    expected = chain(inputs).run().to_arrow()
    result = chain(inputs).run(threads=2, batch_size=64)
    batches = iter(result)
    head = [next(batches), next(batches)]
    path = result.checkpoint(tmp_path / "snapshot")
    result.close()
    rest = po.restore(path, inputs=inputs).to_arrow()
    left = sum(b.num_rows for b in head)
    assert pa.concat_tables([pa.Table.from_batches(head), rest]).equals(expected)
    assert rest.num_rows == expected.num_rows - left
    again = po.restore(path, inputs=inputs)
    assert pa.table(again).equals(rest)  # the stream protocol drops the same rows


def test_what_cannot_be_checkpointed_is_refused(tmp_path: Path) -> None:
    inputs = clicks(1)
    mapped = po.Pipeline(inputs, time="t").map_batches(lambda b: b)
    with pytest.raises(po.CheckpointError, match="lambda"):
        mapped.run().checkpoint(tmp_path / "a")
    live_input = po.LiveInput(SCHEMA)
    result = po.Pipeline(live_input, time="t").run()
    with pytest.raises(po.CheckpointError, match="LiveInput without a journal.*journal="):
        result.checkpoint(tmp_path / "b")
    live_input.close()
    result.close()
    plain = po.live_aggregate(SCHEMA, 1, time="t", window=po.tumbling(5), aggs=AGGS)
    with pytest.raises(po.UsageError, match="checkpointable"):
        plain.checkpoint(tmp_path / "c")
    plain.cancel()
    graph = po.run({"a": chain(inputs), "b": chain(inputs)})
    with pytest.raises(po.UsageError, match="GraphResult"):
        graph["a"].checkpoint(tmp_path / "d")
    graph.close()


# --- Damaged snapshots ---------------------------------------------------------------------------


def snapshot_of_a_live_run(tmp_path: Path) -> Path:
    live = po.live_aggregate(SCHEMA, 1, time="t", key="k", window=po.tumbling(5), aggs=AGGS, checkpointable=True)
    live.push(0, clicks(0, 1, 50)[0].to_batches()[0])
    path = live.checkpoint(tmp_path / "snapshot")
    live.cancel()
    return path


def flip(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x40
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("damage, message", [
    (lambda p: flip(p / "sent-0.arrow"), "sent-0.arrow is corrupted"),
    (lambda p: (p / "sent-0.arrow").write_bytes((p / "sent-0.arrow").read_bytes()[:100]), "truncated"),
    (lambda p: (p / "schema.arrow").unlink(), "schema.arrow is missing"),
    (lambda p: (p / "manifest.json").write_text((p / "manifest.json").read_text()[:-40]), "manifest.json is corrupted"),
    (lambda p: (p / "manifest.json").write_text((p / "manifest.json").read_text().replace('"time": "t"', '"time": "v"')),
     "do not match its SHA-256"),
    (lambda p: (p / "manifest.json").unlink(), "no checkpoint"),
])
def test_a_damaged_snapshot_is_refused_whole(tmp_path: Path, damage, message: str) -> None:
    path = snapshot_of_a_live_run(tmp_path)
    damage(path)
    with pytest.raises(po.CheckpointError, match=message):
        po.restore(path)


def test_another_format_version_is_refused(tmp_path: Path) -> None:
    from pyarrow_ops import checkpoint

    path = snapshot_of_a_live_run(tmp_path)
    outer = json.loads((path / "manifest.json").read_text())
    outer["body"]["version"] = 0
    outer["sha256"] = checkpoint._body_digest(outer["body"])
    (path / "manifest.json").write_text(json.dumps(outer))
    with pytest.raises(po.CheckpointError, match="format version 0; this pyarrow-ops reads versions 1, 2"):
        po.restore(path)


def test_a_checkpoint_directory_keeps_the_last_few(tmp_path: Path) -> None:
    live = po.live_aggregate(SCHEMA, 1, time="t", key="k", window=po.tumbling(5), aggs=AGGS,
                             checkpoint_dir=tmp_path, checkpoint_every=10, keep_checkpoints=2)
    consumer = Consumer(live)
    consumer.start()
    for batch in clicks(0, 1, 100)[0].to_batches(max_chunksize=10):
        live.push(0, batch)
    live.close(0)
    consumer.join()  # the run's end waits for a periodic snapshot being written
    last = live.checkpoint()  # the next in the directory, after every row
    kept = sorted(p.name for p in tmp_path.iterdir())
    numbers = [int(name) for name in kept]
    assert len(kept) == 2 and numbers[1] == numbers[0] + 1 >= 2 and last.name == kept[1]
    again = po.restore(tmp_path)  # the newest
    assert again.positions == [100] and again.closed == [True]
    again.cancel()


def test_window_states_that_do_not_fit_the_query_are_refused() -> None:
    """A snapshot's manifest hashes keep damaged files out; states that reach the engine anyway
    (another query's, or edited with a new hash) are refused naming the row and the fault."""
    live = po.live_aggregate(SCHEMA, 1, time="t", key="k", window=po.tumbling(5), aggs=AGGS, checkpointable=True)
    live._compact_rows = 0
    live.push(0, pa.record_batch({"t": [1, 2, 3, 7, 11], "k": ["a", "b", "a", None, "a"],
                                  "v": [1.5, None, -2.0, 4.0, 1e300]}, schema=SCHEMA))
    live.push(0, pa.record_batch({"t": [12], "k": ["a"], "v": [1e-300]}, schema=SCHEMA))
    states = pa.record_batch(live._states.save(-(2**63)))
    live.cancel()
    assert states.num_rows == 4 and states.column("window_start").to_pylist() == [0, 0, 5, 10]
    again = po.live_aggregate(SCHEMA, 1, time="t", key="k", window=po.tumbling(5), aggs=AGGS, checkpointable=True)
    again._states.load(*states.__arrow_c_array__())
    assert pa.record_batch(again._states.save(-(2**63))).equals(states)  # saved again: the same text

    def edited(column: str, row: int, value) -> pa.RecordBatch:
        values = states.column(column).to_pylist()
        values[row] = value
        return states.set_column(states.schema.get_field_index(column), column, pa.array(values, states.schema.field(column).type))

    cases = [
        (edited("n", 1, "x"), "saved window state 1 .* has a malformed state of aggregate 'n'"),
        (edited("s", 0, states.column("s")[0].as_py() + " 9"), "saved window state 0 .* aggregate 's'"),
        (edited("window_start", 2, 6), r"saved window state 2 \(window 6 to 10\) is not a window of this query"),
        (pa.concat_batches([states, states.slice(0, 1)]) if hasattr(pa, "concat_batches") else
         pa.Table.from_batches([states, states.slice(0, 1)]).combine_chunks().to_batches()[0],
         "saved window state 4 .* repeats a key of an earlier row"),
        (states.drop_columns(["last"]), "do not fit this query"),
    ]
    for bad, message in cases:
        fresh = po.live_aggregate(SCHEMA, 1, time="t", key="k", window=po.tumbling(5), aggs=AGGS)
        with pytest.raises(po.InvalidInputError, match=message):
            fresh._handle.load_states(*bad.__arrow_c_array__())
        fresh.cancel()


def test_a_snapshot_taken_after_the_file_was_finished_leaves_it_whole(tmp_path: Path) -> None:
    """Found by the randomized sink test: a snapshot taken once the file was finished recorded no
    file, and its restore wrote the file again, without the rows that had left: empty."""
    live = po.live_aggregate(SCHEMA, 1, time="t", key="k", window=po.tumbling(5), aggs=AGGS, checkpointable=True)
    live.push(0, pa.record_batch({"t": [1, 2, 7, 9], "k": ["a", "b", "a", "b"], "v": [1.0, 2.0, 3.0, 4.0]},
                                 schema=SCHEMA))
    live.close(0)
    live.write_ipc(tmp_path / "live.arrow", rows_per_batch=3)
    whole = (tmp_path / "live.arrow").read_bytes()
    po.restore(live.checkpoint(tmp_path / "live-snapshot")).write_ipc()
    assert (tmp_path / "live.arrow").read_bytes() == whole

    inputs = clicks(2)
    result = chain(inputs).run()
    result.write_ipc(tmp_path / "pipeline.arrow", rows_per_batch=100)
    whole = (tmp_path / "pipeline.arrow").read_bytes()
    po.restore(result.checkpoint(tmp_path / "pipeline-snapshot"), inputs=inputs).write_ipc()
    assert (tmp_path / "pipeline.arrow").read_bytes() == whole


def test_a_snapshot_between_a_close_and_the_engine_close_restores_each_row_once(tmp_path: Path) -> None:
    """Found by the kill tests: with lateness, close() releases the held rows (logged as sent),
    then closes the engine's input. A snapshot between the two saw those rows sent, and again as
    held on an input still open: its restore released them twice, out of order (UnsortedInputError
    at the next close). The snapshot is taken there by hand, as close() does its first step."""
    rows = pa.record_batch({"t": [3, 1, 8, 6, 12, 10], "k": ["a", "b", "a", "b", "a", "b"],
                            "v": [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]}, schema=SCHEMA)
    kw = dict(time="t", key="k", window=po.tumbling(5), aggs=UNORDERED_AGGS, lateness=4, late="drop")
    whole = po.live_aggregate(SCHEMA, 1, **kw)
    whole.push(0, rows)
    whole.close(0)
    expected = pa.Table.from_batches(list(whole), schema=whole._result.schema)

    live = po.live_aggregate(SCHEMA, 1, checkpointable=True, **kw)
    live.push(0, rows)
    with live._locks[0]:  # close()'s first step, then a snapshot before the engine's close
        live._through(0, live._lateness[0].finish, final=True)
        snapshot = live.checkpoint(tmp_path / "between")
    live.cancel()
    restored = po.restore(snapshot)
    assert restored.closed == [True]  # nothing left to close: its rows were all released once
    assert pa.Table.from_batches(list(restored), schema=restored._result.schema).equals(expected)
