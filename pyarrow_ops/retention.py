"""What a live aggregation keeps for its checkpoints, and the rule that makes a restore exact.

The state of a window aggregation is a function of the rows in its open windows, folded in the
merged order (float sums are exact and first/last compare the merged order, so nothing depends on
how the rows were batched or interleaved). A snapshot therefore saves rows and window states, not
the engine's internal structures:

- per input, the rows it handed to the engine from the *retention floor* on that are not folded
  yet. Output rows leave in (window_end, keys) order; once the row ending at E has left, every row
  still to leave ends at E or later, so starts at E - size or later: the rows of a window still to
  leave all have times >= E - size, the floor. When the engine's batch that row came in ended a
  window set (it was shorter than batch_size: the engine cuts only there or when a batch is full),
  every row ending at E has left, the next to leave ends at E + advance or later, and the floor is
  E + advance - size (for tumbling windows E: one window less to keep). Older rows are forgotten
  as the output moves on;
- the window states (``_engine.WindowStates``, engine/window/window_states.h): rows older than
  every input's *promise* (the least time it may still send: :attr:`InputLog.promise`) precede,
  in the merged order, every row still to come, so they are folded per (window, key) and leave
  the logs; windows ending before E are forgotten. Memory and snapshots stay the size of the
  open windows' keys, plus the rows no promise has passed;
- per input with ``lateness``, the rows its reorder buffer still holds: exactly the rows it took
  whose time is above its watermark (a row at or below it has left, or was late), and the
  watermark itself;
- how many output rows had left, the last one's window_end E, and how many left rows end at E.

A restore loads the states into a new engine (a window's loaded state is folded in first), feeds
it the saved rows, which rebuild the open windows exactly and re-form some windows that had left,
partially (those starting before the floor, all ending before E) or whole (ending at E);
:class:`Left` drops the rows ending before E and the first ``c`` ending at E, and what follows is
exactly the uninterrupted run's next row on.
"""

from __future__ import annotations

import threading
from collections import deque
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc


def times_of(batch: pa.RecordBatch | pa.Table, time: str) -> pa.Array:
    column = batch.column(time)
    if pa.types.is_integer(column.type):
        return column
    return pc.cast(column, pa.int32() if pa.types.is_date32(column.type) else pa.int64())


class Left:
    """The output rows that have left (to the consumer, or into a sink): their count, the last
    one's window_end and how many left rows end there. On a restored run it also drops the
    rows that had left before the snapshot (the rule in this module's docstring)."""

    def __init__(self, rows: int = 0, end: int | None = None, at_end: int = 0, whole: bool = False,
                 skip: bool = False) -> None:
        self.lock = threading.Lock()
        self.rows, self.end, self.at_end = rows, end, at_end
        # Whether every row ending at `end` has left: the engine cuts its output only where a
        # window set ends or where a batch is full (window/window_aggregate.h), so a batch of
        # fewer than batch_size rows ends at a window set's end.
        self.whole = whole
        # On a restored run: rows ending before _skip_end, then _skip_at_end rows ending there, are
        # the ones that had left already.
        self._skip_end = end if skip else None
        self._skip_at_end = at_end if skip else 0

    def drop_seen(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        """``batch`` less the rows that had left before the snapshot (a restored run only)."""
        if self._skip_end is None or batch.num_rows == 0:
            return batch
        ends = times_of(batch, "window_end")
        before = pc.sum(pc.less(ends, self._skip_end)).as_py() or 0
        at = pc.sum(pc.equal(ends, self._skip_end)).as_py() or 0
        drop = before + min(at, self._skip_at_end)
        self._skip_at_end -= min(at, self._skip_at_end)
        if drop < batch.num_rows:
            self._skip_end = None  # a row after the snapshot's: nothing more to drop
        return batch.slice(drop)

    def count(self, batch: pa.RecordBatch, whole: bool) -> None:
        """Records ``batch`` as left (under ``lock``); ``whole``: the engine's batch it was cut
        from ended a window set."""
        if batch.num_rows == 0:
            return
        self.whole = whole
        ends = times_of(batch, "window_end")
        last = ends[-1].as_py()
        here = pc.sum(pc.equal(ends, last)).as_py()
        self.at_end = self.at_end + here if last == self.end else here
        self.end = last
        self.rows += batch.num_rows

    def state(self) -> dict[str, Any]:
        return {"rows": self.rows, "end": self.end, "at_end": self.at_end, "whole": self.whole}


CLOSED = 2**63
"""The promise of a closed input: above every time (no row will come)."""


class InputLog:
    """One input's retained rows (under that input's lock): the rows handed to the engine, in
    order, whose batches end at or after the floor and that are not folded into the window
    states yet; with lateness, the rows given to its buffer whose batches reach above its
    watermark. And its promise: the least time a row it hands the engine from now on may have
    (its last sent row's, heartbeat's or, with lateness, watermark's; ``CLOSED``), None before any."""

    def __init__(self, time: str) -> None:
        self._time = time
        # (batch, its last time, the position of its first row among the rows sent): in time order
        self.sent: deque[tuple[pa.RecordBatch, int, int]] = deque()
        self.taken: deque[tuple[pa.RecordBatch, int]] = deque()  # (batch, its greatest time): any order
        self.rows = 0       # rows in `sent`
        self.position = 0   # rows ever sent
        self.promise: int | None = None

    def promise_at_least(self, time: int | None) -> None:
        if time is not None and (self.promise is None or time > self.promise):
            self.promise = time

    def add_sent(self, batch: pa.RecordBatch, floor: int | None) -> None:
        if batch.num_rows:
            last = times_of(batch, self._time)[-1].as_py()
            self.sent.append((batch, last, self.position))
            self.rows += batch.num_rows
            self.position += batch.num_rows
            self.promise_at_least(last)
        if floor is not None:
            while self.sent and self.sent[0][1] < floor:
                self.rows -= self.sent.popleft()[0].num_rows

    def take_before(self, below: int) -> list[tuple[pa.RecordBatch, int]]:
        """Removes and returns the sent rows with times below ``below`` (a prefix: they are in
        time order), as (rows, position of the first): for the window states."""
        out = []
        while self.sent and self.sent[0][1] < below:
            batch, _, first = self.sent.popleft()
            out.append((batch, first))
            self.rows -= batch.num_rows
        if self.sent:
            batch, last, first = self.sent[0]
            cut = pc.sum(pc.less(times_of(batch, self._time), below)).as_py() or 0
            if cut:
                out.append((batch.slice(0, cut), first))
                self.sent[0] = (batch.slice(cut), last, first + cut)
                self.rows -= cut
        return out

    def add_taken(self, batch: pa.RecordBatch, watermark: int) -> None:
        if batch.num_rows:
            self.taken.append((batch, pc.max(times_of(batch, self._time)).as_py()))
        while self.taken and self.taken[0][1] <= watermark:
            self.taken.popleft()

    def sent_rows(self, schema: pa.Schema, floor: int | None) -> pa.Table:
        """The rows handed to the engine at or after ``floor``, in order: views of the kept
        batches (they are in time order, so only the first ones need cutting), no copy."""
        batches = []
        for batch, last, _ in self.sent:
            if floor is not None and last < floor:
                continue
            if floor is not None and not batches:
                first = pc.sum(pc.less(times_of(batch, self._time), floor)).as_py() or 0
                batch = batch.slice(first)
            batches.append(batch)
        return pa.Table.from_batches(batches, schema=schema)

    def held_rows(self, schema: pa.Schema, watermark: int) -> pa.Table:
        """The rows the reorder buffer holds: taken, with times above ``watermark``, in arrival order."""
        table = pa.Table.from_batches([b for b, _ in self.taken], schema=schema)
        if table.num_rows == 0:
            return table
        return table.filter(pc.greater(times_of(table, self._time), watermark))
