"""A file sink that commits output in step with checkpoints: ``write_ipc`` and ``write_parquet``.

The file's bytes depend on the rows alone, never on how the engine batched them: rows are cut
into batches of ``rows_per_batch`` (the last one shorter), so a run killed and restored writes
the same bytes as one never interrupted. While the run goes, the sink appends whole batches to
an Arrow IPC stream (the output file for ``write_ipc``; ``<path>.spool`` for ``write_parquet``,
which becomes the Parquet file when the run ends). A checkpoint fsyncs that stream and records
its length and the rows of the unfinished batch (those go into the snapshot, not the file); a
restore cuts the stream back to the recorded length and takes the unfinished rows back, so
whatever was appended after the checkpoint is written again exactly once.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pyarrow as pa

_EOS = b"\xff\xff\xff\xff\x00\x00\x00\x00"  # the IPC stream's end-of-stream marker
FORMATS = ("ipc", "parquet")


class FileSink:
    """Writes a run's rows to ``path`` as ``format`` ("ipc": an Arrow IPC stream; "parquet")."""

    def __init__(self, path: str | os.PathLike[str], schema: pa.Schema, format: str, rows_per_batch: int = 65536,
                 resume: dict[str, Any] | None = None, pending: pa.Table | None = None) -> None:
        if format not in FORMATS:
            raise ValueError(f"format must be one of {FORMATS}, got {format!r}")
        if isinstance(rows_per_batch, bool) or not isinstance(rows_per_batch, int) or rows_per_batch < 1:
            raise ValueError(f"rows_per_batch must be a positive int, got {rows_per_batch!r}")
        self.path = Path(path)
        self.format = format
        self.schema = schema
        self.rows_per_batch = rows_per_batch
        self._stream_path = self.path if format == "ipc" else self.path.with_name(self.path.name + ".spool")
        self._pending: list[pa.RecordBatch] = []
        self._pending_rows = 0
        # A restore of a run whose file had been finished when its snapshot was taken, or (Parquet)
        # finished after it: the spool was removed after the file was renamed into place
        # (atomically), so the file is whole; nothing is left to write.
        self.complete = resume is not None and (resume.get("complete", False) or (
            format == "parquet" and not self._stream_path.exists() and self.path.exists()))
        if self.complete:
            self.rows = resume["rows"]  # type: ignore[index]
        elif resume is None:
            self._file = open(self._stream_path, "wb")
            self._file.write(schema.serialize().to_pybytes())
            self.rows = 0  # rows in the file
        else:
            if not self._stream_path.exists() or self._stream_path.stat().st_size < resume["bytes"]:
                from pyarrow_ops.checkpoint import CheckpointError

                raise CheckpointError(f"the output {self._stream_path} is missing or shorter than the checkpoint "
                                      f"recorded ({resume['bytes']} bytes): it cannot be resumed")
            self._file = open(self._stream_path, "r+b")
            self._file.truncate(resume["bytes"])
            self._file.seek(resume["bytes"])
            self.rows = resume["rows"]
            if pending is not None and pending.num_rows:
                self._pending = pending.to_batches()
                self._pending_rows = pending.num_rows

    def write(self, batch: pa.RecordBatch) -> None:
        """Takes the next rows; appends every batch they complete."""
        if batch.num_rows == 0:
            return
        self._pending.append(batch)
        self._pending_rows += batch.num_rows
        while self._pending_rows >= self.rows_per_batch:
            table = pa.Table.from_batches(self._pending, schema=self.schema)
            self._append(table.slice(0, self.rows_per_batch))
            rest = table.slice(self.rows_per_batch)
            self._pending, self._pending_rows = rest.to_batches(), rest.num_rows

    def _append(self, table: pa.Table) -> None:
        if table.num_rows == 0:
            return
        # A copy into fresh buffers of exactly the rows' size: the IPC writer writes a string
        # column's whole character buffer and a validity bitmap's whole length, so a batch cut
        # from a larger one would carry bytes that depend on how the engine batched the rows.
        batch = table.take(pa.array(range(table.num_rows), pa.int64())).combine_chunks().to_batches()[0]
        self._file.write(batch.serialize().to_pybytes())
        self.rows += batch.num_rows

    @property
    def total_rows(self) -> int:
        """Rows taken: in the file and pending."""
        return self.rows + self._pending_rows

    def commit(self) -> tuple[dict[str, Any], pa.Table]:
        """For a checkpoint: makes the file durable; returns its state and the pending rows. Once
        the file is finished, that it is complete (a restore then writes nothing)."""
        if self.complete or self._file.closed:
            return ({"path": str(self.path), "format": self.format, "rows_per_batch": self.rows_per_batch,
                     "rows": self.rows, "complete": True}, pa.Table.from_batches([], schema=self.schema))
        self._file.flush()
        os.fsync(self._file.fileno())
        state = {"path": str(self.path), "format": self.format, "rows_per_batch": self.rows_per_batch,
                 "bytes": self._file.tell(), "rows": self.rows}
        return state, pa.Table.from_batches(self._pending, schema=self.schema)

    def finish(self) -> None:
        """The end of the run: the last rows, the end-of-stream marker, and (Parquet) the file."""
        if self.complete:
            return
        self._append(pa.Table.from_batches(self._pending, schema=self.schema))
        self._pending, self._pending_rows = [], 0
        self._file.write(_EOS)
        self._file.flush()
        os.fsync(self._file.fileno())
        self._file.close()
        if self.format == "parquet":
            import pyarrow.parquet as pq

            tmp = self.path.with_name(self.path.name + ".tmp")
            with pa.ipc.open_stream(self._stream_path) as reader, \
                    pq.ParquetWriter(tmp, self.schema) as writer:
                for batch in reader:
                    writer.write_batch(batch, row_group_size=self.rows_per_batch)
            os.replace(tmp, self.path)
            self._stream_path.unlink()

    def abandon(self) -> None:
        """Closes the file without finishing it (a failed or cancelled run)."""
        if not self.complete and not self._file.closed:
            self._file.close()
