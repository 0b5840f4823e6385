"""Journaled live inputs (pyarrow_ops/journal.py, docs/checkpoints.md "Live inputs"): a pipeline or
graph run over LiveInputs with journals, snapshotted while producers push, restored from every
snapshot with new LiveInputs on the same journals whose producers push on from ``position``,
writes byte for byte the uninterrupted run's file; on random inputs, lateness policies, heartbeats,
thread counts and batchings. Damaged or mismatched journals are refused before anything runs.
The SIGKILL runs are the live-pipeline scenario of test_kill_restore.py."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

import pyarrow_ops as po
from benchmarks.lateness import arrival_within

SCHEMA = pa.schema([("t", pa.int64()), ("k", pa.string()), ("v", pa.float64())])


def sources(rng: np.random.Generator, disorder: int | None) -> list[pa.Table]:
    out = []
    for _ in range(int(rng.integers(1, 4))):
        rows = int(rng.integers(200, 3000))
        times = np.cumsum(rng.integers(0, 3, rows)).astype(np.int64)
        if disorder is not None:  # out of order within the bound, a few rows beyond it
            times = times[arrival_within(times, disorder)]
            times[rng.random(rows) < 0.01] -= 3 * disorder + 5
        out.append(pa.table({"t": times, "k": pa.array(np.array(["a", "b", "c", "d"])[rng.integers(0, 4, rows)]),
                             "v": rng.normal(0, 10, rows)}, schema=SCHEMA))
    return out


def query(inputs: list, lateness: int | None, late: str) -> po.Pipeline:
    return (po.Pipeline(inputs, time="t", lateness=lateness, late=late).filter(po.col("v") > -8)
            .sessionize("k", gap=4).running("k", {"n": po.count(), "s": po.sum("v")}))


def produce(live: po.LiveInput, table: pa.Table, chunk: int, heartbeats: bool) -> None:
    for batch in table.slice(live.position).to_batches(max_chunksize=chunk):
        live.push(batch)
        if heartbeats:  # sorted inputs only: each batch's last time is a true promise
            live.heartbeat(batch.column(0)[-1].as_py())
    if not live.closed:
        live.close()


def run_live(tables: list[pa.Table], lives: list[po.LiveInput], result, chunk: int, heartbeats: bool,
             **write) -> None:
    producers = [threading.Thread(target=produce, args=(live, t, chunk, heartbeats)) for live, t in zip(lives, tables)]
    for p in producers:
        p.start()
    result.write_ipc(**write)
    for p in producers:
        p.join()


@pytest.mark.parametrize("seed", range(8))
def test_a_live_pipeline_restored_from_any_snapshot_writes_the_same_file(seed: int, tmp_path: Path) -> None:
    rng = np.random.default_rng(seed)
    lateness = None if seed % 2 == 0 else int(rng.integers(0, 20))
    late = "error" if lateness is None else str(rng.choice(["drop", "side"]))
    tables = sources(rng, lateness)
    heartbeats = lateness is None
    chunk = int(rng.integers(20, 400))
    out, whole = tmp_path / "out.arrow", tmp_path / "whole.arrow"
    if lateness is None:  # sorted inputs: the run over the tables is the reference
        query(tables, None, "error").run().write_ipc(whole, rows_per_batch=100)

    def lives() -> list[po.LiveInput]:
        return [po.LiveInput(SCHEMA, max_batches=int(rng.integers(1, 8)), journal=tmp_path / f"journal-{i}")
                for i in range(len(tables))]

    first = lives()
    # A few morsels in flight: each snapshot takes the output already made into the file, and with
    # much of it made ahead there would be too few snapshots to restore from.
    result = query(first, lateness, late).run(threads=int(rng.integers(1, 4)), batch_size=int(rng.integers(30, 300)),
                                              max_inflight=int(rng.integers(1, 4)))
    run_live(tables, first, result, chunk, heartbeats, path=out, rows_per_batch=100, checkpoint_dir=tmp_path / "ck",
             checkpoint_every=sum(t.num_rows for t in tables) // int(rng.integers(4, 12)), keep_checkpoints=1000)
    if lateness is None:
        assert out.read_bytes() == whole.read_bytes()
    else:
        whole.write_bytes(out.read_bytes())
    snapshots = sorted(p for p in (tmp_path / "ck").iterdir() if p.name.isdigit())
    assert len(snapshots) >= 2
    for snapshot in snapshots[:: max(1, len(snapshots) // 4)]:
        again = lives()
        restored = po.restore(snapshot, inputs=[again])
        assert all(live.position <= t.num_rows for live, t in zip(again, tables))
        run_live(tables, again, restored, chunk, heartbeats)
        assert out.read_bytes() == whole.read_bytes(), snapshot.name


def test_a_restored_run_snapshots_again_and_restores_from_that(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    tables = sources(rng, None)
    out = tmp_path / "out.arrow"
    query(tables, None, "error").run().write_ipc(tmp_path / "whole.arrow", rows_per_batch=50)
    lives = [po.LiveInput(SCHEMA, journal=tmp_path / f"j{i}") for i in range(len(tables))]
    run_live(tables, lives, query(lives, None, "error").run(threads=2), 97, True, path=out, rows_per_batch=50,
             checkpoint_dir=tmp_path / "ck", checkpoint_every=300, keep_checkpoints=1000)
    first = sorted(p for p in (tmp_path / "ck").iterdir() if p.name.isdigit())[0]
    # Restored from the first snapshot, a few batches pushed (into a new segment), snapshotted before
    # its file resumes: that snapshot names the first run's segments up to the first snapshot, then
    # the second run's; restored from it, the file comes out whole.
    lives = [po.LiveInput(SCHEMA, journal=tmp_path / f"j{i}") for i in range(len(tables))]
    restored = po.restore(first, inputs=[lives])
    for live, t in zip(lives, tables):
        for batch in t.slice(live.position, 5 * 97).to_batches(max_chunksize=97):
            live.push(batch)
    second = restored.checkpoint(tmp_path / "second")
    restored.close()
    lives = [po.LiveInput(SCHEMA, journal=tmp_path / f"j{i}") for i in range(len(tables))]
    again = po.restore(second, inputs=[lives])
    run_live(tables, lives, again, 97, True)
    assert out.read_bytes() == (tmp_path / "whole.arrow").read_bytes()


def test_a_graph_over_a_journaled_live_input_restores_every_output(tmp_path: Path) -> None:
    rng = np.random.default_rng(5)
    table = sources(rng, None)[0]

    def outputs(source) -> dict[str, po.Pipeline]:
        p = po.Pipeline(source, time="t")
        return {"chain": p.sessionize("k", gap=3).running("k", {"n": po.count()}),
                "windows": p.window_aggregate(po.tumbling(40), {"s": po.sum("v")}, key="k")}

    paths = {"chain": tmp_path / "a.arrow", "windows": tmp_path / "b.arrow"}
    po.run(outputs(table)).write_ipc(paths, rows_per_batch=64)
    whole = {k: p.read_bytes() for k, p in paths.items()}
    live = po.LiveInput(SCHEMA, journal=tmp_path / "j")
    producer = threading.Thread(target=produce, args=(live, table, 50, False))
    producer.start()
    po.run(outputs(live), threads=2).write_ipc(paths, rows_per_batch=64, checkpoint_dir=tmp_path / "ck",
                                               checkpoint_every=150, keep_checkpoints=1000)
    producer.join()
    assert {k: p.read_bytes() for k, p in paths.items()} == whole
    for snapshot in sorted(p for p in (tmp_path / "ck").iterdir() if p.name.isdigit()):
        live = po.LiveInput(SCHEMA, journal=tmp_path / "j")
        restored = po.restore(snapshot, inputs=[[live]])
        producer = threading.Thread(target=produce, args=(live, table, 50, False))
        producer.start()
        restored.write_ipc()
        producer.join()
        assert {k: p.read_bytes() for k, p in paths.items()} == whole, snapshot.name


def snapshot_of_a_closed_run(tmp_path: Path) -> tuple[pa.Table, Path]:
    table = sources(np.random.default_rng(9), None)[0]
    live = po.LiveInput(SCHEMA, journal=tmp_path / "j")
    live.push(table)
    live.close()
    result = query([live], None, "error").run()
    path = result.checkpoint(tmp_path / "snapshot")
    result.close()
    return table, path


def test_an_input_closed_before_the_snapshot_replays_and_ends(tmp_path: Path) -> None:
    table, path = snapshot_of_a_closed_run(tmp_path)
    live = po.LiveInput(SCHEMA, journal=tmp_path / "j")
    restored = po.restore(path, inputs=[[live]])
    assert live.closed and live.position == table.num_rows
    with pytest.raises(po.UsageError, match="closed"):
        live.push(table.slice(0, 1))
    assert restored.to_arrow().equals(query(table, None, "error").run().to_arrow())


def test_damaged_or_mismatched_journals_are_refused_before_anything_runs(tmp_path: Path) -> None:
    table, path = snapshot_of_a_closed_run(tmp_path)
    with pytest.raises(po.CheckpointError, match="not the one"):
        po.restore(path, inputs=[[po.LiveInput(SCHEMA, journal=tmp_path / "other")]])
    with pytest.raises(po.CheckpointError, match="journaled LiveInput"):
        po.restore(path, inputs=[[table]])
    with pytest.raises(po.CheckpointError, match="journal="):
        po.restore(path, inputs=[[po.LiveInput(SCHEMA)]])
    segment = next((tmp_path / "j").glob("*.arrow"))
    data = segment.read_bytes()
    segment.write_bytes(data[: len(data) // 2])
    with pytest.raises(po.CheckpointError, match="truncated or corrupted"):
        po.restore(path, inputs=[[po.LiveInput(SCHEMA, journal=tmp_path / "j")]])
    segment.unlink()
    with pytest.raises(po.CheckpointError, match="missing"):
        po.restore(path, inputs=[[po.LiveInput(SCHEMA, journal=tmp_path / "j")]])
    (tmp_path / "j" / "journal.json").write_text("{not json")
    with pytest.raises(po.CheckpointError, match="corrupted"):
        po.LiveInput(SCHEMA, journal=tmp_path / "j")



def test_two_inputs_may_share_a_journal_directory(tmp_path: Path) -> None:
    """Each input's segments are its own (created exclusively, named in its snapshot), so a shared
    directory restores each input to its own rows."""
    base = sources(np.random.default_rng(21), None)[0]  # 200 rows or more
    tables = [base, base.slice(7)]
    expected = query(tables, None, "error").run().to_arrow()
    lives = [po.LiveInput(SCHEMA, journal=tmp_path / "shared") for _ in tables]
    for live, t in zip(lives, tables):
        live.push(t.slice(0, 100))
    result = query(lives, None, "error").run()
    path = result.checkpoint(tmp_path / "snapshot")
    result.close()
    again = [po.LiveInput(SCHEMA, journal=tmp_path / "shared") for _ in tables]
    restored = po.restore(path, inputs=[again])
    assert [live.position for live in again] == [100, 100]
    for live, t in zip(again, tables):
        live.push(t.slice(live.position))
        live.close()
    assert restored.to_arrow().equals(expected)


def test_a_failed_journal_write_refuses_what_follows(tmp_path: Path, monkeypatch) -> None:
    """A write that fails (a full disk) may leave part of an item: the push fails, later pushes and
    snapshots are refused, and no snapshot names the part."""
    live = po.LiveInput(SCHEMA, journal=tmp_path / "j")
    result = query([live], None, "error").run()
    table = sources(np.random.default_rng(4), None)[0]
    live.push(table.slice(0, 50))

    def full_disk(*args, **kwargs):
        raise OSError(28, "No space left on device")

    writer = live._journal._writer
    monkeypatch.setattr(live._journal, "_writer", type("W", (), {"write_batch": full_disk})())
    with pytest.raises(OSError, match="No space"):
        live.push(table.slice(50, 50))
    monkeypatch.setattr(live._journal, "_writer", writer)
    with pytest.raises(po.CheckpointError, match="failed to write an item earlier"):
        live.push(table.slice(100, 50))
    with pytest.raises(po.CheckpointError, match="failed to write an item earlier"):
        result.checkpoint(tmp_path / "snapshot")
    result.close()
