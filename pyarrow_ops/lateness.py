"""Inputs out of order within a bound: the ``lateness=`` and ``late=`` arguments of
:func:`pyarrow_ops.merge`, :func:`pyarrow_ops.aggregate`, :func:`pyarrow_ops.live_aggregate` and
:class:`pyarrow_ops.Pipeline` (docs/time.md has the rules and examples).

Each input may arrive out of time order by up to its bound; the engine puts it back in order (ties
by arrival) before the merge, and a row later than the bound allows follows ``late``: ``"error"``
(an :class:`UnsortedInputError` naming the input, row and times), ``"drop"`` (counted) or
``"side"`` (counted and kept: ``result.late``).

>>> import pyarrow as pa, pyarrow_ops as po
>>> t = pa.table({"t": [0, 20, 10, 30, 1], "v": [0, 2, 1, 3, 9]})
>>> result = po.merge([t], time="t", lateness=10, late="side")
>>> result.to_arrow()["v"].to_pylist()
[0, 1, 2, 3]
>>> result.late.to_pylist()
[{'t': 1, 'v': 9, 'input': 0, 'row': 4}]
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import Any, Literal, TypeAlias

import pyarrow as pa

from pyarrow_ops import _engine
from pyarrow_ops.windows import Duration, in_units

Late: TypeAlias = Literal["error", "drop", "side"]
LATE_POLICIES: tuple[str, ...] = ("error", "drop", "side")
Lateness: TypeAlias = Duration | Sequence[Duration | None] | None
"""A bound for every input, or one per input (None: that input must be sorted), or None."""


def check_late(late: object) -> None:
    if late not in LATE_POLICIES:
        raise ValueError(f"late must be one of {', '.join(map(repr, LATE_POLICIES))}, got {late!r}")


def bounds(lateness: Lateness, late: str, inputs: int, time_type: pa.DataType) -> list[int] | None:
    """Each input's bound in the time column's unit, or None where nothing needs reordering (no
    lateness and late="error": the sorted check of the merge itself applies, at no cost). With a
    ``late`` policy but no bound, the bound is 0: rows out of order are late."""
    check_late(late)
    if lateness is None:
        return None if late == "error" else [0] * inputs
    if isinstance(lateness, (list, tuple)):
        if len(lateness) != inputs:
            raise ValueError(f"lateness has {len(lateness)} entries for {inputs} inputs; give one per input or one for all")
        values = list(lateness)
    else:
        values = [lateness] * inputs
    out = []
    for i, value in enumerate(values):
        bound = 0 if value is None else in_units(value, f"lateness of input {i}", time_type)  # type: ignore[arg-type]
        if bound < 0:
            raise ValueError(f"lateness of input {i} must not be negative, got {value!r}")
        out.append(bound)
    return out


class LateLog:
    """The late rows of one run's inputs: counted for every policy, kept for ``late="side"``."""

    def __init__(self, schema: pa.Schema, late: str, inputs: int) -> None:
        self.policy = late
        self.inputs = inputs
        self.rows = _engine.LateRows()
        self._schema = schema
        self._batches: list[pa.RecordBatch] = []
        self._before = [0] * inputs  # late rows per input before a restore (pyarrow_ops/checkpoint.py)
        self.lock = threading.Lock()  # table() against a checkpoint's cut (pyarrow_ops/replay.py)
        if late == "side":
            clash = [c for c in ("input", "row") if c in schema.names]
            if clash:
                raise _engine.InvalidInputError(
                    f"late=\"side\" adds the columns 'input' and 'row' to the late rows, and the inputs already have "
                    f"{clash}; rename them first")

    def counts(self) -> list[int]:
        """Late rows per input so far."""
        return [self._before[i] + self.rows.count(i) for i in range(self.inputs)]

    def resume(self, counts: list[int], kept: pa.Table | None) -> None:
        """A restored run: the late rows counted (and, ``late="side"``, kept) before its snapshot."""
        self._before = list(counts)
        if kept is not None and self.policy == "side":
            self._batches = kept.to_batches()

    def table(self) -> pa.Table | None:
        """The late rows so far (``late="side"``; None otherwise): the input's columns, then ``input``
        (int32) and ``row`` (int64, its position in the input's arrival order), by input and row."""
        if self.policy != "side":
            return None
        with self.lock:
            for index, rows, batch in self.rows.take():
                self._batches.append(self._tagged(index, pa.record_batch(batch), pa.array(rows, pa.int64())))
            return self._table(self._batches)

    def kept(self, untaken: Sequence[tuple[int, Any]]) -> pa.Table:
        """A cut's late rows (``late="side"``; under ``lock``, the cut taken): those taken so far,
        and each input's not taken yet, as its lateness buffer saved them (the input's columns,
        then ``row``)."""
        batches = list(self._batches)
        for index, saved in untaken:
            rb = pa.record_batch(saved)
            batches.append(self._tagged(index, rb.drop_columns(["row"]), rb.column("row")))
        return self._table(batches)

    @staticmethod
    def _tagged(index: int, rb: pa.RecordBatch, rows: pa.Array) -> pa.RecordBatch:
        rb = rb.append_column("input", pa.array([index] * rb.num_rows, pa.int32()))
        return rb.append_column("row", rows)

    def _table(self, batches: list[pa.RecordBatch]) -> pa.Table:
        schema = self._schema.append(pa.field("input", pa.int32())).append(pa.field("row", pa.int64()))
        batches = sorted((b for b in batches if b.num_rows), key=lambda b: b.column(b.num_columns - 2)[0].as_py())
        return pa.Table.from_batches([b.cast(schema) for b in batches], schema=schema)


def within(streams: list[_engine.Stream], time: str, bounds: list[int], log: LateLog,
           labels: Sequence[str] | None = None, resume: Mapping[str, Any] | None = None) -> list[_engine.Stream]:
    """Each stream put in time order within its bound (consumes them). ``resume``: a restore from
    a cut (pyarrow_ops/replay.py ``input_states``): ``inputs``, per input its buffer's state and
    released rows, and ``late``, the late rows kept before the cut."""
    resumes = resume["inputs"] if resume else [None] * len(streams)
    if resume:  # the late rows counted (its meta's column "late") and kept before the cut
        log.resume([0 if r is None else pa.record_batch(r[0][0]).column("late")[0].as_py() for r in resumes],
                   resume.get("late"))
    return [_engine.within_lateness(s, i, labels[i] if labels else f"input {i}", time, b, log.policy, log.rows, r)
            for i, (s, b, r) in enumerate(zip(streams, bounds, resumes, strict=True))]
