"""The journal of a :class:`LiveInput`: what was pushed into it, kept on disk so that a pipeline or
graph run over it can be checkpointed and restored exactly (docs/checkpoints.md, "Live inputs").

A pipeline's output is a function of its inputs' rows (and, with ``lateness=``, of where the
heartbeats fell among them), so a run over live inputs is restored as one over tables is: its
query runs again over the same items and drops the output rows that had already left. A table can
be read again; a live input's items cannot, unless they were written down as they came. The
journal writes them down: every pushed batch, and every heartbeat (the input's own and those
``idle_timeout`` gave it) as a batch of no rows carrying its time, in push order, before the
engine can read them. A snapshot records, per journaled input, how many items of which segment
files it held (fsynced first); a restore reads exactly those items back into the new
:class:`LiveInput` before anything pushed to it, and the producer pushes on from
``LiveInput.position``, the rows the journal held.

On disk: a directory holding ``journal.json`` (format, version, the journal's id, which a snapshot
names so a restore from another journal is refused) and segments ``00000001.arrow``, ... Each
segment is an Arrow IPC stream of the input's schema, written by one run (a restored run starts a
new one: a restore never rewrites what an older snapshot may name). Items after the last
snapshot's count (pushed after it, before a kill) are never read. The journal holds the whole
input, since a restore reads it from the start: it grows with the stream (saving the operators'
state instead is the next step, for runs too long to read again).
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa

from pyarrow_ops.checkpoint import CheckpointError

FORMAT = "pyarrow-ops journal"
VERSION = 1
_META = "journal.json"
_HEARTBEAT = b"pyarrow_ops.heartbeat"


class Journal:
    """The segments of one live input's journal. Not thread-safe: its LiveInput calls it under its
    own lock, in push order."""

    def __init__(self, directory: str | os.PathLike[str], schema: pa.Schema) -> None:
        self.directory = Path(directory)
        self.schema = schema
        meta = self.directory / _META
        if not meta.exists():
            self.directory.mkdir(parents=True, exist_ok=True)
            tmp = self.directory / f".{_META}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}"
            with open(tmp, "w") as f:
                json.dump({"format": FORMAT, "version": VERSION, "id": uuid.uuid4().hex}, f)
                f.flush()
                os.fsync(f.fileno())
            try:
                os.link(tmp, meta)  # whole or absent; of two inputs starting one journal, one wins
            except FileExistsError:
                pass
            finally:
                tmp.unlink()
        try:
            body = json.loads(meta.read_text())
            self.id = str(body["id"])
            format_, version = body["format"], body["version"]
        except (ValueError, KeyError, TypeError) as e:
            raise CheckpointError(f"{meta} is corrupted ({e}): not a pyarrow-ops journal") from None
        if format_ != FORMAT or version != VERSION:
            raise CheckpointError(f"{self.directory} holds a journal of format {format_!r} version {version!r}; "
                                  f"this pyarrow-ops writes and reads {FORMAT!r} version {VERSION}")
        # The segments this run's items lie in, with the items of each: [name, items], the last
        # one being written (once the run writes).
        self.segments: list[list[Any]] = []
        self._file: Any = None
        self._writer: pa.ipc.RecordBatchStreamWriter | None = None
        # A write that failed (a full disk) may have left part of an item: nothing may follow it in
        # the segment, so every later write and snapshot is refused with that error.
        self._failed: BaseException | None = None

    def _open_segment(self) -> None:
        numbers = [int(p.stem) for p in self.directory.glob("*.arrow") if p.stem.isdigit()]
        number = max(numbers, default=0) + 1
        while True:
            name = f"{number:08d}.arrow"
            try:
                # Unbuffered: every item is in the file (the page cache) when write() returns, so a
                # killed process leaves each item it wrote whole; sync() makes them durable for a
                # snapshot. Created exclusively: another input writing to the same directory takes
                # the next number (a snapshot names each input's own segments, so they never mix).
                self._file = open(self.directory / name, "xb", buffering=0)  # noqa: SIM115 (closed in close())
                break
            except FileExistsError:
                number += 1
        self._writer = pa.ipc.new_stream(self._file, self.schema)
        self.segments.append([name, 0])

    def write(self, batch: pa.RecordBatch) -> None:
        self._append(batch, None)

    def heartbeat(self, value: int) -> None:
        self._append(pa.RecordBatch.from_pylist([], schema=self.schema), {_HEARTBEAT: str(value).encode()})

    def _append(self, batch: pa.RecordBatch, metadata: dict[bytes, bytes] | None) -> None:
        self._refuse_if_failed()
        try:
            if self._writer is None:
                self._open_segment()
            assert self._writer is not None
            self._writer.write_batch(batch, custom_metadata=metadata)
        except Exception as e:
            self._failed = e
            raise
        self.segments[-1][1] += 1  # counted once whole: a snapshot never names a part

    def _refuse_if_failed(self) -> None:
        if self._failed is not None:
            raise CheckpointError(f"the journal at {self.directory} failed to write an item earlier "
                                  f"({self._failed}); nothing more can be written down after it")

    def sync(self) -> dict[str, Any]:
        """Makes every item written so far durable and returns what a snapshot records."""
        self._refuse_if_failed()
        if self._file is not None and not self._file.closed:  # a closed segment was fsynced by close()
            os.fsync(self._file.fileno())
        return {"id": self.id, "segments": [list(s) for s in self.segments]}

    def check(self, saved: dict[str, Any]) -> None:
        """Refuses (CheckpointError) a snapshot's record that this journal cannot replay whole."""
        if saved.get("id") != self.id:
            raise CheckpointError(f"the journal at {self.directory} is not the one this snapshot's input wrote "
                                  f"(journal {self.id}, the snapshot names {saved.get('id')}); nothing was restored")
        for name, items in saved["segments"]:
            if not (self.directory / name).is_file():
                raise CheckpointError(f"{self.directory / name} is missing from the journal; nothing was restored")
            try:  # checked before the run starts: the counted items must all be there, whole
                for _ in self._read(name, items):
                    pass
            except (pa.ArrowInvalid, OSError) as e:
                raise CheckpointError(f"{self.directory / name} is truncated or corrupted: it does not hold the "
                                      f"{items} items the snapshot counts ({e}); nothing was restored") from None

    def resume(self, saved: dict[str, Any]) -> Iterator[pa.RecordBatch | int]:
        """The items a snapshot recorded (check() passed), read back lazily: batches, and
        heartbeats as ints. This run's own items go to a new segment after them."""
        self.segments = [list(s) for s in saved["segments"]]
        return (item for name, items in list(self.segments) for item in self._read(name, items))

    def _read(self, name: str, items: int) -> Iterator[pa.RecordBatch | int]:
        """The first `items` items of segment `name`."""
        if items == 0:
            return
        with pa.OSFile(str(self.directory / name)) as f:
            reader = pa.ipc.open_stream(f)
            for k in range(items):
                try:
                    batch, meta = reader.read_next_batch_with_custom_metadata()
                except StopIteration:  # the stream ends early (inside a generator it would be a RuntimeError)
                    raise pa.ArrowInvalid(f"the segment ends after {k} items") from None
                yield int(meta[_HEARTBEAT]) if meta is not None and _HEARTBEAT in meta else batch

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            os.fsync(self._file.fileno())
            self._file.close()
            self._writer = None
