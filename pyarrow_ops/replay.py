"""Checkpoints of pipeline and graph runs: output positions and the committing file sink; restore
by replay (docs/checkpoints.md).

A pipeline's output is a function of its inputs alone (every option gives the identical, ordered
result), so the rows each output has produced are determined by how many have left. A snapshot
records, per output, the rows that had left and its file's committed state, and the query itself
(pickled, with each source's inputs left out); a restore runs the query again over the same
inputs and drops each output's first rows up to that count. Nothing is lost or repeated, whatever
the thread counts, batch sizes or timing of the two runs.

Where it can, a snapshot also holds a cut of the run (the engine's ``PipelineHandle.cut()``):
every operator's state after exactly the rows each input had given, the rows made of those that
had not left yet, and how far each input was read. A restore from it reads each input from there
on (a table sliced, a Parquet file from its row group, a journaled live input's journal less the
rows read; each lateness buffer rebuilt from its saved rows) and skips nothing: the run goes on,
its cost that of the rest. Runs with ``late="side"`` are restored by replay: the query again over
the inputs from their start, each output dropping its first rows up to the count; that suits
replayable inputs (files, tables, and live inputs written down by their journals,
pyarrow_ops/journal.py) and costs a pass over what came before.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import io
import os
import pickle
import threading
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa

from pyarrow_ops import _engine
from pyarrow_ops.checkpoint import CheckpointError, Periodic, Snapshot
from pyarrow_ops.checkpoint import write as write_snapshot
from pyarrow_ops.io import as_input_list
from pyarrow_ops.sink import FileSink


class Output:
    """One output's progress (under ``lock``): rows that have left, rows a restored run still
    drops (those that had left before its snapshot), and its sink."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.left = 0
        self.skip = 0
        self.sink: FileSink | None = None
        self.resume: tuple[dict[str, Any], pa.Table] | None = None

    def drop_seen(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        if self.skip == 0:
            return batch
        drop = min(self.skip, batch.num_rows)
        self.skip -= drop
        return batch.slice(drop)


class RunSpec:
    """What a restore needs to run the query again: "pipeline" or "graph", the outputs, the
    run's options, and (once writing) where and how often to checkpoint."""

    def __init__(self, kind: str, outputs: Mapping[str, Any], options: dict[str, Any]) -> None:
        self.kind, self.outputs, self.options = kind, dict(outputs), options
        self.periodic: Periodic | None = None
        self.writing: dict[str, Any] = {}

    def pickled(self) -> bytes:
        """The outputs and options, each source's input list saved as its index."""
        from pyarrow_ops.pipeline import _Graph

        graph = _Graph(self.outputs)
        sources = {id(inputs): k for k, inputs in enumerate(graph.inputs)}

        class Pickler(pickle.Pickler):
            def persistent_id(self, obj: Any) -> Any:
                return ("source", sources[id(obj)]) if isinstance(obj, list) and id(obj) in sources else None

        buffer = io.BytesIO()
        try:
            Pickler(buffer).dump((self.outputs, {k: v for k, v in self.options.items() if k != "experiment"}))
        except (pickle.PicklingError, AttributeError, TypeError) as e:
            raise CheckpointError(f"this query cannot be saved for a checkpoint ({e}): a map_batches function "
                                  "must be importable by name (not a lambda or a local function)") from None
        return buffer.getvalue()


def _unpickled(blob: bytes, inputs: Any, sources: int) -> tuple[dict[str, Any], dict[str, Any]]:
    if sources == 1 and not (isinstance(inputs, (list, tuple)) and inputs and all(
            isinstance(x, (list, tuple)) for x in inputs)):
        inputs = [inputs]
    inputs = list(inputs)
    if len(inputs) != sources:
        raise CheckpointError(f"this run read {sources} sources; restore it with inputs= one list of inputs per "
                              f"source, in the order of the first run (got {len(inputs)})")
    lists = [as_input_list(x) for x in inputs]

    class Unpickler(pickle.Unpickler):
        def persistent_load(self, pid: Any) -> Any:
            return lists[pid[1]]

    return Unpickler(io.BytesIO(blob)).load()


def write(results: Mapping[str, Any], spec: RunSpec, paths: Mapping[str, Any], format: str, rows_per_batch: int,
          checkpoint_dir: str | os.PathLike[str] | None, checkpoint_every: int | dt.timedelta | None,
          keep_checkpoints: int, next_any: Any) -> None:
    """Reads every output of a run into its file, committing them with each checkpoint."""
    outputs = {name: r._output for name, r in results.items()}
    if any(o.resume is not None for o in outputs.values()):  # a restored run: resume its files
        saved = spec.writing
        if format != saved["format"] or (paths and {k: str(v) for k, v in paths.items()} != saved["paths"]):
            raise _engine.UsageError(f"this run was restored while writing {saved['format']} to {saved['paths']}; "
                                     "resume those (leave the paths out)")
        paths, rows_per_batch = saved["paths"], saved["rows_per_batch"]
        checkpoint_dir, keep_checkpoints = saved["checkpoint_dir"], saved["keep_checkpoints"]
        every = saved["checkpoint_every"]
        checkpoint_every = None if every is None else every.get("rows") or dt.timedelta(seconds=every["seconds"])
    if set(paths) != set(results):
        raise TypeError(f"give a path for each output: {sorted(results)}")
    spec.periodic = Periodic(checkpoint_dir, checkpoint_every, keep_checkpoints)
    spec.writing = {"format": format, "paths": {k: str(v) for k, v in paths.items()}, "rows_per_batch": rows_per_batch,
                    "checkpoint_dir": None if checkpoint_dir is None else os.fspath(checkpoint_dir),
                    "keep_checkpoints": keep_checkpoints,
                    "checkpoint_every": None if checkpoint_every is None else (
                        {"seconds": checkpoint_every.total_seconds()} if isinstance(checkpoint_every, dt.timedelta)
                        else {"rows": checkpoint_every})}
    names = list(results)
    for name, o in outputs.items():
        resume, pending = o.resume or (None, None)
        with o.lock:
            o.sink, o.resume = FileSink(paths[name], results[name].schema, format, rows_per_batch, resume,
                                        pending), None
    if all(o.sink.complete for o in outputs.values()):  # type: ignore[union-attr]
        for r in results.values():  # restored after it had finished: the files are whole
            r.close()
        return
    try:
        for index, batch in next_any:
            o = outputs[names[index]]
            batch = o.drop_seen(batch)
            with o.lock:
                o.sink.write(batch)  # type: ignore[union-attr]
                o.left += batch.num_rows
            if spec.periodic.add(batch.num_rows):
                checkpoint(results, spec, None)
        for o in outputs.values():
            with o.lock:
                o.sink.finish()  # type: ignore[union-attr]  (kept: a later snapshot records it complete)
    finally:
        for o in outputs.values():
            if o.sink is not None:
                o.sink.abandon()


def checkpoint(results: Mapping[str, Any], spec: RunSpec, path: str | os.PathLike[str] | None) -> Path:
    """A snapshot of a pipeline or graph run: per output, the rows that had left and its file;
    the run's cut where it has one. A periodic snapshot (``path`` None: write()'s) takes the cut's
    queued rows into the files first, so the snapshot holds none of them, only the operators'
    state; then the outputs' counts and files, then the journals (every row counted or cut came
    from items they hold by then: a live input writes an item down before the run can read it)."""
    outputs = {name: r._output for name, r in results.items()}
    periodic = path is None
    if periodic and (spec.periodic is None or spec.periodic.directory is None):
        raise TypeError("checkpoint() needs a path (this run writes no checkpoint_dir)")
    take = periodic and all(o.sink is not None for o in outputs.values())
    cut = _cut(results, spec, take=take)
    if cut is not None and take:
        for o, batches in zip(outputs.values(), cut["queued"], strict=True):
            with o.lock:
                for b in batches:
                    batch = pa.record_batch(b)
                    o.sink.write(batch)  # type: ignore[union-attr]
                    o.left += batch.num_rows
        cut["queued"] = [[] for _ in cut["queued"]]
    state: dict[str, Any] = {"outputs": {}}
    tables: dict[str, pa.Table] = {}
    for k, (name, o) in enumerate(outputs.items()):
        with o.lock:
            entry: dict[str, Any] = {"rows": o.left, "sink": None}
            if o.sink is not None:
                entry["sink"], tables[f"pending-{k}"] = o.sink.commit()
            elif o.resume is not None:  # restored, its file not yet resumed: as it was
                entry["sink"], tables[f"pending-{k}"] = o.resume
            state["outputs"][name] = entry
    state["journals"] = _journals(spec)
    if cut is not None:
        state["cut"] = _save_cut(cut, tables)
    query = {"kind": spec.kind, "names": list(outputs), "writing": spec.writing,
             "sources": len(_sources(spec))}
    written = write_snapshot(spec.periodic.next_path() if periodic else path,  # type: ignore[union-attr]
                             spec.kind, query, state, tables, {"query.pickle": spec.pickled()})
    if periodic:
        spec.periodic.written()  # type: ignore[union-attr]
    return written


def _cut(results: Mapping[str, Any], spec: RunSpec, take: bool) -> dict[str, Any] | None:
    """The engine's cut of the run (its operators' states), or None where a restore must replay:
    rows a replayed run still drops, an operator that cannot save. With ``late="side"``, the late
    rows kept up to the cut too (``late``: per source, a table), the logs locked around the cut so
    that a reader of ``result.late`` takes none in between."""
    from pyarrow_ops.pipeline import _Graph

    if any(r._output.skip for r in results.values()):
        return None
    graph = _Graph(spec.outputs)
    first = next(iter(results.values()))
    with_logs = [g for g, (lateness, late) in enumerate(graph.time_orders) if lateness is not None or late != "error"]
    side = {g: log for g, log in zip(with_logs, first._late_logs, strict=True) if log.policy == "side"}
    with contextlib.ExitStack() as locks:
        for log in side.values():
            locks.enter_context(log.lock)
        cut = first._handle.cut(take)
        if cut is None or not side:
            return cut
        untaken: dict[int, list[tuple[int, Any]]] = {g: [] for g in side}
        for (g, input), per in zip(cut["origin"], cut["inputs"], strict=True):
            for i, (state, _) in enumerate(per):
                if g in side and len(state) == 3:
                    untaken[g].append((input if input >= 0 else i, state[2]))
        cut["late"] = {g: log.kept(untaken[g]) for g, log in side.items()}
    return cut


def _save_cut(cut: dict[str, Any], tables: dict[str, pa.Table]) -> dict[str, Any]:
    """The cut's batches into ``tables`` (one table per operator state batch, per source's held
    rows, per output's queued rows); returns the rest, for the manifest."""
    def table(name: str, batches: list[Any]) -> int:
        batches = [pa.record_batch(b) for b in batches]
        if batches:
            tables[name] = pa.Table.from_batches(batches)
        return len(batches)

    states = [[table(f"cut-state-{i}-{j}", [b]) for j, b in enumerate(batches)] for i, batches in enumerate(cut["states"])]
    inputs = [[None if not state and not pending else
               [[table(f"cut-input-{k}-{i}-state-{j}", [b]) for j, b in enumerate(state)],
                table(f"cut-input-{k}-{i}-pending", pending)]
               for i, (state, pending) in enumerate(per)] for k, per in enumerate(cut["inputs"])]
    late = {}
    for g, kept in cut.get("late", {}).items():
        tables[f"cut-late-{g}"] = kept
        late[str(g)] = kept.num_rows
    return {"stages": cut["stages"], "finished": cut["finished"], "rows": cut["rows"], "inputs": inputs,
            "late": late, "origin": [list(o) for o in cut["origin"]], "states": [len(s) for s in states],
            "held": [table(f"cut-held-{k}", b) for k, b in enumerate(cut["held"])],
            "queued": [table(f"cut-queued-{o}", b) for o, b in enumerate(cut["queued"])]}


def _load_cut(snapshot: Snapshot) -> dict[str, Any]:
    saved = snapshot.state["cut"]

    def batches(name: str, count: int) -> list[pa.RecordBatch]:  # _save_cut's tables back
        if not count:
            return []
        t = snapshot.table(name)  # a table of no rows may come back without batches: give it one
        return t.to_batches() or [pa.RecordBatch.from_pylist([], schema=t.schema)]

    inputs = [[None if entry is None else
               ([b for j in range(len(entry[0])) for b in batches(f"cut-input-{k}-{i}-state-{j}", 1)],
                batches(f"cut-input-{k}-{i}-pending", entry[1]))
               for i, entry in enumerate(per)] for k, per in enumerate(saved.get("inputs", []))]
    late = {int(g): snapshot.table(f"cut-late-{g}") for g in saved.get("late", {})}
    return {"stages": saved["stages"], "finished": saved["finished"], "rows": saved["rows"], "inputs": inputs,
            "late": late, "origin": [tuple(o) for o in saved["origin"]],
            "states": [[b for j in range(n) for b in batches(f"cut-state-{i}-{j}", 1)]
                       for i, n in enumerate(saved["states"])],
            "held": [batches(f"cut-held-{k}", n) for k, n in enumerate(saved["held"])],
            "queued": [batches(f"cut-queued-{o}", n) for o, n in enumerate(saved["queued"])]}


def _restore_cut(snapshot: Snapshot, cut: dict[str, Any], outputs: dict[str, Any], options: dict[str, Any]) -> Any:
    """The run of ``snapshot`` going on from its cut: each input less the rows it had given."""
    from pyarrow_ops.experiment import NONE as NO_EXPERIMENT
    from pyarrow_ops.io import skip_rows
    from pyarrow_ops.live import LiveInput
    from pyarrow_ops.pipeline import GraphResult, _Graph, _run_graph
    from pyarrow_ops.run_options import options as engine_options

    lists = _Graph(outputs).inputs
    for (group, i), n in _cut_rows(cut, lists, snapshot).items():
        if not isinstance(lists[group][i], LiveInput):  # a live input skips them in its journal (_resume_journals)
            lists[group][i] = skip_rows(lists[group][i], n)
    o = dict(options)
    batch_size = o.pop("batch_size", 65536)
    engine = engine_options(o["threads"], o["scheduler"], o["reorder"], o["partitioning"], o["morsel"],
                            o["partitions"], o["reorder_capacity"], o["max_inflight"], o["slice_us"], NO_EXPERIMENT,
                            o["fuse"], o["push_down"], o["threading"])
    results = _run_graph(outputs, engine, batch_size, cut)
    if snapshot.kind == "pipeline":
        results["result"]._run = RunSpec("pipeline", outputs, options)
        return results["result"]
    return GraphResult(results, RunSpec("graph", outputs, options))


def _cut_rows(cut: dict[str, Any], lists: list[list[Any]], snapshot: Snapshot) -> dict[tuple[int, int], int]:
    """Per (source, input) of the query, the rows the cut had read of it."""
    out = {}
    for (group, input), rows in zip(cut["origin"], cut["rows"], strict=True):
        if not 0 <= group < len(lists):
            raise CheckpointError(f"{snapshot.path}: its cut does not fit the inputs of this query")
        picked = range(len(lists[group])) if input < 0 else [input]
        if len(rows) != len(picked):
            raise CheckpointError(f"{snapshot.path}: its cut does not fit the inputs of this query")
        out.update({(group, i): n for i, n in zip(picked, rows, strict=True)})
    return out


def input_states(cut: dict[str, Any] | None, group: int, inputs: int) -> dict[str, Any] | None:
    """For source ``group`` of a restored cut (lateness.within's ``resume``): ``inputs``, per input
    the (state, pending) of its lateness buffer or None, and ``late``, the late rows it kept
    (``late="side"``); None when it has no lateness buffers."""
    if cut is None or not cut.get("inputs"):
        return None
    out: list[Any] = [None] * inputs
    for (g, input), per in zip(cut["origin"], cut["inputs"], strict=True):
        for i, entry in enumerate(per):
            if g == group and entry is not None:
                out[input if input >= 0 else i] = entry
    if all(e is None for e in out):
        return None
    return {"inputs": out, "late": cut.get("late", {}).get(group)}


def _journals(spec: RunSpec) -> list[list[Any]]:
    """Per source, per input: a journaled live input's saved state (LiveInput._saved), else None."""
    from pyarrow_ops.live import LiveInput

    return [[item._saved() if isinstance(item, LiveInput) else None for item in inputs] for inputs in _sources(spec)]


def _resume_journals(saved: list[list[Any]], lists: list[list[Any]], skip: dict[tuple[int, int], int]) -> None:
    """Before the restored run starts: each journaled live input replays its journal first, less
    the rows a cut had read (``skip``). Every input is checked before any is changed."""
    from pyarrow_ops.live import LiveInput

    journaled = []
    for k, (states, inputs) in enumerate(zip(saved, lists, strict=True)):
        if len(states) != len(inputs):
            raise CheckpointError(f"source {k} of this run had {len(states)} inputs; restore it with as many "
                                  f"(got {len(inputs)})")
        for i, (state, item) in enumerate(zip(states, inputs, strict=True)):
            if state is None:
                continue
            if not isinstance(item, LiveInput):
                raise CheckpointError(f"input {i} of source {k} was a journaled LiveInput in this run: restore it "
                                      "with a LiveInput on the same journal (journal=)")
            item._check_resume(state)
            journaled.append((item, state, skip.get((k, i), 0)))
    for item, state, rows in journaled:
        item._resume(state, rows)


def _sources(spec: RunSpec) -> list[Any]:
    from pyarrow_ops.pipeline import _Graph

    return _Graph(spec.outputs).inputs


def restore(snapshot: Snapshot, inputs: Any) -> Any:
    """The run of ``snapshot`` again over ``inputs``, each output dropping the rows that had left."""
    outputs, options = _unpickled(snapshot.blob("query.pickle"), inputs, snapshot.query["sources"])
    from pyarrow_ops.pipeline import _Graph
    from pyarrow_ops.pipeline import run as run_graph

    cut = _load_cut(snapshot) if "cut" in snapshot.state else None
    if "journals" in snapshot.state:  # snapshots before journals had no live inputs
        lists = _Graph(outputs).inputs
        _resume_journals(snapshot.state["journals"], lists, _cut_rows(cut, lists, snapshot) if cut else {})

    if cut:
        result = _restore_cut(snapshot, cut, outputs, options)
        results = {"result": result} if snapshot.kind == "pipeline" else dict(result.items())
    elif snapshot.kind == "pipeline":
        result = outputs["result"].run(**options)
        results = {"result": result}
    else:
        result = run_graph(outputs, **options)
        results = dict(result.items())
    spec = results[next(iter(results))]._run
    spec.writing = snapshot.query["writing"]
    for k, (name, r) in enumerate(results.items()):
        saved = snapshot.state["outputs"][name]
        r._output.left = saved["rows"]
        r._output.skip = 0 if cut else saved["rows"]  # a cut's rows to come start where the first run's left
        if saved["sink"] is not None:
            r._output.resume = (saved["sink"], snapshot.table(f"pending-{k}"))
    return result


def iterate(result: Any) -> Iterator[pa.RecordBatch]:
    """A pipeline result's batches, less those a restore drops, counted as they leave."""
    o: Output = result._output
    native = result._native
    while (batch := native.next_batch()) is not None:
        batch = o.drop_seen(pa.record_batch(batch))
        if batch.num_rows:
            with o.lock:
                o.left += batch.num_rows
            yield batch
    native.close()


def one_output(native: Any) -> Iterable[tuple[int, pa.RecordBatch]]:
    while (batch := native.next_batch()) is not None:
        yield 0, pa.record_batch(batch)
    native.close()


def any_output(handle: Any) -> Iterable[tuple[int, pa.RecordBatch]]:
    while (item := handle.next_any()) is not None:
        index, batch = item
        if batch is not None:
            yield index, pa.record_batch(batch)
