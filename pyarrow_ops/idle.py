"""Idle inputs: after ``idle_timeout`` of processing time without a call, a quiet input stops
holding the others back, as if it had heartbeated to their floor (docs/time.md). One rule for
:func:`pyarrow_ops.live_aggregate` and for a pipeline's :class:`pyarrow_ops.LiveInput` inputs; the
owner applies the promise (a heartbeat) its own way."""

from __future__ import annotations

import datetime as dt
import threading
import time as time_module
import weakref
from collections.abc import Callable, Sequence
from typing import Any


def timeout_seconds(value: float | dt.timedelta | None) -> float | None:
    """``idle_timeout=`` as seconds (None: no timeout)."""
    if value is None:
        return None
    if isinstance(value, dt.timedelta):
        value = value.total_seconds()
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise ValueError(f"idle_timeout must be positive seconds or a datetime.timedelta, got {value!r}")
    return float(value)


def check_clock(clock: object) -> Callable[[], float]:
    """``clock=`` (None: the monotonic clock)."""
    if clock is None:
        return time_module.monotonic
    if not callable(clock):
        raise TypeError(f"clock must be a function returning seconds, got {type(clock).__name__}")
    return clock  # type: ignore[return-value]


class IdleInputs:
    """Activity and idle periods of ``inputs`` inputs by ``clock`` (seconds). Thread-safe: its lock
    is taken after an input's own lock, never before."""

    def __init__(self, inputs: int, timeout: float, clock: Callable[[], float]) -> None:
        self.timeout = timeout
        self.clock = clock
        self.started = clock()
        self._lock = threading.Lock()
        self._active_at = [self.started] * inputs
        self._calls = [0] * inputs  # calls in progress, per input: an input inside a call is never idle
        self._idle: list[dict[str, Any] | None] = [None] * inputs  # the open idle period, per input
        self._periods: list[dict[str, Any]] = []

    def began(self, i: int) -> None:
        """A call of input ``i`` starts (a push may wait for room: meanwhile it is not idle)."""
        with self._lock:
            self._calls[i] += 1

    def spoke(self, i: int) -> None:
        """A call of input ``i`` ended: it is active now, and an idle period of it ends."""
        with self._lock:
            now = self.clock()
            self._calls[i] -= 1
            self._active_at[i] = now
            if self._idle[i] is not None:
                self._idle[i]["to_s"] = now - self.started  # type: ignore[index]
                self._idle[i] = None

    def due(self, closed: Sequence[bool], floors: Sequence[int | None]) -> tuple[list[int], int | None]:
        """The inputs idle now, and the time to promise for them (None: nothing to promise yet).
        ``floors``: each input's latest promised time (its latest row, heartbeat or watermark).
        The promise is the least floor of the open inputs that are not idle; every open input
        being idle, of those that have a floor (the quiet ones that never spoke stop holding back
        what the others sent; nobody moves past the least time an input has reached)."""
        with self._lock:
            now = self.clock()
            idle = []
            for i in range(len(closed)):
                if closed[i] or self._calls[i]:
                    continue
                if self._idle[i] is None and now - self._active_at[i] >= self.timeout:
                    self._idle[i] = {"input": i, "from_s": self._active_at[i] + self.timeout - self.started, "to_s": None}
                    self._periods.append(self._idle[i])  # type: ignore[arg-type]
                if self._idle[i] is not None:
                    idle.append(i)
            others = [i for i in range(len(closed)) if not closed[i] and self._idle[i] is None]
        if not idle:
            return idle, None
        if not others:
            others = [i for i in idle if floors[i] is not None]
        if not others or any(floors[i] is None for i in others):
            return idle, None  # an input still speaking has promised nothing yet: wait for it
        return idle, min(floors[i] for i in others)  # type: ignore[type-var]

    def periods(self) -> list[dict[str, Any]]:
        """Each idle period so far: ``input``, ``from_s``, ``to_s`` (None while it lasts), in
        seconds of the clock since the start."""
        with self._lock:
            return [dict(p) for p in self._periods]

    def resume(self, periods: list[dict[str, Any]]) -> None:
        """A restored run: the periods its snapshot recorded."""
        with self._lock:
            self._periods = [dict(p) for p in periods]


def watch(owner: Any, stop: threading.Event, period: float, name: str) -> None:
    """Starts a thread that calls ``owner.check_idle()`` every ``period`` seconds until ``stop`` is
    set, ``owner`` is collected (it holds only a weak reference between checks), or a check raises
    (the run failed or was cancelled: its consumer hears of it)."""
    ref = weakref.ref(owner)

    def run() -> None:
        while not stop.wait(period):
            target = ref()
            if target is None:
                return
            try:
                target.check_idle()
            except Exception:
                return
            del target

    threading.Thread(target=run, name=name, daemon=True).start()
