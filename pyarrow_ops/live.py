"""Live inputs for pipelines: record batches pushed by your own threads while a run goes on."""

from __future__ import annotations

import os
import queue
import threading
import time as time_module
from collections.abc import Callable, Iterator
from typing import Any

import pyarrow as pa

from pyarrow_ops import _engine
from pyarrow_ops.checkpoint import CheckpointError
from pyarrow_ops.idle import IdleInputs
from pyarrow_ops.idle import watch as idle_watch
from pyarrow_ops.io import conform
from pyarrow_ops.journal import Journal
from pyarrow_ops.retention import times_of
from pyarrow_ops.windows import time_value


class LiveInput:
    """An input that your own threads push record batches into while a pipeline runs.

    Pass it to :class:`Pipeline` (or :func:`merge`, :func:`aggregate`) like any input; then, from
    any thread, :meth:`push` batches (in time order), :meth:`heartbeat` while it is quiet, and
    finally :meth:`close`. ``push`` waits while ``max_batches`` batches and heartbeats are queued
    (back-pressure: memory stays bounded however fast you push). The result yields rows as soon as
    they are ready, never waiting for a batch to fill. With several inputs, the merge needs every
    open input's next tuple, heartbeat or close before it can release a later one: an input with
    nothing to say heartbeats (``heartbeat(t)``: nothing earlier than ``t`` will follow), or it
    holds the others back. A push, heartbeat or close after :meth:`close` raises
    :class:`UsageError` and changes nothing.

    ``journal``: a directory where every pushed batch and heartbeat is written down before the run
    reads it (pyarrow_ops/journal.py), so that a run over this input can be checkpointed and
    restored exactly: restore with a new ``LiveInput`` on the same journal and push on from its
    :attr:`position` (docs/checkpoints.md, "Live inputs").

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

    def __init__(self, schema: pa.Schema, max_batches: int = 16, *,
                 journal: str | os.PathLike[str] | None = None) -> None:
        if not isinstance(schema, pa.Schema):
            raise TypeError(f"schema must be a pyarrow.Schema, got {type(schema).__name__}")
        self.schema = schema
        self._journal = None if journal is None else Journal(journal, schema)
        self._rows = 0  # rows pushed (with a journal: written down)
        # A restored run's journaled items, read back before anything in the queue (resume()).
        self._replay: Iterator[pa.RecordBatch | int] | None = None
        self._replaying = False
        self._closed_on_replay = False  # the snapshot's input had closed: its replay ends the input
        self._run_closed = ""  # why the run reading it stopped early ("closed", ...; _stop_feeding)
        # Batches, heartbeats (ints: the time column's stored integer) and the end marker.
        self._queue: queue.Queue[Any] = queue.Queue(max_batches)
        self._closed = False
        self._pushed = 0
        self._label = "live input"  # "live input 2" once a Pipeline takes it as its input 2
        self._time: str | None = None  # the time column, once something reads it
        self._time_type: pa.DataType | None = None
        self._heartbeat: int | None = None  # the latest promise
        self._last: int | None = None  # the time of the last row pushed (once the time column is known)
        self._group: IdleGroup | None = None  # with idle_timeout: the live inputs of its pipeline source
        # The run reading this input (PipelineHandle.help): while the queue is full, a push runs
        # operators on its workers' behalf rather than only wait (issue 30); None when nobody helps.
        self._helper: Callable[[], bool] | None = None
        self._index = 0
        # push(), heartbeat() and close() may come from several threads: the closed check and the
        # queueing must be one step, or a push could slip in behind the end marker and be lost.
        self._lock = threading.Lock()
        # The journal and the counts and promises a snapshot records: taken inside self._lock, for
        # a moment, never while waiting for room in the queue. A snapshot takes it alone: the
        # thread taking it reads the run's output, so waiting on a push that waits on the run
        # would wait forever. A snapshot may see an item written down and not yet queued: a
        # restore replays it, as the producer's push would have delivered it.
        self._journal_lock = threading.Lock()

    def _bind(self, label: str, time: str | None) -> None:
        # A pipeline (merge, aggregate) takes it: errors name it as the merge does, and heartbeats
        # given as datetimes convert to the time column's type.
        self._label = label
        if time is not None and time in self.schema.names:
            self._time, self._time_type = time, self.schema.field(time).type

    @property
    def position(self) -> int:
        """Rows pushed so far; after a restore, the rows the journal held at the snapshot (push
        your source on from this row)."""
        with self._journal_lock:
            return self._rows

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called (after a restore: before the snapshot)."""
        with self._journal_lock:
            return self._closed

    def _stop_feeding(self, why: str = "closed") -> None:
        """The run reading this input was closed (``why``): a pull waiting on the queue ends (the
        run fails there), a producer waiting for room goes on, and later pushes are refused."""
        self._run_closed = why
        self._helper = None
        q = self._queue
        with q.mutex:  # queue.Queue's own lock and conditions: nothing here waits
            q.queue.clear()
            q.queue.append(LiveInput._END)
            q.maxsize = 0  # unbounded: a put waiting for room returns, into a queue nobody reads
            q.not_empty.notify_all()
            q.not_full.notify_all()

    def _refuse_if_closed(self, call: str) -> None:
        if self._run_closed:
            raise _engine.UsageError(
                f"{call}() on {self._label}: the run reading it was {self._run_closed}, so nothing reads this "
                "input any more; the call changed nothing")
        if self._closed:
            raise _engine.UsageError(
                f"{call}() on {self._label}, which is closed: close() promised it sends nothing more; "
                "the call changed nothing")

    def push(self, batch: pa.RecordBatch | pa.Table) -> None:
        """Queues a batch (or each batch of a table); waits while the queue is full, running the
        reading pipeline's operators meanwhile when a core would otherwise idle. Batches whose
        string columns differ from the schema only in flavour (``large_string``, ``string_view``)
        are cast to it."""
        batches = batch.to_batches() if isinstance(batch, pa.Table) else [pa.record_batch(batch)]
        batches = [conform(b, self.schema) for b in batches]
        for b in batches:  # checked whole first: a refused push queues nothing
            if not b.schema.equals(self.schema):
                raise _engine.SchemaMismatchError(
                    f"{self._label}, batch {self._pushed}: schema {b.schema} differs from the input's {self.schema}")
        self._call(lambda: self._queue_batches(batches))

    def _queue_batches(self, batches: list[pa.RecordBatch]) -> None:
        with self._lock:
            self._refuse_if_closed("push")
            for b in batches:
                self._pushed += 1
                if b.num_rows == 0:
                    continue  # nothing to say: queued, it would make the engine wait for the next item
                last = self._last
                if self._time is not None:
                    t = times_of(b.slice(b.num_rows - 1), self._time)[0].as_py()
                    if t is not None:  # a null time fails the run where the engine reads it
                        last = t
                with self._journal_lock:
                    if self._journal is not None:
                        self._journal.write(b)  # written down before the engine can read it
                    self._rows += b.num_rows
                    self._last = last
                self._put(b)

    def _put(self, item: Any) -> None:
        # Under self._lock: queues `item`, waiting while the queue is full. A run reading this input
        # is what it waits on, so meanwhile it runs that run's operators (help() declines while
        # every core has a worker; the queue is then tried again at once, or waited on briefly).
        while True:
            try:
                self._queue.put_nowait(item)
                return
            except queue.Full:
                pass
            helper = self._helper
            if helper is None:
                self._queue.put(item)
                return
            if not helper():
                try:
                    self._queue.put(item, timeout=0.001)
                    return
                except queue.Full:
                    pass

    def heartbeat(self, time: Any) -> None:
        """Promises that nothing earlier than ``time`` follows on this input (an int in the time
        column's stored unit, or a datetime or date once a pipeline has taken the input): the
        merge then releases the other inputs' rows up to ``time`` without waiting for this one,
        and a union or join downstream hears it as the input's progress. A row pushed later with
        an earlier time fails the run as an unsorted row would (with ``lateness=``, it is late).
        Heartbeats must not go back (:class:`UnsortedInputError`); one after :meth:`close` is a
        :class:`UsageError`."""
        if self._time_type is None and not (isinstance(time, int) and not isinstance(time, bool)):
            raise _engine.UsageError(
                f"heartbeat({time!r}) on {self._label}: a datetime heartbeat needs the time column's type; "
                "pass the input to a Pipeline first, or give the column's stored integer")
        value = time_value(time, self._time_type or pa.int64())

        def promise() -> None:
            with self._lock:
                self._refuse_if_closed("heartbeat")
                if self._heartbeat is not None and value < self._heartbeat:
                    raise _engine.UnsortedInputError(
                        f"{self._label} sent a heartbeat at {value}, earlier than its previous heartbeat at "
                        f"{self._heartbeat}; heartbeats must not go back (the call changed nothing)")
                self._promise(value)

        self._call(promise)

    def _promise(self, value: int, wait: bool = True) -> None:
        # Under self._lock: a heartbeat at `value` (not below the last one). Queued only if it
        # promises more than the rows and heartbeats before it did: an item that moves nothing
        # would make a reader that saw this input ready wait for the next one.
        floor = self._floor()
        moves = floor is None or value > floor
        if moves and not wait and self._queue.full():
            raise queue.Full  # nothing changed
        with self._journal_lock:
            if moves and self._journal is not None:  # with lateness= a heartbeat decides which rows are late
                self._journal.heartbeat(value)
            self._heartbeat = value
        if moves:
            self._queue.put(value, block=wait)  # only threads holding self._lock put: the room stays

    def close(self) -> None:
        """Ends the input: nothing more will be pushed. Closing twice is a :class:`UsageError`; closing
        after the run reading it was closed is not (the producer's end needs no reader)."""

        def end() -> None:
            with self._lock:
                if self._run_closed and not self._closed:  # a producer ending after the run was closed
                    self._closed = True
                    return
                self._refuse_if_closed("close")
                with self._journal_lock:
                    self._closed = True
                    if self._journal is not None:
                        self._journal.close()
                self._put(LiveInput._END)
                self._helper = None  # nothing more to push: the run need not be kept

        self._call(end)

    def _call(self, body: Callable[[], None]) -> None:
        # A push, heartbeat or close: with idle_timeout the input is active while it lasts (a push
        # may wait for room) and has spoken after it, which may move the promise of idle inputs.
        group = self._group
        if group is None:
            body()
            return
        group.idle.began(self._index)
        try:
            body()
        finally:
            group.idle.spoke(self._index)
            group.check_idle()

    def _floor(self) -> int | None:
        # Under self._lock: the latest time this input has promised (row or heartbeat).
        known = [t for t in (self._last, self._heartbeat) if t is not None]
        return max(known) if known else None

    def _items(self) -> Iterator[pa.RecordBatch | int]:
        if self._replay is not None:
            yield from self._replay
            self._replaying = False
            if self._closed_on_replay:
                return
        while (item := self._queue.get()) is not LiveInput._END:
            yield item
        if self._run_closed:  # not the input's end: the run fails, so nobody reads a cut result as whole
            raise _engine.UsageError(f"the run reading {self._label} was {self._run_closed}")

    def _saved(self) -> dict[str, Any]:
        """What a snapshot records of this input: its journal's items (made durable) and its
        promises. Every row the run has read is among those items: they were written before
        queued."""
        if self._journal is None:
            raise CheckpointError(f"a run over {self._label}, a LiveInput without a journal, cannot be checkpointed: "
                                  "its rows cannot be read again. Give it journal= (a directory) to write them down "
                                  "as they are pushed")
        with self._journal_lock:
            return {"journal": self._journal.sync(), "rows": self._rows, "batches": self._pushed,
                    "last": self._last, "heartbeat": self._heartbeat, "closed": self._closed}

    def _check_resume(self, saved: dict[str, Any]) -> None:
        """Refuses, before anything changes, a restore this input cannot take."""
        if self._journal is None:
            raise CheckpointError(f"{self._label} was a journaled live input in this run: restore it with a "
                                  "LiveInput on the same journal (journal=)")
        if self._pushed or self._replay is not None:
            raise _engine.UsageError(f"{self._label} was pushed to (or restored) already; restore with a new LiveInput")
        self._journal.check(saved["journal"])

    def _resume(self, saved: dict[str, Any], skip: int = 0) -> None:
        """Before a restored run starts (_check_resume passed): the journal's items up to the
        snapshot come first, less the first ``skip`` rows (those a cut had read: its operators'
        state holds them), and the counts and promises are the snapshot's."""
        assert self._journal is not None
        with self._lock, self._journal_lock:
            self._replay = _without_rows(self._journal.resume(saved["journal"]), skip)
            self._replaying = True
            self._rows, self._pushed = saved["rows"], saved["batches"]
            self._last, self._heartbeat = saved["last"], saved["heartbeat"]
            if saved["closed"]:
                self._closed = self._closed_on_replay = True

    def _engine_stream(self, label: str, time: str | None) -> _engine.Stream:
        # What the engine reads (pyarrow_ops.io.as_stream): batches and heartbeats, in push order.
        self._bind(self._label if self._label != "live input" else label, time)
        return _engine.stream_from_batches(self.schema, self._items(), label,
                                           ready=lambda: self._replaying or not self._queue.empty())

    def __arrow_c_schema__(self) -> object:
        return self.schema.__arrow_c_schema__()

    def __arrow_c_stream__(self, requested_schema: object | None = None) -> object:
        # Read through the Arrow stream protocol (by another library): the batches alone.
        batches = (b for b in self._items() if not isinstance(b, int))
        return pa.RecordBatchReader.from_batches(self.schema, batches).__arrow_c_stream__(requested_schema)


def _without_rows(items: Iterator[pa.RecordBatch | int], rows: int) -> Iterator[pa.RecordBatch | int]:
    """``items`` (batches and heartbeats) less their first ``rows`` rows. The last heartbeat among
    those skipped still goes first: the rows after it keep its promise, and the others' rows wait
    on this input no longer than in the first run."""
    promise = None
    for item in items:
        if rows > 0:
            if isinstance(item, int):
                promise = item
                continue
            if item.num_rows <= rows:
                rows -= item.num_rows
                continue
            item, rows = item.slice(rows), 0
        if promise is not None:
            yield promise
            promise = None
        yield item
    if promise is not None:
        yield promise


class IdleGroup:
    """The live inputs of one pipeline source under ``idle_timeout`` (pyarrow_ops/idle.py has the
    rule): a live input silent that long is heartbeated to the least floor of the live inputs still
    speaking, again whenever that moves, until it speaks. Inputs that are not live (tables, files)
    never wait on a producer and take no part."""

    def __init__(self, lives: list[LiveInput | None], timeout: float, clock: Callable[[], float] | None) -> None:
        self.lives = lives
        self.idle = IdleInputs(len(lives), timeout, clock or time_module.monotonic)
        self.stop = threading.Event()
        for i, live in enumerate(lives):
            if live is not None:
                live._group, live._index = self, i
        if clock is None:
            idle_watch(self, self.stop, timeout / 4, "pyarrow-ops idle live inputs")

    def check_idle(self) -> None:
        closed, floors = [], []
        for live in self.lives:
            if live is None:
                closed.append(True)
                floors.append(None)
                continue
            with live._lock:
                closed.append(live._closed)
                floors.append(live._floor())
        if all(closed):
            self.stop.set()
            return
        idle, target = self.idle.due(closed, floors)
        if target is None:
            return
        for i in idle:
            live = self.lives[i]
            assert live is not None
            with live._lock:
                floor = live._floor()
                if not live._closed and (floor is None or floor < target):
                    try:
                        # Never waits: a full queue holds items enough; the next check tries again.
                        live._promise(target, wait=False)
                    except queue.Full:
                        pass
