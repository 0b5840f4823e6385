"""Checkpoints of pipeline and graph runs that hold the operators' state (the engine's cut,
docs/checkpoints.md): a run cut at a random point, restored over the same inputs (each read on
from where the cut left it), cut and restored again, gives exactly the rows of an uninterrupted
sequential run, whatever the threads, threading, morsels, back-pressure and plan on either side."""
from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pyarrow_ops as po
from pyarrow_ops import col


def clicks(rng: np.random.Generator, rows: int) -> pa.Table:
    user = pa.array(rng.integers(0, 40, rows), mask=rng.random(rows) < 0.05)  # null keys are keys too
    return pa.table({"t": np.sort(rng.integers(0, 20 * rows + 1, rows)).astype(np.int64), "user": user,
                     "page": pa.array(np.array(["a", "bb", "ccc", ""])[rng.integers(0, 4, rows)]),
                     "price": pa.array(rng.normal(10, 5, rows), mask=rng.random(rows) < 0.1)})


STEPS = {
    "filter": lambda p: p.filter(col("price") > 4),
    "sessionize": lambda p: p.sessionize("user", gap=30),
    "lag": lambda p: p.lag("user", ["price", "page"]),
    "delta": lambda p: p.delta("user", ["price"], suffix="_d"),
    "running": lambda p: p.running("user", {"n": po.count(), "s": po.sum("price"), "m": po.last("page"),
                                            "f": po.first("price")}),
    "dedupe": lambda p: p.dedupe(["user", "page"]),
}


# Last steps: their output has no time column to go on with.
LAST = {
    None: lambda p: p,
    "tumbling": lambda p: p.window_aggregate(po.tumbling(200), {"n": po.count(), "s": po.sum("price")}, key="user"),
    "sliding": lambda p: p.window_aggregate(po.sliding(300, 100), {"f": po.first("page"), "m": po.min("price")},
                                            key=["user", "page"]),
    "sessions": lambda p: p.window_aggregate(po.session(25), {"n": po.count(), "l": po.last("price")}, key="user"),
    "global sessions": lambda p: p.window_aggregate(po.session(5), {"n": po.count()}),
    "top_k": lambda p: p.with_columns(w=col("t") // 300).top_k(2, "price", per="w"),
    "top_k of all": lambda p: p.top_k(5, "page", descending=False),
    "pairs": lambda p: p.pairs("user", "page", gap=40),
    "windows of all": lambda p: p.window_aggregate(po.sliding(400, 100), {"n": po.count(), "s": po.sum("price")}),
    "windows by window": lambda p: p.window_aggregate(po.tumbling(300), {"l": po.last("page")}, key="user",
                                                      by_window=True),
    "parametric": lambda p: p.experimental_parametric("partitioned", cost_us=0, selectivity=1.5, state_bytes=16,
                                                      key="user"),
    "stateful parametric": lambda p: p.experimental_parametric("stateful", cost_us=0, selectivity=0.7, state_bytes=8),
}


def query(inputs: list[pa.Table], steps: list[str], last: str | None = None) -> po.Pipeline:
    p = po.Pipeline(inputs, time="t")
    for s in steps:
        p = STEPS[s](p)
    return LAST[last](p)


def options(draw: st.DrawFn) -> dict[str, object]:
    threading = draw(st.sampled_from(["ordered", "ordered", "manual", "dedicated", "dynamic"]))
    out: dict[str, object] = {"threading": threading, "morsel": draw(st.sampled_from([None, 1, 7, 500])),
                              "max_inflight": draw(st.sampled_from([None, 1, 3])),
                              "batch_size": draw(st.sampled_from([65536, 37, 400])),
                              "push_down": draw(st.booleans())}
    if threading in ("ordered", "dynamic"):
        out["threads"] = draw(st.integers(1, 3))
    return out


def cut_and_restore(q: po.Pipeline, inputs: list[pa.Table], first: dict, second: dict, take: tuple[int, int],
                    path: Path, last: list | None = None) -> tuple[pa.Table, bool]:
    """The rows of q's run cut after take[0] batches, restored with `second` (options saved with the
    query: `second` only names the restore's own cut), cut again after take[1] batches, restored
    (that last result appended to `last`, read)."""
    result = q.run(**first)
    got = list(itertools.islice(iter(result), take[0]))
    result.checkpoint(path / "one")
    result.close()
    again = po.restore(path / "one", inputs=inputs)
    got += list(itertools.islice(iter(again), take[1]))
    again.checkpoint(path / "two")
    again.close()
    restored = po.restore(path / "two", inputs=inputs)
    rest = restored.to_arrow()
    if last is not None:
        last.append(restored)
    with_cut = all("cut" in json.loads((path / name / "manifest.json").read_text())["body"]["state"]
                   for name in ("one", "two"))
    return pa.concat_tables([pa.Table.from_batches(got, schema=rest.schema), rest]), with_cut


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_a_cut_run_restored_twice_equals_the_sequential_run(data: st.DataObject, tmp_path_factory) -> None:
    seed = data.draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    inputs = [clicks(rng, int(rng.integers(0, 6000))) for _ in range(data.draw(st.integers(1, 3)))]
    steps = data.draw(st.lists(st.sampled_from(sorted(STEPS)), min_size=0, max_size=5, unique=True))
    last = data.draw(st.sampled_from(list(LAST)))
    expected = query(inputs, steps, last).run(threads=1).to_arrow()
    first = options(data.draw)
    take = (data.draw(st.integers(0, 6)), data.draw(st.integers(0, 4)))
    got, with_cut = cut_and_restore(query(inputs, steps, last), inputs, first, {}, take,
                                    tmp_path_factory.mktemp("cut"))
    assert with_cut  # every operator here saves its state: no replay
    assert got.equals(expected), (steps, last, first, take)


def test_a_graph_with_two_outputs_and_two_sources_restores_from_its_cut(tmp_path: Path) -> None:
    rng = np.random.default_rng(5)
    a = [clicks(rng, 4000), clicks(rng, 3000)]
    b = [clicks(rng, 2500)]

    def outputs() -> dict[str, po.Pipeline]:
        shared = po.Pipeline(a, time="t").filter(col("price") > 2).sessionize("user", gap=40)
        other = po.Pipeline(b, time="t").lag("user", ["price"])
        return {"runs": shared.running(["user", "session"], {"n": po.count()}), "firsts": shared.dedupe("user"),
                "both": po.union(shared.select("t", "user"), other.select("t", "user"))}

    expected = po.run(outputs(), threads=1).to_arrow()
    result = po.run(outputs(), threads=2, max_inflight=2)
    got: dict[str, list[pa.RecordBatch]] = {name: [] for name in expected}
    for name in expected:  # a batch of each output, then the cut
        got[name] += list(itertools.islice(iter(result[name]), 1))
    result.checkpoint(tmp_path / "snap")
    result.close()
    assert "cut" in json.loads((tmp_path / "snap" / "manifest.json").read_text())["body"]["state"]
    rest = po.restore(tmp_path / "snap", inputs=[a, b]).to_arrow()
    for name, table in expected.items():
        assert pa.concat_tables([pa.Table.from_batches(got[name], schema=table.schema), rest[name]]).equals(table)


def test_parquet_inputs_are_read_on_from_the_row_group_of_the_cut(tmp_path: Path, monkeypatch) -> None:
    import pyarrow_ops.io

    monkeypatch.setattr(pyarrow_ops.io, "PARQUET_BATCH_ROWS", 700)  # batches smaller than the files
    rng = np.random.default_rng(9)
    tables = [clicks(rng, 20000), clicks(rng, 15000)]
    files = []
    for i, t in enumerate(tables):
        pq.write_table(t, tmp_path / f"in{i}.parquet", row_group_size=1000)
        files.append(tmp_path / f"in{i}.parquet")
    q = query(files, ["filter", "sessionize", "running"])
    expected = q.run().to_arrow()
    result = q.run(threads=2, max_inflight=2, batch_size=700)
    head = list(itertools.islice(iter(result), 3))
    result.checkpoint(tmp_path / "snap")
    result.close()
    state = json.loads((tmp_path / "snap" / "manifest.json").read_text())["body"]["state"]
    assert "cut" in state and 0 < sum(map(sum, state["cut"]["rows"])) < 35000
    rest = po.restore(tmp_path / "snap", inputs=files).to_arrow()
    assert pa.concat_tables([pa.Table.from_batches(head, schema=rest.schema), rest]).equals(expected)


@pytest.mark.parametrize("asof", [True, False])
def test_joins_restore_from_their_cut(asof: bool, tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    left, right = [clicks(rng, 6000)], [clicks(rng, 4000), clicks(rng, 2000)]

    def q() -> po.Pipeline:
        p = po.Pipeline(left, time="t").sessionize("user", gap=30)
        other = po.Pipeline(right, time="t").select("t", "user", "price").filter(col("price") > 1)
        return p.join_asof(other, by="user", tolerance=200) if asof else p.join(other, on="user", within=(-40, 25),
                                                                             how="left")

    expected = q().run().to_arrow()
    for take in (0, 1, 3):
        got, with_cut = cut_and_restore(q(), [left, right], {"threads": 2, "max_inflight": 2, "batch_size": 500},
                                        {}, (take, 2), tmp_path / str(take))
        assert with_cut
        assert got.equals(expected)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_disordered_inputs_restore_from_a_cut_of_their_lateness_buffers(data: st.DataObject, tmp_path_factory) -> None:
    # Each input out of order within the bound (a few rows beyond it, dropped): the cut holds each
    # buffer's rows and watermark, the rows it had released that the merge had not taken, and
    # the late rows counted; the restored runs give the rows and late counts of the whole run.
    from benchmarks.lateness import arrival_within

    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    bound = data.draw(st.integers(0, 30))
    inputs = []
    for _ in range(data.draw(st.integers(1, 3))):
        t = clicks(rng, int(rng.integers(0, 4000)))
        times = np.sort(t["t"].to_numpy())
        times = times[arrival_within(times, bound)] if len(times) else times
        times[rng.random(len(times)) < 0.01] -= 3 * bound + 5
        # In chunks, so that the buffers take their input a chunk at a time and both cuts fall
        # inside it (a table of one chunk is taken whole at once).
        chunked = t.set_column(0, "t", pa.array(times)).to_batches(max_chunksize=int(rng.integers(50, 700)))
        inputs.append(pa.Table.from_batches(chunked, schema=t.schema))
    steps = data.draw(st.lists(st.sampled_from(sorted(STEPS)), min_size=0, max_size=3, unique=True))
    last = data.draw(st.sampled_from([None, "tumbling", "sessions", "top_k"]))
    late = data.draw(st.sampled_from(["drop", "side"]))

    def q() -> po.Pipeline:
        p = po.Pipeline(inputs, time="t", lateness=bound, late=late)
        for step in steps:
            p = STEPS[step](p)
        return LAST[last](p)

    whole = q().run(threads=1)
    expected = whole.to_arrow()
    take = (data.draw(st.integers(0, 5)), data.draw(st.integers(0, 3)))
    path = tmp_path_factory.mktemp("late")
    final: list = []
    got, with_cut = cut_and_restore(q(), inputs, options(data.draw), {}, take, path, final)
    rest = final[0]
    assert with_cut
    for name in ("one", "two"):  # each cut counts rows of the inputs as given: never more than they have
        rows = json.loads((path / name / "manifest.json").read_text())["body"]["state"]["cut"]["rows"]
        assert all(n <= t.num_rows for n, t in zip([n for per in rows for n in per], inputs))
    assert got.equals(expected)
    assert rest.late_counts == whole.late_counts
    if late == "side":  # the late rows kept before the cuts and after
        assert rest.late.equals(whole.late)


def test_journaled_live_inputs_are_read_on_from_the_cut(tmp_path: Path) -> None:
    # The restore replays each journal less the rows the cut had read (their state is in the
    # operators), the producers push on from each input's position.
    import threading

    rng = np.random.default_rng(6)
    tables = [clicks(rng, int(rng.integers(500, 3000))) for _ in range(3)]
    schema = tables[0].schema
    q = lambda inputs: query(inputs, ["filter", "sessionize", "running"])  # noqa: E731
    expected = q(tables).run().to_arrow()

    def run(lives: list[po.LiveInput], result: po.PipelineResult, **write: object) -> None:
        def produce(live: po.LiveInput, table: pa.Table) -> None:
            for batch in table.slice(live.position).to_batches(max_chunksize=97):
                live.push(batch)
                live.heartbeat(batch.column(0)[-1].as_py())
            if not live.closed:  # a restore from a snapshot taken after its close
                live.close()

        producers = [threading.Thread(target=produce, args=(x, t)) for x, t in zip(lives, tables)]
        for p in producers:
            p.start()
        result.write_ipc(tmp_path / "out.arrow", rows_per_batch=100, **write)
        for p in producers:
            p.join()

    lives = [po.LiveInput(schema, max_batches=3, journal=tmp_path / f"j{i}") for i in range(3)]
    run(lives, q(lives).run(threads=2, batch_size=100), checkpoint_dir=tmp_path / "ck",
        checkpoint_every=sum(t.num_rows for t in tables) // 5, keep_checkpoints=100)
    whole = (tmp_path / "out.arrow").read_bytes()
    assert pa.ipc.open_stream(whole).read_all().equals(expected)
    snapshots = sorted(p for p in (tmp_path / "ck").iterdir() if p.name.isdigit())
    assert snapshots and all("cut" in json.loads((s / "manifest.json").read_text())["body"]["state"]
                             for s in snapshots)
    for s in snapshots:
        again = [po.LiveInput(schema, journal=tmp_path / f"j{i}") for i in range(3)]
        run(again, po.restore(s, inputs=again))
        assert (tmp_path / "out.arrow").read_bytes() == whole
