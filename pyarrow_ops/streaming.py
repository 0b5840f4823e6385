"""The push form of :func:`pyarrow_ops.aggregate` for live data: :func:`live_aggregate`, with
lateness, idle inputs and checkpoints (docs/time.md, docs/checkpoints.md)."""

from __future__ import annotations

import datetime as dt
import os
import threading
import time as time_module
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from pyarrow_ops import _engine
from pyarrow_ops.aggregate import (DEFAULT_BATCH_SIZE, AggregateResult, Design, _aggs, _check, _design, _keys,
                                   _query)
from pyarrow_ops.aggregates import Agg
from pyarrow_ops.checkpoint import Periodic, Snapshot
from pyarrow_ops.checkpoint import write as write_snapshot
from pyarrow_ops.idle import IdleInputs, timeout_seconds
from pyarrow_ops.idle import watch as idle_watch
from pyarrow_ops.io import conform
from pyarrow_ops.lateness import Late, LateLog, Lateness, bounds
from pyarrow_ops.retention import CLOSED, InputLog, Left, times_of
from pyarrow_ops.sink import FileSink
from pyarrow_ops.windows import Session, Window, session, time_value


COMPACT_ROWS = 1 << 20
"""Rows the logs of a checkpointable run hold before their oldest are folded into window states."""


def _ending_from(rows: list[pa.RecordBatch], end: int | None) -> list[pa.RecordBatch]:
    """The rows (in window_end order) ending at or after ``end``: those that may not have left."""
    if end is None:
        return rows
    kept = [b for b in rows if b.num_rows and times_of(b, "window_end")[-1].as_py() >= end]
    if kept:
        kept[0] = kept[0].filter(pc.greater_equal(times_of(kept[0], "window_end"), end))
    return kept


def _latest_time(batch: Any, time: str) -> int | None:
    """The greatest time of a pushed batch as the column's stored integer (None when empty)."""
    batch = pa.record_batch(batch)
    return pc.max(times_of(batch, time)).as_py() if batch.num_rows else None


class LiveAggregate:
    """The push form of :func:`aggregate` for live data.

    Producers call :meth:`push` (record batches, per input, each input in time order),
    :meth:`heartbeat` and :meth:`close` from their own threads; the engine works without the GIL
    and ``push`` waits while the engine is full (back-pressure, so memory stays bounded). A
    consumer iterates the result batches, which arrive as soon as window sets complete.

    >>> import threading, pyarrow as pa, pyarrow_ops as po
    >>> schema = pa.schema([("t", pa.int64()), ("v", pa.float64())])
    >>> live = po.live_aggregate(schema, inputs=2, time="t", window=po.tumbling(10),
    ...                          aggs={"n": po.count(), "sum": po.sum("v")})
    >>> def feed(i):
    ...     live.push(i, pa.record_batch({"t": [i, 10 + i], "v": [1.0, 2.0]}, schema=schema))
    ...     live.close(i)
    >>> threads = [threading.Thread(target=feed, args=(i,)) for i in range(2)]
    >>> for t in threads: t.start()
    >>> rows = [r for b in live for r in b.to_pylist()]
    >>> for t in threads: t.join()
    >>> [(r["window_start"], r["n"], r["sum"]) for r in rows]
    [(0, 2, 2.0), (10, 2, 4.0)]
    """

    def __init__(self, schema: pa.Schema, inputs: int, *, time: str, key: str | list[str] | None = None,
                 window: Window | Session, aggs: Mapping[str, Agg], design: Design = "auto",
                 update_threads: int | None = None, batch_size: int = DEFAULT_BATCH_SIZE,
                 lateness: Lateness = None, late: Late = "error", idle_timeout: float | dt.timedelta | None = None,
                 clock: Callable[[], float] | None = None, checkpointable: bool = False,
                 checkpoint_every: int | dt.timedelta | None = None,
                 checkpoint_dir: str | os.PathLike[str] | None = None, keep_checkpoints: int = 3) -> None:
        if isinstance(inputs, bool) or not isinstance(inputs, int) or inputs < 1:
            raise ValueError(f"inputs must be a positive int, got {inputs!r}")
        _check(design, None, batch_size, window, update_threads)
        checkpointable = checkpointable or checkpoint_dir is not None
        schema = pa.schema(schema)
        if time not in schema.names:
            raise _engine.InvalidInputError(
                f"time column '{time}' not found in the schema; its columns are: {', '.join(schema.names)}")
        self.schema = schema
        self.inputs = inputs
        self._time = time
        self._time_type = schema.field(time).type
        options = _engine.AggregateOptions(
            _query(time, _keys(key), window, _aggs(aggs), self._time_type), update_threads=update_threads or 0,
            batch_size=batch_size, flush_each_window=True)
        input_bounds = bounds(lateness, late, inputs, self._time_type)
        self._idle_timeout = timeout_seconds(idle_timeout)
        # What a snapshot needs to rebuild this run (docs/checkpoints.md): the query as JSON.
        self._saved_query = {
            "inputs": inputs, "time": time, "key": _keys(key), "aggs": [list(a) for a in _aggs(aggs)],
            "window": None if isinstance(window, Session) else list(window.resolve(self._time_type)),
            "session_gap": window.resolve(self._time_type) if isinstance(window, Session) else None,
            "design": design, "update_threads": update_threads, "batch_size": batch_size, "lateness": input_bounds,
            "late": late, "idle_timeout": self._idle_timeout,
            "checkpoint_every": None if checkpoint_every is None else (
                {"seconds": checkpoint_every.total_seconds()} if isinstance(checkpoint_every, dt.timedelta)
                else {"tuples": checkpoint_every}),
            "checkpoint_dir": None if checkpoint_dir is None else os.fspath(checkpoint_dir),
            "keep_checkpoints": keep_checkpoints}
        if clock is not None and not callable(clock):
            raise TypeError(f"clock must be a function returning seconds, got {type(clock).__name__}")
        native, self._handle = _engine.aggregate(
            [], options, _design(design), schema=schema.__arrow_c_schema__(), push_inputs=inputs)
        self._result = AggregateResult(native, self._handle)
        # Per input, under its lock: whether it is closed, and its floor, the latest time it has
        # promised the engine (its latest row's or heartbeat's; with lateness its watermark). One
        # lock per input: a lateness buffer is not thread-safe, and an input's calls must reach the
        # engine in the order they were made.
        self._locks = [threading.Lock() for _ in range(inputs)]
        self._closed = [False] * inputs
        self._floors: list[int | None] = [None] * inputs
        # With lateness: each input's rows go through its own reorder buffer (gate/lateness.h), and
        # the engine hears its watermark as a heartbeat, so readiness waits no longer than the
        # bound requires.
        self._lateness: list[Any] | None = None
        if input_bounds is not None:
            log = LateLog(schema, late, inputs)
            self._result._late_logs.append(log)
            self._lateness = [_engine.Lateness(schema.__arrow_c_schema__(), i, f"input {i}", time, b, late, log.rows)
                              for i, b in enumerate(input_bounds)]
        # Idle inputs (idle_timeout; pyarrow_ops/idle.py has the rule): processing time from
        # `clock`; an input silent for the timeout is heartbeated to the least floor of the inputs
        # that are not idle, again whenever that moves, until it speaks.
        self._clock = clock or time_module.monotonic
        self._idle = None if self._idle_timeout is None else IdleInputs(inputs, self._idle_timeout, self._clock)
        self._stop_watch = threading.Event()
        # Checkpoints (pyarrow_ops/retention.py has the rule): per input, the rows it handed to the
        # engine since the retention floor, (lateness) the rows its buffer may hold and its
        # watermark, and its position, under the input's state lock; the rows that left, under
        # self._left.lock. A checkpoint takes every state lock (in index order), then
        # self._left.lock. No engine call is made under a state lock: a push may wait for room
        # until other inputs' pushes arrive (a merge needs them all), so a checkpoint that waited
        # for an input lock could wait for ever.
        self._state = [threading.Lock() for _ in range(inputs)]
        self._positions = [0] * inputs  # rows each input has given
        self._replay_errors: list[BaseException | None] = [None] * inputs  # a restore's, per input
        self._logs = [InputLog(time) for _ in range(inputs)] if checkpointable else None
        # The window states (engine/window/window_states.h): the logs' rows older than every
        # input's promise, folded per (window, key) once the logs hold more than _compact_rows
        # rows, so that memory and snapshots are the size of the open windows' keys. Lock order:
        # self._compacting, then the state locks, then self._left.lock.
        self._sessions = isinstance(window, Session)
        states = _engine.SessionStates if self._sessions else _engine.WindowStates
        self._states = states(schema.__arrow_c_schema__(), options) if checkpointable else None
        # Sessions: the rows of the sessions the folding closed (final, in (window_end, key) order),
        # kept until they have left; a restored run hands those of its snapshot out first.
        self._closed_rows: list[pa.RecordBatch] = []
        self._closed_first: list[pa.RecordBatch] = []
        self._compacting = threading.Lock()
        self._compact_rows = COMPACT_ROWS
        self._compact_next = 0  # retained rows beyond which the next fold is tried (past _compact_rows)
        # Without first and last, a window's state does not depend on the order its rows are
        # folded in (sums are exact), so every sent row can be folded at once, not only those
        # every promise has passed: memory stays the keys' even while one input lags far behind.
        self._fold_any = not self._sessions and not any(f in ("first", "last") for _, f, _ in self._saved_query["aggs"])
        self._window = None if isinstance(window, Session) else window.resolve(self._time_type)  # size, advance, offset
        self._batch_size = batch_size
        self._left = Left()
        self._sink: FileSink | None = None
        self._resume_sink: tuple[dict[str, Any], pa.Table] | None = None
        self._periodic = Periodic(checkpoint_dir, checkpoint_every, keep_checkpoints, clock)
        self._checkpointing = threading.Lock()  # one checkpoint at a time
        self._checkpoint_error: BaseException | None = None  # a periodic checkpoint's, raised by the next push
        self._counting = threading.Lock()       # the periodic count
        if self._idle_timeout is not None and clock is None:
            idle_watch(self, self._stop_watch, self._idle_timeout / 4, "pyarrow-ops idle inputs")

    def _refuse_if_closed(self, input: int, call: str) -> None:
        # As the engine does, before anything changes; under self._locks[input].
        if self._checkpoint_error is not None:
            raise _engine.UsageError(f"a periodic checkpoint failed: {self._checkpoint_error}") from self._checkpoint_error
        if self._replay_errors[input] is not None:
            raise _engine.UsageError(f"input {input} could not be restored: "
                                     f"{self._replay_errors[input]}") from self._replay_errors[input]
        if self._closed[input]:
            raise _engine.UsageError(f"{call}() on input {input}, which is closed: close() promised it sends "
                                     "nothing more; the call changed nothing")

    def _floor(self) -> int | None:
        # The retention floor: the least time a row may have and still be in a window yet to leave.
        left = self._left
        end, whole = left.end, left.whole  # end only grows; a stale `whole` is the lower, safe floor
        if end is None or self._window is None:  # sessions: rows leave the logs by folding alone
            return None
        size, advance = self._window[0], self._window[1]  # type: ignore[index]
        return end + advance - size if whole and left.end == end else end - size

    def _through(self, input: int, step: Callable[[], list[Any]], taken: Any = None, rows: int = 0,
                 final: bool = False) -> None:
        # Under self._locks[input], with lateness: `step` (the buffer's push, heartbeat or finish:
        # quick, it never waits) runs under the input's state lock together with everything a
        # checkpoint reads of the input (the buffer's watermark, the logs, the position), so a
        # snapshot sees the input before or after the call, whole. The engine calls, which may
        # wait for room (for other inputs' rows, with a merge), come after, outside that lock.
        with self._state[input]:
            buffer = self._lateness[input]  # type: ignore[index]
            released = step()
            if self._logs is not None:
                released = [pa.record_batch(b) for b in released]
                floor = self._floor()
                for batch in released:
                    self._logs[input].add_sent(batch, floor)
                if taken is not None:
                    self._logs[input].add_taken(pa.record_batch(taken), buffer.watermark)
                if final:
                    self._logs[input].taken.clear()  # finish released every held row
                self._logs[input].promise_at_least(CLOSED if final else buffer.watermark)
            self._positions[input] += rows
            if final:
                # Closed in the same step as the rows finish released are logged as sent: a
                # snapshot taken before the engine's close would otherwise see them sent, and
                # again as held (above an unchanged watermark) on an input still open, and its
                # restore would release them twice, out of order (a kill/restore run found it).
                self._closed[input] = True
            watermark = None if final else buffer.watermark
        self._forward(input, released, watermark)

    def _forward(self, input: int, released: list[Any], watermark: int | None) -> None:
        # Under self._locks[input]: rows a lateness buffer released, then its watermark.
        for batch in released:
            self._handle.push(input, *batch.__arrow_c_array__())
        if watermark is not None and watermark > -(2**63) and watermark != self._floors[input]:
            self._handle.heartbeat(input, watermark)
            self._floors[input] = watermark

    def _promise(self, input: int, value: int) -> None:
        # Under self._locks[input]: a heartbeat at `value`.
        if self._lateness is None:
            if self._logs is not None:
                with self._state[input]:
                    self._logs[input].promise_at_least(value)
            self._handle.heartbeat(input, value)
            self._floors[input] = value if self._floors[input] is None else max(self._floors[input], value)
        else:
            buffer = self._lateness[input]
            self._through(input, lambda: buffer.heartbeat(value))

    def _began(self, input: int) -> None:
        # A call of `input` starts: while it lasts (a push may wait for room), the input is not idle.
        if self._idle is not None:
            self._idle.began(input)

    def _spoke(self, input: int) -> None:
        # After a call of `input`: it is active, and an idle period of it ends.
        if self._idle is None:
            return
        self._idle.spoke(input)
        self.check_idle()

    def _input(self, input: int) -> int:
        if isinstance(input, bool) or not isinstance(input, int) or not 0 <= input < self.inputs:
            raise _engine.UsageError(f"input must be an int in [0, {self.inputs}), got {input!r}")
        return input

    def push(self, input: int, batch: Any) -> None:
        """Adds a record batch (anything with ``__arrow_c_array__``) to ``input``.

        Raises :class:`UsageError` if ``input`` was closed (nothing changes: the call is refused
        whole). A pyarrow batch whose string columns differ from the schema only in flavour
        (``large_string``, ``string_view``) is cast to it."""
        if not hasattr(batch, "__arrow_c_array__"):
            raise TypeError(f"push takes a record batch, got {type(batch).__name__}")
        if isinstance(batch, pa.RecordBatch):
            batch = conform(batch, self.schema)
        schema_capsule, array_capsule = batch.__arrow_c_array__()
        input = self._input(input)
        self._began(input)
        try:
            rows = self._push(input, batch, schema_capsule, array_capsule)
        finally:
            self._spoke(input)
        if self._states is not None:
            retained = sum(log.rows for log in self._logs)  # type: ignore[union-attr]
            if retained > self._compact_rows and retained > self._compact_next:
                self._compact()
        if self._periodic.every is not None:
            with self._counting:
                due = self._periodic.add(rows)
            if due:
                self._checkpoint_if_due()

    def _compact(self) -> None:
        # Folds the logs' rows older than every input's promise into the window states (they
        # precede, in the merged order, every row still to come: window_states.h). The rows leave
        # the logs under the state locks; the folding, outside them, holds self._compacting,
        # which a checkpoint takes first, so a snapshot never sees rows in neither place.
        if not self._compacting.acquire(blocking=False):
            return  # another thread is folding, or a checkpoint is being taken
        try:
            assert self._logs is not None and self._states is not None
            for lock in self._state:
                lock.acquire()
            try:
                promises = [log.promise for log in self._logs]
                if self._fold_any:
                    below = CLOSED
                elif None in promises:
                    return  # an input that has promised nothing may still send any time
                else:
                    below = min(promises)  # type: ignore[type-var]
                taken = [log.take_before(below) for log in self._logs]
                # Rows no promise has passed stay: try again once as many more have come.
                self._compact_next = sum(log.rows for log in self._logs) + self._compact_rows
            finally:
                for lock in self._state:
                    lock.release()
            end = self._left.end  # only grows: a stale value forgets less
            if self._sessions:
                self._fold_sessions(taken, below, end)
                return
            for i, parts in enumerate(taken):
                for batch, first in parts:
                    self._states.add(i, first, *batch.__arrow_c_array__())
            if end is not None:
                self._states.forget_before(end)
        finally:
            self._compacting.release()

    def _push(self, input: int, batch: Any, schema_capsule: Any, array_capsule: Any) -> int:
        with self._locks[input]:
            self._refuse_if_closed(input, "push")
            rows = batch.num_rows if hasattr(batch, "num_rows") else pa.record_batch(batch).num_rows
            if self._lateness is not None:
                buffer = self._lateness[input]
                self._through(input, lambda: buffer.push(schema_capsule, array_capsule),
                              taken=batch if self._logs is not None else None, rows=rows)
            else:
                latest = _latest_time(batch, self._time) if self._idle_timeout is not None else None
                with self._state[input]:  # what a checkpoint reads: before the engine call, which may wait
                    if self._logs is not None:
                        batch = pa.record_batch(batch)
                        schema_capsule, array_capsule = batch.__arrow_c_array__()
                        self._logs[input].add_sent(batch, self._floor())
                    self._positions[input] += rows
                self._handle.push(input, schema_capsule, array_capsule)
                if latest is not None:
                    self._floors[input] = latest if self._floors[input] is None else max(self._floors[input], latest)
        return rows

    def _fold_sessions(self, taken: list[list[tuple[pa.RecordBatch, int]]], below: int, end: int | None) -> None:
        # Under self._compacting. A session depends on its key's tuples' order: the rows go in
        # merged, (time, input, position): each input's rows are in time order, so a stable sort
        # by time of the inputs' rows laid end to end in input order gives it.
        merged = pa.concat_tables([pa.Table.from_batches([b for b, _ in parts], schema=self.schema) for parts in taken])
        if merged.num_rows:
            merged = merged.take(pc.sort_indices(merged, sort_keys=[(self._time, "ascending")])).combine_chunks()
            for batch in merged.to_batches():
                self._states.add(*batch.__arrow_c_array__())  # type: ignore[union-attr]
        self._states.advance(min(below, 2**63 - 1))  # type: ignore[union-attr]
        while (closed := self._states.take()) is not None:  # type: ignore[union-attr]
            self._closed_rows.append(pa.record_batch(closed))
        self._closed_rows = _ending_from(self._closed_rows, end)

    def _raw(self) -> Iterator[Any]:
        # The result's batches; on a restored run of sessions, first the closed sessions' rows its
        # snapshot held (they end before every session the engine has still to give).
        while self._closed_first:
            yield self._closed_first.pop(0)
        yield from self._result

    def heartbeat(self, input: int, time: Any) -> None:
        """Promises that ``input`` sends nothing earlier than ``time``. :class:`UsageError` if
        ``input`` was closed. With ``lateness``, a row of ``input`` earlier than ``time`` that
        comes after it is late."""
        input, value = self._input(input), time_value(time, self._time_type)
        self._began(input)
        try:
            with self._locks[input]:
                self._refuse_if_closed(input, "heartbeat")
                self._promise(input, value)
        finally:
            self._spoke(input)

    def close(self, input: int) -> None:
        """``input`` sends nothing more. Closing it again raises :class:`UsageError`, as does any
        later push or heartbeat on it: each is refused whole, so nothing is lost or held."""
        input = self._input(input)
        self._began(input)
        try:
            with self._locks[input]:
                self._refuse_if_closed(input, "close")
                # Marked closed under the input's state lock, with what a snapshot reads of the
                # input (for lateness, in _through), before the engine's close.
                if self._lateness is not None:
                    self._through(input, self._lateness[input].finish, final=True)
                else:
                    with self._state[input]:
                        if self._logs is not None:
                            self._logs[input].promise_at_least(CLOSED)
                        self._closed[input] = True
                self._handle.close(input)
        finally:
            self._spoke(input)
        if all(self._closed):
            self._stop_watch.set()

    def check_idle(self) -> None:
        """With ``idle_timeout``: every open input silent (no push, heartbeat or close) for the
        timeout by ``clock`` is idle, and is heartbeated to the least floor (latest promised time)
        of the open inputs that are not idle (all being idle: of those that have a floor), so it
        stops holding them back; its rows must then
        still come in order from there (or within its ``lateness``, whose policy takes the rest).
        Runs by itself, a few times per timeout, with the default clock; call it after moving an
        injected clock."""
        if self._idle is None:
            return
        idle, target = self._idle.due(self._closed, self._floors)
        if target is None:
            return
        for i in idle:
            with self._locks[i]:
                if not self._closed[i] and (self._floors[i] is None or self._floors[i] < target):
                    self._promise(i, target)

    @property
    def late(self) -> pa.Table | None:
        """With ``late="side"``: the late rows so far (see :attr:`Result.late`)."""
        return self._result.late

    def cancel(self) -> None:
        """Stops the run; waiting pushes and the consumer return."""
        self._stop_watch.set()
        self._handle.cancel()

    def __iter__(self) -> Iterator[pa.RecordBatch]:
        for raw in self._raw():
            batch = self._left.drop_seen(raw)
            if batch.num_rows:
                with self._left.lock:
                    self._left.count(batch, raw.num_rows < self._batch_size)
                yield batch
        with self._checkpointing:  # the run's end waits for a periodic snapshot being written
            pass

    @property
    def closed(self) -> list[bool]:
        """Per input, whether it was closed (on a restored run, before the snapshot or since)."""
        return list(self._closed)

    @property
    def positions(self) -> list[int]:
        """Rows each input has given (pushed), by input; on a restored run, the rows it had given
        before the snapshot plus those since: push each input's rows from there."""
        return list(self._positions)

    def write_ipc(self, path: str | os.PathLike[str] | None = None, *, rows_per_batch: int = 65536) -> None:
        """Reads the result to its end into an Arrow IPC stream file at ``path`` (in batches of
        ``rows_per_batch`` rows), committing it with each checkpoint, so that after a restore the
        file is byte for byte the uninterrupted run's (docs/checkpoints.md). On a restored run
        that was writing one, ``path`` may be left out: the file is resumed."""
        self._write(path, "ipc", rows_per_batch)

    def write_parquet(self, path: str | os.PathLike[str] | None = None, *, rows_per_batch: int = 65536) -> None:
        """:meth:`write_ipc` into a Parquet file (a row group per ``rows_per_batch`` rows), written
        from ``<path>.spool`` (the committed IPC stream) when the run ends."""
        self._write(path, "parquet", rows_per_batch)

    def _write(self, path: str | os.PathLike[str] | None, format: str, rows_per_batch: int) -> None:
        resume, pending = self._resume_sink or (None, None)
        if resume is not None:
            if path is not None and os.fspath(path) != resume["path"] or format != resume["format"]:
                raise _engine.UsageError(f"this run was restored while writing {resume['format']} to {resume['path']}; "
                                         "resume that file (leave path out)")
            path, rows_per_batch = resume["path"], resume["rows_per_batch"]
        elif path is None:
            raise TypeError(f"write_{format}() needs a path")
        sink = FileSink(path, self._result.schema, format, rows_per_batch, resume, pending)  # type: ignore[arg-type]
        if sink.complete:  # restored after it had finished: the file is whole
            self.cancel()
            return
        with self._left.lock:
            self._sink, self._resume_sink = sink, None
        try:
            for raw in self._raw():
                batch = self._left.drop_seen(raw)
                with self._left.lock:
                    sink.write(batch)
                    self._left.count(batch, raw.num_rows < self._batch_size)
            with self._left.lock:
                sink.finish()  # kept: a snapshot taken from now on records the file as complete
            with self._checkpointing:  # the run's end waits for a periodic snapshot being written
                pass
        finally:
            sink.abandon()

    def checkpoint(self, path: str | os.PathLike[str] | None = None) -> Path:
        """Writes a snapshot of the run at ``path`` (default: the next in ``checkpoint_dir``) and
        returns its path: every open window (its states per key, and the rows not folded into
        them yet), each input's position, watermark and held rows, the rows that have left, and
        the output file's committed state.
        Producers wait while it is taken (not while it is written). :func:`pyarrow_ops.restore`
        resumes from it (docs/checkpoints.md)."""
        if self._logs is None:
            raise _engine.UsageError("this run keeps no state for checkpoints: create it with checkpointable=True "
                                     "or checkpoint_dir=")
        with self._checkpointing:
            return self._checkpoint(path)

    def _checkpoint_if_due(self) -> None:
        # On a thread of its own, so that the producer that crossed the period goes on pushing
        # while the snapshot is written (its input would otherwise fall silent for that long).
        if not self._checkpointing.acquire(blocking=False):
            return  # one is being taken
        threading.Thread(target=self._periodic_checkpoint, name="pyarrow-ops checkpoint", daemon=True).start()

    def _periodic_checkpoint(self) -> None:
        try:
            with self._counting:
                due = self._periodic.add(0)
            if due:
                self._checkpoint(None)
        except BaseException as e:  # noqa: BLE001 (a checkpoint that fails is a failure of the run)
            self._checkpoint_error = e
        finally:
            self._checkpointing.release()

    def _checkpoint(self, path: str | os.PathLike[str] | None) -> Path:
        assert self._logs is not None and self._states is not None
        tables: dict[str, pa.Table] = {"schema": self.schema.empty_table()}
        self._compacting.acquire()  # no rows between the logs and the states meanwhile
        for lock in self._state:
            lock.acquire()
        try:
            with self._left.lock:
                floor = self._floor()
                state: dict[str, Any] = {
                    "positions": list(self._positions), "closed": list(self._closed), "floors": list(self._floors),
                    "left": self._left.state(), "floor": floor,
                    "watermarks": None if self._lateness is None else [b.watermark for b in self._lateness],
                    "late_counts": self._result.late_counts, "sink": None}
                if self._sink is not None:
                    state["sink"], tables["pending"] = self._sink.commit()
                elif self._resume_sink is not None:  # restored, its file not yet resumed: as it was
                    state["sink"], tables["pending"] = self._resume_sink
            for i, log in enumerate(self._logs):
                tables[f"sent-{i}"] = log.sent_rows(self.schema, floor)
                if self._lateness is not None:
                    tables[f"held-{i}"] = log.held_rows(self.schema, self._lateness[i].watermark)
            late = self._result.late
            end = state["left"]["end"]
            if self._sessions:
                tables["states"] = pa.Table.from_batches([pa.record_batch(self._states.save())])
                closed = _ending_from(self._closed_rows, end)
                tables["closed"] = pa.Table.from_batches(closed, schema=self._result.schema)
            else:
                states = pa.record_batch(self._states.save(-(2**63) if end is None else end))
                tables["states"] = pa.Table.from_batches([states])
        finally:
            for lock in self._state:
                lock.release()
            self._compacting.release()
        if late is not None:
            tables["late"] = late
        state["idle"] = self._idle.periods() if self._idle is not None else []
        periodic = path is None
        if periodic and self._periodic.directory is None:
            raise TypeError("checkpoint() needs a path (this run has no checkpoint_dir)")
        written = write_snapshot(self._periodic.next_path() if periodic else path, "live_aggregate",
                                 self._saved_query, state, tables)  # type: ignore[arg-type]
        if periodic:
            self._periodic.written()
        return written

    @classmethod
    def _restore(cls, snapshot: Snapshot, clock: Callable[[], float] | None = None) -> LiveAggregate:
        q, st = snapshot.query, snapshot.state
        every = q["checkpoint_every"]
        live = cls(snapshot.table("schema").schema, q["inputs"], time=q["time"], key=q["key"],
                   window=Window(*q["window"]) if q["window"] is not None else session(q["session_gap"]),
                   aggs={name: Agg(f, c or None) for name, f, c in q["aggs"]},
                   design=q["design"], update_threads=q["update_threads"], batch_size=q["batch_size"],
                   lateness=q["lateness"], late=q["late"], idle_timeout=q["idle_timeout"], clock=clock,
                   checkpointable=True, checkpoint_dir=q["checkpoint_dir"], keep_checkpoints=q["keep_checkpoints"],
                   checkpoint_every=None if every is None else every.get("tuples") or dt.timedelta(
                       seconds=every["seconds"]))
        assert live._logs is not None
        live._left = Left(**st["left"], skip=True)
        for log in live._result._late_logs:
            log.resume(st["late_counts"], snapshot.table("late") if snapshot.has("late") else None)
        live._positions = list(st["positions"])
        live._closed = list(st["closed"])  # now: a producer asks before its input's replay ends
        if live._idle is not None:
            live._idle.resume(st["idle"])
        if st["sink"] is not None:
            live._resume_sink = (st["sink"], snapshot.table("pending"))
        if snapshot.has("states"):  # version 2: the rows folded into window states; before any push
            assert live._states is not None
            for batch in snapshot.table("states").to_batches():
                live._handle.load_states(*batch.__arrow_c_array__())
                live._states.load(*batch.__arrow_c_array__())
        if snapshot.has("closed"):  # sessions closed but not all left: handed out first
            live._closed_rows = snapshot.table("closed").to_batches()
            live._closed_first = list(live._closed_rows)
        # Each input's state is rebuilt here, before anything else runs: its logs, its lateness
        # buffer, its position (a checkpoint taken while the rows go back in sees them whole). The
        # engine calls that give the rows back go on a thread per input, holding the input's
        # lock until done, so that restore() returns at once: the engine takes them as the
        # consumer makes room (and a merge waits for every input), and a producer's push() on
        # the input waits for them.
        for i in range(live.inputs):
            live._locks[i].acquire()
            threading.Thread(target=live._replay, args=(i, live._restore_input(i, snapshot, st)),
                             name=f"pyarrow-ops restore input {i}", daemon=True).start()
        return live

    def _restore_input(self, i: int, snapshot: Snapshot, st: dict[str, Any]) -> list[tuple[Any, ...]]:
        # Input i's logs and lateness buffer as the snapshot has them; returns the engine calls
        # that give the engine its rows and promises: the rows it had, then its floor, then what
        # (lateness) the buffer's watermark promises.
        assert self._logs is not None
        sent = snapshot.table(f"sent-{i}")
        calls: list[tuple[Any, ...]] = []
        for batch in sent.to_batches():
            self._logs[i].add_sent(batch, None)
            calls.append(("push", batch))
        floor = st["floors"][i]
        last = times_of(sent, self._time)[-1].as_py() if sent.num_rows else None
        if floor is not None and (last is None or floor >= last):
            calls.append(("heartbeat", floor))
        self._floors[i] = floor
        self._logs[i].promise_at_least(floor)
        if st["closed"][i]:
            self._logs[i].promise_at_least(CLOSED)
        if self._lateness is not None:
            held, buffer, watermark = snapshot.table(f"held-{i}"), self._lateness[i], st["watermarks"][i]
            buffer.resume_at(st["positions"][i] - held.num_rows)
            released = buffer.heartbeat(watermark) if watermark > -(2**63) else []
            for batch in held.to_batches():  # each above the watermark: none is released
                released += buffer.push(*batch.__arrow_c_array__())
                self._logs[i].add_taken(batch, buffer.watermark)
            assert not released, "held rows above the watermark"
            if watermark > -(2**63) and watermark != floor:
                calls.append(("heartbeat", watermark))
                self._floors[i] = watermark
            self._logs[i].promise_at_least(watermark)
        if st["closed"][i]:
            calls.append(("close",))
        return calls

    def _replay(self, i: int, calls: list[tuple[Any, ...]]) -> None:
        # A restore, on input i's own thread, with self._locks[i] held (released here).
        try:
            for call in calls:
                if call[0] == "push":
                    self._handle.push(i, *call[1].__arrow_c_array__())
                elif call[0] == "heartbeat":
                    self._handle.heartbeat(i, call[1])
                else:
                    self._handle.close(i)
        except BaseException as e:  # noqa: BLE001 (the run failed or was cancelled: its calls say so)
            self._replay_errors[i] = e
        finally:
            self._locks[i].release()

    def stats(self) -> dict[str, Any]:
        """:meth:`AggregateResult.stats`, and ``idle``: with ``idle_timeout``, each period an input
        was idle, ``from_s`` and ``to_s`` (None while it lasts) in seconds of ``clock`` since the
        start."""
        d = self._result.stats()
        d["idle"] = self._idle.periods() if self._idle is not None else []
        return d

    def __enter__(self) -> LiveAggregate:
        return self

    def __exit__(self, *exc: object) -> None:
        self.cancel()
        self._result.close()


def live_aggregate(
    schema: pa.Schema,
    inputs: int,
    *,
    time: str,
    key: str | list[str] | None = None,
    window: Window | Session,
    aggs: Mapping[str, Agg],
    design: Design = "auto",
    update_threads: int | None = None,
    batch_size: int = DEFAULT_BATCH_SIZE,
    lateness: Lateness = None,
    late: Late = "error",
    idle_timeout: float | dt.timedelta | None = None,
    clock: Callable[[], float] | None = None,
    checkpointable: bool = False,
    checkpoint_every: int | dt.timedelta | None = None,
    checkpoint_dir: str | os.PathLike[str] | None = None,
    keep_checkpoints: int = 3,
) -> LiveAggregate:
    """The push-based streaming form of :func:`aggregate`: a :class:`LiveAggregate` that producers
    push record batches of ``schema`` into, per input, and a consumer iterates.

    The arguments are :func:`aggregate`'s, but ``schema`` (every pushed batch's) and ``inputs`` (how
    many inputs, 0 to ``inputs`` - 1) instead of the inputs themselves; :class:`LiveAggregate` has an
    example with producer threads. With ``lateness``, pushes may be out of time order within the
    bound: each input's rows wait in a buffer until its latest time less the bound passes them (or
    a heartbeat or ``close`` releases them), and windows close accordingly. With ``idle_timeout``
    (seconds or a timedelta of ``clock``, default ``time.monotonic``), an input silent that long
    stops holding the others back (:meth:`LiveAggregate.check_idle`; ``stats()["idle"]``).

    >>> import pyarrow as pa, pyarrow_ops as po
    >>> schema = pa.schema([("t", pa.int64()), ("k", pa.int64())])
    >>> live = po.live_aggregate(schema, 1, time="t", key="k", window=po.tumbling(10), aggs={"n": po.count()})
    >>> live.push(0, pa.record_batch({"t": [1, 2, 12], "k": [7, 7, 7]}, schema=schema))
    >>> live.close(0)
    >>> [(r["window_start"], r["k"], r["n"]) for b in live for r in b.to_pylist()]
    [(0, 7, 2), (10, 7, 1)]
    """
    return LiveAggregate(schema, inputs, time=time, key=key, window=window, aggs=aggs, design=design,
                         update_threads=update_threads, batch_size=batch_size, lateness=lateness, late=late,
                         idle_timeout=idle_timeout, clock=clock, checkpointable=checkpointable,
                         checkpoint_every=checkpoint_every, checkpoint_dir=checkpoint_dir,
                         keep_checkpoints=keep_checkpoints)
