"""Checkpoints and restore (docs/checkpoints.md): a run snapshotted at a random point, abandoned,
and restored gives exactly the uninterrupted run's output (the rows that had left, then the
restored run's), on random inputs, windows, designs, lateness policies and batchings; the file
sink's output is byte for byte the uninterrupted run's; damaged snapshots are refused whole.
The kill tests (real SIGKILLs of a subprocess) are in test_kill_restore.py."""

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
LIVE_DESIGNS = ("mq", "mqlf", "tumlsc", "sliced", "tumlmc", "wiml")


@dataclass
class Case:
    seed: int
    window: po.Window
    design: str
    lateness: int | None
    late: str
    batches: list[list[pa.RecordBatch]]  # per input, in arrival order
    schedule: list[int]                  # which input pushes its next batch, in order
    batch_size: int                      # of the output: small ones split a window set's rows
    pause_after: int | None              # the consumer stops after about so many rows, for the snapshot

    def live(self, **kw) -> po.LiveAggregate:
        return po.live_aggregate(SCHEMA, len(self.batches), time="t", key="k", window=self.window, aggs=AGGS,
                                 design=self.design, lateness=self.lateness, late=self.late,
                                 batch_size=self.batch_size, **kw)


def make_case(seed: int) -> Case:
    rng = np.random.default_rng(seed)
    inputs = int(rng.integers(1, 4))
    size = int(rng.integers(2, 40))
    window = po.tumbling(size) if rng.random() < 0.5 else po.sliding(size, int(rng.integers(1, size + 1)))
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
    return Case(seed, window, LIVE_DESIGNS[int(rng.integers(0, len(LIVE_DESIGNS)))], lateness, late, batches,
                [int(i) for i in schedule], int(rng.choice([1, 2, 3, 65536])),
                None if rng.random() < 0.5 else int(rng.integers(0, 200)))


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


def interrupted(case: Case, directory: Path, cut: int, extra: int, sink: Path | None = None) -> pa.Table:
    """Runs the case to step `cut`, snapshots, pushes `extra` more steps (work the snapshot does not
    hold), abandons the run; restores and finishes. Returns the rows that had left before the
    snapshot followed by the restored run's."""
    live = case.live(checkpointable=True)
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
    got, late = interrupted(case, tmp_path, cut, int(rng.integers(0, 3)))
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
    interrupted(case, tmp_path, cut, int(rng.integers(0, 3)), sink=part)
    assert part.read_bytes() == whole.read_bytes()
    assert pa.ipc.open_stream(whole).read_all().equals(uninterrupted(case)[0])
