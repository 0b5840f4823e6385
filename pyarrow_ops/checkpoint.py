"""Checkpoints: the snapshot format, its directory of periodic snapshots, and :func:`restore`.

A snapshot is a directory: ``manifest.json`` (format name, version, kind of run, the query, the
state as JSON, and every other file's size and SHA-256) and the state's tables as Arrow IPC files
(plus ``query.pickle`` for pipelines, whose expressions are Python objects). docs/checkpoints.md
describes the format, what each kind of run saves, and the rules that make a restore exact.

A snapshot appears whole or not at all: it is written into a hidden directory next to its place,
every file fsynced, then renamed into place (and the parent fsynced), so a process killed while
writing leaves the previous snapshot as the latest. Reading checks the format, the version and
every file's size and hash before anything runs; a snapshot that fails any check is refused with
a :class:`CheckpointError` naming the file and what is wrong.

>>> import pyarrow as pa, pyarrow_ops as po, tempfile
>>> schema = pa.schema([("t", pa.int64()), ("v", pa.float64())])
>>> live = po.live_aggregate(schema, 1, time="t", window=po.tumbling(10), aggs={"sum": po.sum("v")},
...                          checkpointable=True)
>>> live.push(0, pa.record_batch({"t": [1, 2, 11], "v": [1.0, 2.0, 3.0]}, schema=schema))
>>> path = live.checkpoint(tempfile.mkdtemp() + "/snapshot")
>>> live.cancel()
>>> again = po.restore(path)          # a new process would do the same
>>> again.positions                   # rows each input had given: push from there
[3]
>>> again.push(0, pa.record_batch({"t": [25], "v": [4.0]}, schema=schema)); again.close(0)
>>> [(r["window_start"], r["sum"]) for b in again for r in b.to_pylist()]
[(0, 3.0), (10, 3.0), (20, 4.0)]
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import shutil
import time as time_module
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa

from pyarrow_ops.errors import PyArrowOpsError

FORMAT = "pyarrow-ops checkpoint"
VERSION = 3
"""The snapshot format this version writes. 2 added a live aggregation's window states
(``states.arrow``); a version-1 snapshot (its open windows as rows alone) restores as it did.
3 added a pipeline or graph run's operator states (``cut``); a version-2 snapshot of a run
restores by replay, as it did."""
READS = (1, 2, 3)
"""The versions this version reads; a snapshot of another is refused, naming both."""
KINDS = ("live_aggregate", "pipeline", "graph")
_MANIFEST = "manifest.json"


class CheckpointError(PyArrowOpsError, ValueError):
    """A snapshot that cannot be used: missing, of another format or version, corrupted or
    truncated (named with the file and what is wrong), or a query that cannot be saved."""


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _body_digest(body: Mapping[str, Any]) -> str:
    return _digest(json.dumps(body, sort_keys=True, separators=(",", ":")).encode())


def _write_file(path: Path, content: pa.Table | bytes) -> dict[str, Any]:
    """Writes a table (as an Arrow IPC file, streamed: no copy of it in memory) or bytes, fsyncs
    it, and returns its size and SHA-256."""
    if isinstance(content, pa.Table):
        with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, content.schema) as writer:
            writer.write_table(content)
    else:
        path.write_bytes(content)
    digest, size = hashlib.sha256(), 0
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
            size += len(chunk)
        os.fsync(f.fileno())
    return {"bytes": size, "sha256": digest.hexdigest()}


def write(path: str | os.PathLike[str], kind: str, query: Mapping[str, Any], state: Mapping[str, Any],
          tables: Mapping[str, pa.Table], blobs: Mapping[str, bytes] | None = None) -> Path:
    """Writes a snapshot at ``path`` atomically (replacing one there); returns its path."""
    assert kind in KINDS
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".{path.name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    tmp.mkdir()
    contents: dict[str, pa.Table | bytes] = {f"{name}.arrow": t for name, t in tables.items()}
    contents.update(blobs or {})
    files = {name: _write_file(tmp / name, data) for name, data in contents.items()}
    body = {"format": FORMAT, "version": VERSION, "kind": kind,
            "created": dt.datetime.now(dt.timezone.utc).isoformat(), "query": query, "state": state, "files": files}
    with open(tmp / _MANIFEST, "w") as f:
        json.dump({"body": body, "sha256": _body_digest(body)}, f, indent=1, sort_keys=True)
        f.flush()
        os.fsync(f.fileno())
    _fsync_dir(tmp)
    old = None
    if path.exists():
        old = path.parent / f".{path.name}.old-{uuid.uuid4().hex[:8]}"
        path.rename(old)
    tmp.rename(path)
    _fsync_dir(path.parent)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
    return path


class Snapshot:
    """A snapshot read and checked whole: ``kind``, ``query``, ``state``, and its tables."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        manifest = self.path / _MANIFEST
        if not manifest.is_file():
            raise CheckpointError(f"{self.path} is not a checkpoint: it has no {_MANIFEST}")
        try:
            outer = json.loads(manifest.read_text())
            body, digest = outer["body"], outer["sha256"]
        except (ValueError, KeyError, TypeError) as e:
            raise CheckpointError(f"{manifest} is corrupted or truncated (not the manifest's JSON: {e}); "
                                  "nothing was restored") from None
        if _body_digest(body) != digest:
            raise CheckpointError(f"{manifest} is corrupted: its contents do not match its SHA-256; nothing was restored")
        if body.get("format") != FORMAT:
            raise CheckpointError(f"{self.path} is not a pyarrow-ops checkpoint (format {body.get('format')!r})")
        if body.get("version") not in READS:
            raise CheckpointError(
                f"{self.path} has checkpoint format version {body.get('version')!r}; this pyarrow-ops reads versions "
                f"{', '.join(map(str, READS))}. Restore it with the pyarrow-ops that wrote it, or start the run again")
        if body.get("kind") not in KINDS:
            raise CheckpointError(f"{manifest} names an unknown kind of run {body.get('kind')!r}")
        self._data: dict[str, bytes] = {}
        for name, meta in body["files"].items():
            file = self.path / name
            if not file.is_file():
                raise CheckpointError(f"{file} is missing from the checkpoint; nothing was restored")
            data = file.read_bytes()
            if len(data) != meta["bytes"]:
                raise CheckpointError(f"{file} is truncated or corrupted: {len(data)} bytes where the manifest "
                                      f"says {meta['bytes']}; nothing was restored")
            if _digest(data) != meta["sha256"]:
                raise CheckpointError(f"{file} is corrupted: its SHA-256 differs from the manifest's; nothing was restored")
            self._data[name] = data
        self.kind: str = body["kind"]
        self.query: dict[str, Any] = body["query"]
        self.state: dict[str, Any] = body["state"]
        self.created: str = body["created"]

    def has(self, name: str) -> bool:
        return f"{name}.arrow" in self._data

    def table(self, name: str) -> pa.Table:
        return pa.ipc.open_file(pa.py_buffer(self._data[f"{name}.arrow"])).read_all()

    def blob(self, name: str) -> bytes:
        return self._data[name]

    def __repr__(self) -> str:
        return f"<pyarrow_ops checkpoint {self.kind} at {self.path} ({self.created})>"


def _numbered(directory: Path) -> list[Path]:
    return sorted((p for p in directory.iterdir() if p.is_dir() and p.name.isdigit()), key=lambda p: int(p.name))


def latest(path: str | os.PathLike[str]) -> Path:
    """``path`` itself if it is a snapshot, else the newest snapshot in the checkpoint directory
    ``path``. The newest is taken even if damaged (its check refuses it): an older one is restored
    only when asked for by its own path."""
    path = Path(path)
    if (path / _MANIFEST).exists():
        return path
    if not path.is_dir():
        raise CheckpointError(f"no checkpoint at {path}: no such directory")
    found = _numbered(path)
    if not found:
        raise CheckpointError(f"no checkpoint in {path}: it holds no snapshot")
    return found[-1]


class Periodic:
    """``checkpoint_every`` and ``checkpoint_dir``: when a snapshot is due (every so many tuples,
    or a timedelta of ``clock``), where it goes (numbered directories), keeping the last ``keep``."""

    def __init__(self, directory: str | os.PathLike[str] | None, every: int | dt.timedelta | None, keep: int = 3,
                 clock: Callable[[], float] | None = None, sequence: int = 0) -> None:
        if every is not None and directory is None:
            raise ValueError("checkpoint_every needs checkpoint_dir: where the snapshots go")
        if every is not None and not (isinstance(every, dt.timedelta) and every.total_seconds() > 0
                                      or isinstance(every, int) and not isinstance(every, bool) and every > 0):
            raise ValueError(f"checkpoint_every must be a positive int (tuples) or timedelta, got {every!r}")
        if isinstance(keep, bool) or not isinstance(keep, int) or keep < 1:
            raise ValueError(f"keep_checkpoints must be an int >= 1, got {keep!r}")
        self.directory = None if directory is None else Path(directory)
        self.every, self.keep = every, keep
        self._clock = clock or time_module.monotonic
        self._since = 0
        self._last = self._clock()
        self.sequence = sequence
        if self.directory is not None:
            self.directory.mkdir(parents=True, exist_ok=True)
            if sequence == 0 and _numbered(self.directory):
                self.sequence = int(_numbered(self.directory)[-1].name)

    def add(self, tuples: int) -> bool:
        """Counts ``tuples``; True when a snapshot is due."""
        if self.every is None:
            return False
        self._since += tuples
        if isinstance(self.every, int):
            return self._since >= self.every
        return self._clock() - self._last >= self.every.total_seconds()

    def next_path(self) -> Path:
        assert self.directory is not None
        self.sequence += 1
        return self.directory / f"{self.sequence:08d}"

    def written(self) -> None:
        """After a snapshot: restart the count, remove snapshots beyond ``keep`` and leftovers of
        writes that were killed."""
        self._since, self._last = 0, self._clock()
        assert self.directory is not None
        for old in _numbered(self.directory)[:-self.keep]:
            shutil.rmtree(old, ignore_errors=True)
        for p in self.directory.iterdir():
            if p.name.startswith(".") and (".tmp-" in p.name or ".old-" in p.name) and str(os.getpid()) not in p.name:
                shutil.rmtree(p, ignore_errors=True)


def restore(path: str | os.PathLike[str], inputs: Any = None, *, clock: Callable[[], float] | None = None) -> Any:
    """Resumes a run from a checkpoint: ``path`` is a snapshot or a checkpoint directory (its
    newest snapshot).

    - A live aggregation: returns the :class:`LiveAggregate`, its windows as they were; push
      each input from ``positions[i]`` on (``inputs`` is not used; ``clock``: as for
      :func:`pyarrow_ops.live_aggregate`).
    - A pipeline or graph run: ``inputs`` are the run's inputs again (replayable: tables, files,
      and for a ``LiveInput(journal=dir)`` a new one on the same journal, whose producer pushes on
      from its ``position``; for a graph, one list per source in the order of the first run); returns the
      :class:`PipelineResult` (:class:`GraphResult`) that continues after the rows that had left,
      whose ``write_ipc`` / ``write_parquet`` resume the output file.

    Raises :class:`CheckpointError` for a damaged snapshot or another format version; nothing runs."""
    snapshot = Snapshot(latest(path))
    if snapshot.kind == "live_aggregate":
        from pyarrow_ops.streaming import LiveAggregate

        return LiveAggregate._restore(snapshot, clock=clock)
    from pyarrow_ops.replay import restore as restore_run

    if inputs is None:
        raise CheckpointError(f"{snapshot.path} is a {snapshot.kind} run: restore it with inputs=, the run's inputs again")
    return restore_run(snapshot, inputs)
