"""Windowed, grouped aggregation over several time-sorted inputs, batch (``aggregate``) or live
(``live_aggregate``), with the designs of the multiway aggregation paper (``design=``)."""

from __future__ import annotations

import atexit
import datetime as dt
import threading
import time as time_module
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, Literal

import pyarrow as pa
import pyarrow.compute as pc

from pyarrow_ops import _engine
from pyarrow_ops.aggregates import Agg
from pyarrow_ops.experiment import NONE as NO_EXPERIMENT
from pyarrow_ops.experiment import Experiment
from pyarrow_ops.io import Input, Result, as_input_list, as_streams, conform
from pyarrow_ops.lateness import Late, LateLog, Lateness, bounds, within
from pyarrow_ops.windows import Session, Window

# The designs by name, for type checkers (design="fastest" is an error before it runs) and at run time.
Design = Literal["auto", "mq", "mqlf", "tumlsc", "sliced", "tumlmc", "wiml"]
DESIGNS: tuple[Design, ...] = ("auto", "mq", "mqlf", "tumlsc", "sliced", "tumlmc", "wiml")
"""``"auto"`` (the default): the design expected fastest for the query (docs/aggregate.md, "Designs").
``"mq"``: per-input locked queues merged by one thread (the paper's baseline); ``"mqlf"``: the
same with lock-free queues; ``"tumlsc"``: producers merge concurrently in the T-Gate, one thread
updates every window of each tuple and outputs; ``"sliced"``: TuMLSC updating one window slice
per tuple in the W-Hive; ``"tumlmc"``: the T-Gate read by ``update_threads`` threads, each updating
the W-Hive for its own keys; ``"wiml"``: producers update the W-Hive directly, unmerged. All give the
identical result."""

DEFAULT_BATCH_SIZE = 65536


def _keys(key: str | list[str] | tuple[str, ...] | None) -> list[str]:
    if key is None:
        return []
    if isinstance(key, str):
        return [key]
    if isinstance(key, (list, tuple)) and all(isinstance(k, str) for k in key):
        return list(key)
    raise TypeError(f"key must be a column name, a list of column names or None, got {key!r}")


def _aggs(aggs: Mapping[str, Agg]) -> list[tuple[str, str, str]]:
    """The checked aggregates as plain (output name, function, column) values: what a pipeline's
    steps hold (they are pickled to Spark's workers); _agg_specs makes the engine's specs."""
    if not isinstance(aggs, Mapping) or not aggs:
        raise TypeError("aggs must be a non-empty dict of output name -> aggregate, e.g. {'n': po.count()}")
    out = []
    for name, agg in aggs.items():
        if not isinstance(name, str) or not isinstance(agg, Agg):
            raise TypeError(f"aggs[{name!r}] must be an aggregate such as po.count() or po.mean('x'), got {agg!r}")
        out.append((name, agg.function, agg.column or ""))
    return out


def _agg_specs(aggs: list[tuple[str, str, str]]) -> list[_engine.AggSpec]:
    return [_engine.AggSpec(name, _engine.AggFunction[function], column) for name, function, column in aggs]


def _design(design: Design) -> _engine.Design | None:
    """The engine's design; None for "auto" (the engine chooses once it sees the schema)."""
    return None if design == "auto" else _engine.Design[design]


def _query(time: str, keys: list[str], window: Window | Session, aggs: list[tuple[str, str, str]],
           time_type: pa.DataType) -> _engine.AggregateQuery:
    if isinstance(window, Session):  # the fixed window is unused (window/sessions.h)
        return _engine.AggregateQuery(time, keys, _engine.WindowSpec(1, 1, 0), _agg_specs(aggs),
                                      session_gap=window.resolve(time_type))
    return _engine.AggregateQuery(time, keys, _engine.WindowSpec(*window.resolve(time_type)), _agg_specs(aggs))


def _check(design: str, threads: int | None, batch_size: int, window: Window | Session,
           update_threads: int | None = None) -> None:
    if design not in DESIGNS:
        raise ValueError(f"design must be one of {', '.join(map(repr, DESIGNS))}, got {design!r}")
    for name, value in (("threads", threads), ("update_threads", update_threads)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise ValueError(f"{name} must be a positive int or None, got {value!r}")
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive int, got {batch_size!r}")
    if not isinstance(window, (Window, Session)):
        raise TypeError(f"window must be po.sliding(...), po.tumbling(...) or po.session(...), got {window!r}")


# Runs not yet garbage collected. At interpreter exit their engine threads are stopped and joined
# while Python still runs normally: one busy pulling a Python input (a generator) needs the GIL
# to finish, and once finalization has begun a thread that asks for the GIL is torn down midway.
_RUNS: weakref.WeakSet[AggregateResult] = weakref.WeakSet()
EXIT_STOP_TIMEOUT_S = 10.0


@atexit.register
def _stop_runs_at_exit() -> None:
    for run in list(_RUNS):
        run._handle.stop(EXIT_STOP_TIMEOUT_S)


class AggregateResult(Result):
    """A :class:`Result` of window rows, with the run's statistics."""

    def __init__(self, native: _engine.Stream, handle: _engine.Aggregation) -> None:
        super().__init__(native)
        self._handle = handle
        _RUNS.add(self)

    def stats(self) -> dict[str, Any]:
        """Tuples read, window sets emitted, the design used, (streaming) per-window-set latencies
        in ns, ``peak_live_arenas``: the most T-Gate arenas (at most 4096 rows each) alive at
        once (None for designs without a T-Gate), and ``late``: with ``lateness`` or ``late``, the
        policy and the late rows per input."""
        d = self._handle.stats()
        d["late"] = self._late_stats()
        return d


def aggregate(
    inputs: Input | Iterable[Input],
    *,
    time: str,
    key: str | list[str] | None = None,
    window: Window | Session,
    aggs: Mapping[str, Agg],
    design: Design = "auto",
    threads: int | None = None,
    update_threads: int | None = None,
    batch_size: int = DEFAULT_BATCH_SIZE,
    experiment: Experiment = NO_EXPERIMENT,
    lateness: Lateness = None,
    late: Late = "error",
) -> AggregateResult:
    """Aggregates time-sorted inputs over time windows, per key, deterministically.

    Tuples of all inputs are taken in the merged order (time, input index, position), each window
    and key gets one row per aggregate, and rows come out by window start, then key. The exact
    rules are in docs/semantics.md; every design and thread count gives the same table.

    Args:
        inputs: as for :func:`pyarrow_ops.merge`: tables, readers, Polars frames, Parquet paths
            or iterables of batches, all with the same columns, each sorted by ``time``.
        time: the time column (timestamp, date32, int32 or int64).
        key: a column, a list of columns, or None for one group.
        window: ``po.sliding(size, advance, offset=0)`` or ``po.tumbling(size)``; lengths are ints
            in the time column's unit or ``datetime.timedelta``.
        aggs: output column name -> ``po.count()``, ``po.sum(c)``, ``po.mean(c)``, ``po.min(c)``,
            ``po.max(c)``, ``po.first(c)``, ``po.last(c)``.
        design: ``"auto"`` or one of :data:`DESIGNS`; ``stats()["design"]`` names the one used.
        threads: engine threads reading the inputs (each reads every ``threads``-th input);
            default min(inputs, cores).
        update_threads: ``"tumlmc"`` only: threads updating windows; default: cores.
        batch_size: rows per result batch.
        experiment: for benchmarks: a :class:`pyarrow_ops.Experiment` (pacing); changes no result.
        lateness, late: inputs out of time order within a bound, and what happens to rows later
            than that, as for :func:`pyarrow_ops.merge`; ``stats()["late"]`` counts them and
            ``result.late`` holds them (``late="side"``). The result is the aggregate of the rows
            that were not late, whatever the design, threads and batch sizes.

    Returns:
        An :class:`AggregateResult` with columns ``window_start``, ``window_end``, the key columns
        and one per aggregate.

    >>> import pyarrow as pa, pyarrow_ops as po
    >>> a = pa.table({"t": [0, 1, 5], "k": ["x", "y", "x"], "v": [1.0, 2.0, 3.0]})
    >>> b = pa.table({"t": [1, 4], "k": ["x", "x"], "v": [10.0, 20.0]})
    >>> out = po.aggregate([a, b], time="t", key="k", window=po.tumbling(4),
    ...                    aggs={"n": po.count(), "first": po.first("v")}).to_arrow()
    >>> out.to_pylist()[:2]
    [{'window_start': 0, 'window_end': 4, 'k': 'x', 'n': 2, 'first': 1.0}, {'window_start': 0, 'window_end': 4, 'k': 'y', 'n': 1, 'first': 2.0}]
    >>> out.num_rows
    3
    """
    if not isinstance(time, str):
        raise TypeError(f"time must be a column name (str), got {type(time).__name__}")
    _check(design, threads, batch_size, window, update_threads)
    if not isinstance(experiment, Experiment):
        raise TypeError(f"experiment must be a pyarrow_ops.Experiment, got {type(experiment).__name__}")
    keys, agg_list = _keys(key), _aggs(aggs)
    items = as_input_list(inputs)
    streams: list[_engine.Stream] = []
    try:
        streams = as_streams(items)
        schema = pa.schema(streams[0]) if streams else None
        if schema is None:
            raise _engine.InvalidInputError("aggregate needs at least one input")
        if time not in schema.names:
            raise _engine.InvalidInputError(
                f"time column '{time}' not found in input 0; its columns are: {', '.join(schema.names)}")
        options = _engine.AggregateOptions(
            _query(time, keys, window, agg_list, schema.field(time).type), threads=threads or 0,
            update_threads=update_threads or 0, batch_size=batch_size, rate=float(experiment.rate))
        log = None
        if (input_bounds := bounds(lateness, late, len(streams), schema.field(time).type)) is not None:
            log = LateLog(schema, late, len(streams))
            streams = within(streams, time, input_bounds, log)
        native, handle = _engine.aggregate(streams, options, _design(design))
        result = AggregateResult(native, handle)
        if log is not None:
            result._late_logs.append(log)
        return result
    finally:
        for stream in streams:
            stream.close()


def _seconds(value: float | dt.timedelta | None) -> float | None:
    if value is None:
        return None
    if isinstance(value, dt.timedelta):
        value = value.total_seconds()
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise ValueError(f"idle_timeout must be positive seconds or a datetime.timedelta, got {value!r}")
    return float(value)


def _latest_time(batch: Any, time: str, time_type: pa.DataType) -> int | None:
    """The greatest time of a pushed batch as the column's stored integer (None when empty)."""
    column = pa.record_batch(batch).column(time)
    if len(column) == 0:
        return None
    return pc.max(column.cast(pa.int32() if pa.types.is_date32(time_type) else pa.int64())).as_py()


def _watch_idle(ref: weakref.ref, stop: threading.Event, period: float) -> None:
    """A real clock's idle check, a few times per timeout until the run ends. Holds the
    LiveAggregate only while checking, so one its owner dropped is collected (and the thread
    ends)."""
    while not stop.wait(period):
        live = ref()
        if live is None or all(live._closed):
            return
        try:
            live.check_idle()
        except Exception:  # the run failed or was cancelled: its consumer hears of it
            return
        del live


def _time_value(value: Any, time_type: pa.DataType) -> int:
    """A heartbeat time as the column's stored integer."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, (dt.datetime, dt.date)) or hasattr(value, "dtype"):
        scalar = pa.scalar(value).cast(time_type)
        return scalar.cast(pa.int64()).as_py() if not pa.types.is_date32(time_type) else scalar.cast(
            pa.int32()).as_py()
    raise TypeError(f"a heartbeat time must be an int, datetime or date, got {type(value).__name__}")


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
                 clock: Callable[[], float] | None = None) -> None:
        if isinstance(inputs, bool) or not isinstance(inputs, int) or inputs < 1:
            raise ValueError(f"inputs must be a positive int, got {inputs!r}")
        _check(design, None, batch_size, window, update_threads)
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
        self._idle_timeout = _seconds(idle_timeout)
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
        # Idle inputs (idle_timeout): processing time from `clock`; an input silent for the timeout
        # is heartbeated to the least floor of the inputs that are not idle, again whenever that
        # moves, until it speaks. _idle_lock guards the activity times and the periods; it is
        # taken after an input's lock, never before.
        self._clock = clock or time_module.monotonic
        self._started = self._clock()
        self._idle_lock = threading.Lock()
        self._active_at = [self._started] * inputs
        self._idle: list[dict[str, Any] | None] = [None] * inputs  # the open idle period, per input
        self._idle_periods: list[dict[str, Any]] = []
        self._stop_watch = threading.Event()
        if self._idle_timeout is not None and clock is None:
            watcher = threading.Thread(target=_watch_idle, args=(weakref.ref(self), self._stop_watch, self._idle_timeout / 4),
                                       name="pyarrow-ops idle inputs", daemon=True)
            watcher.start()

    def _refuse_if_closed(self, input: int, call: str) -> None:
        # As the engine does, before anything changes; under self._locks[input].
        if self._closed[input]:
            raise _engine.UsageError(f"{call}() on input {input}, which is closed: close() promised it sends "
                                     "nothing more; the call changed nothing")

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
            self._handle.heartbeat(input, value)
            self._floors[input] = value if self._floors[input] is None else max(self._floors[input], value)
        else:
            buffer = self._lateness[input]
            self._forward(input, buffer.heartbeat(value), buffer.watermark)

    def _spoke(self, input: int) -> None:
        # After a call of `input`: it is active, and an idle period of it ends.
        if self._idle_timeout is None:
            return
        with self._idle_lock:
            now = self._clock()
            self._active_at[input] = now
            if self._idle[input] is not None:
                self._idle[input]["to_s"] = now - self._started
                self._idle[input] = None
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
        with self._locks[input]:
            self._refuse_if_closed(input, "push")
            if self._lateness is not None:
                buffer = self._lateness[input]
                self._forward(input, buffer.push(schema_capsule, array_capsule), buffer.watermark)
            else:
                latest = _latest_time(batch, self._time, self._time_type) if self._idle_timeout is not None else None
                self._handle.push(input, schema_capsule, array_capsule)
                if latest is not None:
                    self._floors[input] = latest if self._floors[input] is None else max(self._floors[input], latest)
        self._spoke(input)

    def heartbeat(self, input: int, time: Any) -> None:
        """Promises that ``input`` sends nothing earlier than ``time``. :class:`UsageError` if
        ``input`` was closed. With ``lateness``, a row of ``input`` earlier than ``time`` that
        comes after it is late."""
        input, value = self._input(input), _time_value(time, self._time_type)
        with self._locks[input]:
            self._refuse_if_closed(input, "heartbeat")
            self._promise(input, value)
        self._spoke(input)

    def close(self, input: int) -> None:
        """``input`` sends nothing more. Closing it again raises :class:`UsageError`, as does any
        later push or heartbeat on it: each is refused whole, so nothing is lost or held."""
        input = self._input(input)
        with self._locks[input]:
            self._refuse_if_closed(input, "close")
            if self._lateness is not None:
                self._forward(input, self._lateness[input].finish(), None)
            self._handle.close(input)
            self._closed[input] = True
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
        if self._idle_timeout is None:
            return
        with self._idle_lock:
            now = self._clock()
            idle = []
            for i in range(self.inputs):
                if self._closed[i]:
                    continue
                if self._idle[i] is None and now - self._active_at[i] >= self._idle_timeout:
                    self._idle[i] = {"input": i, "from_s": self._active_at[i] + self._idle_timeout - self._started,
                                     "to_s": None}
                    self._idle_periods.append(self._idle[i])
                if self._idle[i] is not None:
                    idle.append(i)
            others = [i for i in range(self.inputs) if not self._closed[i] and self._idle[i] is None]
        if not idle:
            return
        if not others:
            # Every open input is idle: the quiet ones that never spoke stop holding back what
            # the others have sent; nobody is moved past the least time an input has reached.
            others = [i for i in idle if self._floors[i] is not None]
        if not others or any(self._floors[i] is None for i in others):
            return  # an input still speaking has promised nothing yet: wait for it
        target = min(self._floors[i] for i in others)  # type: ignore[type-var]
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
        return iter(self._result)

    def stats(self) -> dict[str, Any]:
        """:meth:`AggregateResult.stats`, and ``idle``: with ``idle_timeout``, each period an input
        was idle, ``from_s`` and ``to_s`` (None while it lasts) in seconds of ``clock`` since the
        start."""
        d = self._result.stats()
        with self._idle_lock:
            d["idle"] = [dict(p) for p in self._idle_periods]
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
                         idle_timeout=idle_timeout, clock=clock)
