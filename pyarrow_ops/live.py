"""Live inputs for pipelines: record batches pushed by your own threads while a run goes on."""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from typing import Any

import pyarrow as pa

from pyarrow_ops import _engine
from pyarrow_ops.io import conform


class LiveInput:
    """An input that your own threads push record batches into while a pipeline runs.

    Pass it to :class:`Pipeline` like any input; then, from any thread, :meth:`push` batches (in
    time order) and finally :meth:`close`. ``push`` waits while ``max_batches`` batches are queued
    (back-pressure: memory stays bounded however fast you push). The pipeline's result yields
    rows as soon as they are ready, never waiting for a batch to fill. With several inputs, the
    merge needs every open input's next tuple (or its close) before it can release a later one,
    so an idle input holds the others back until it pushes or closes. A push or close after
    :meth:`close` raises :class:`UsageError` and changes nothing.

    >>> import threading, pyarrow as pa, pyarrow_ops as po
    >>> live = po.LiveInput(pa.schema([("ts", pa.int64()), ("user", pa.int64())]))
    >>> result = po.Pipeline(live, time="ts").sessionize("user", gap=10).run(threads=2)
    >>> def produce():
    ...     live.push(pa.record_batch({"ts": [1, 30], "user": [7, 7]}))
    ...     live.close()
    >>> threading.Thread(target=produce).start()
    >>> result.to_arrow().column("session").to_pylist()
    [0, 1]
    """

    _END = object()

    def __init__(self, schema: pa.Schema, max_batches: int = 16) -> None:
        if not isinstance(schema, pa.Schema):
            raise TypeError(f"schema must be a pyarrow.Schema, got {type(schema).__name__}")
        self.schema = schema
        self._queue: queue.Queue[Any] = queue.Queue(max_batches)
        self._closed = False
        self._pushed = 0
        self._label = "live input"  # "live input 2" once a Pipeline takes it as its input 2
        # push() and close() may come from several threads: the closed check and the queueing
        # must be one step, or a push could slip in behind the end marker and be lost.
        self._lock = threading.Lock()

    def _refuse_if_closed(self, call: str) -> None:
        if self._closed:
            raise _engine.UsageError(
                f"{call}() on {self._label}, which is closed: close() promised it sends nothing more; "
                "the call changed nothing")

    def push(self, batch: pa.RecordBatch | pa.Table) -> None:
        """Queues a batch (or each batch of a table); waits while the queue is full. Batches whose
        string columns differ from the schema only in flavour (``large_string``, ``string_view``)
        are cast to it."""
        batches = batch.to_batches() if isinstance(batch, pa.Table) else [pa.record_batch(batch)]
        batches = [conform(b, self.schema) for b in batches]
        for b in batches:  # checked whole first: a refused push queues nothing
            if not b.schema.equals(self.schema):
                raise _engine.SchemaMismatchError(
                    f"{self._label}, batch {self._pushed}: schema {b.schema} differs from the input's {self.schema}")
        with self._lock:
            self._refuse_if_closed("push")
            for b in batches:
                self._pushed += 1
                self._queue.put(b)

    def close(self) -> None:
        """Ends the input: nothing more will be pushed. Closing twice is a :class:`UsageError`."""
        with self._lock:
            self._refuse_if_closed("close")
            self._closed = True
            self._queue.put(LiveInput._END)

    def _batches(self) -> Iterator[pa.RecordBatch]:
        while (b := self._queue.get()) is not LiveInput._END:
            yield b

    def __arrow_c_schema__(self) -> object:
        return self.schema.__arrow_c_schema__()

    def __arrow_c_stream__(self, requested_schema: object | None = None) -> object:
        return pa.RecordBatchReader.from_batches(self.schema, self._batches()).__arrow_c_stream__(requested_schema)
