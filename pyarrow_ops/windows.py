"""Time windows for :func:`pyarrow_ops.aggregate`."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

import pyarrow as pa

Duration = int | dt.timedelta
"""A window length: an int in the time column's own unit, or a timedelta (timestamp and date columns)."""

_PER_SECOND = {"s": 1, "ms": 1_000, "us": 1_000_000, "ns": 1_000_000_000}


@dataclass(frozen=True)
class Window:
    """Windows ``[start, start + size)`` for every ``start = offset + k * advance``.

    Build one with :func:`sliding` or :func:`tumbling`.
    """

    size: Duration
    advance: Duration
    offset: Duration = 0

    def resolve(self, time_type: pa.DataType) -> tuple[int, int, int]:
        """(size, advance, offset) as integers in the unit of a time column of ``time_type``."""
        return tuple(in_units(v, f"window {name}", time_type) for name, v in  # type: ignore[return-value]
                     (("size", self.size), ("advance", self.advance), ("offset", self.offset)))


@dataclass(frozen=True)
class Session:
    """Session windows: per key, a run of the key's tuples each at most ``gap`` after the one
    before (a tuple more than ``gap`` after its key's previous one starts a new session, as
    ``Pipeline.sessionize`` numbers them). One row per session: ``window_start`` its first tuple's
    time, ``window_end`` its last tuple's time + ``gap``. Build one with :func:`session`."""

    gap: Duration

    def resolve(self, time_type: pa.DataType) -> int:
        """The gap as an int in the unit of a time column of ``time_type`` (at least 0)."""
        gap = in_units(self.gap, "session gap", time_type)
        if gap < 0:
            raise ValueError(f"session gap must be at least 0, got {self.gap!r}")
        return gap


def session(gap: Duration) -> Session:
    """Session windows with ``gap`` (an int in the time column's unit, or a timedelta), for
    :func:`pyarrow_ops.aggregate` and :func:`pyarrow_ops.live_aggregate`: rows leave in
    ``window_end`` order (keys ascending for equal ends) as soon as every input has passed the end.

    >>> import pyarrow as pa, pyarrow_ops as po
    >>> clicks = pa.table({"t": [0, 5, 30, 31, 90], "user": [1, 1, 1, 2, 1]})
    >>> out = po.aggregate(clicks, time="t", key="user", window=po.session(10), aggs={"n": po.count()})
    >>> [(r["window_start"], r["window_end"], r["user"], r["n"]) for r in out.to_arrow().to_pylist()]
    [(0, 15, 1, 2), (30, 40, 1, 1), (31, 41, 2, 1), (90, 100, 1, 1)]
    """
    return Session(gap)


def sliding(size: Duration, advance: Duration, offset: Duration = 0) -> Window:
    """Sliding windows of length ``size`` starting every ``advance``.

    >>> import datetime as dt, pyarrow_ops as po
    >>> po.sliding(size=30, advance=3)
    Window(size=30, advance=3, offset=0)
    >>> po.sliding(dt.timedelta(seconds=30), dt.timedelta(seconds=3)).resolve(pa.timestamp("ms"))
    (30000, 3000, 0)
    """
    return Window(size, advance, offset)


def tumbling(size: Duration, offset: Duration = 0) -> Window:
    """Back-to-back windows of length ``size``: ``sliding(size, size, offset)``."""
    return Window(size, size, offset)


def in_units(value: Duration, name: str, time_type: pa.DataType) -> int:
    """A length (``name`` in errors: "window size", "lateness") as an int in the unit of a time
    column of ``time_type``."""
    if isinstance(value, bool) or not isinstance(value, (int, dt.timedelta)):
        raise TypeError(f"{name} must be an int or a datetime.timedelta, got {type(value).__name__}")
    if isinstance(value, int):
        return value
    if pa.types.is_timestamp(time_type):
        per_second = _PER_SECOND[time_type.unit]
    elif pa.types.is_date32(time_type):
        per_second = None
    else:
        raise TypeError(f"{name} is a timedelta but the time column is {time_type}; use an int")
    micros = (value.days * 86_400 + value.seconds) * 1_000_000 + value.microseconds
    if per_second is None:
        days, rest = divmod(micros, 86_400_000_000)
        if rest:
            raise ValueError(f"{name} {value} is not a whole number of days (the date32 unit)")
        return days
    scaled, rest = divmod(micros * per_second, 1_000_000)
    if rest:
        raise ValueError(f"{name} {value} is not a whole number of the time column's unit ({time_type.unit})")
    return scaled


def time_value(value: object, time_type: pa.DataType) -> int:
    """A point in time (a heartbeat's) as the stored integer of a time column of ``time_type``: an
    int as it is; a datetime, date or numpy datetime64 cast to the column's type."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, (dt.datetime, dt.date)) or hasattr(value, "dtype"):
        scalar = pa.scalar(value).cast(time_type)
        return scalar.cast(pa.int32() if pa.types.is_date32(time_type) else pa.int64()).as_py()
    raise TypeError(f"a heartbeat time must be an int, datetime or date, got {type(value).__name__}")
