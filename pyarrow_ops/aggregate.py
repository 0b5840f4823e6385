"""Windowed, grouped aggregation over several time-sorted inputs, batch (``aggregate``) or live
(``live_aggregate``), with the designs of the multiway aggregation paper (``design=``)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Literal

import pyarrow as pa

from pyarrow_ops import _engine, shutdown
from pyarrow_ops.aggregates import Agg
from pyarrow_ops.experiment import NONE as NO_EXPERIMENT
from pyarrow_ops.experiment import Experiment
from pyarrow_ops.io import Input, Result, as_input_list, as_streams
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


class AggregateResult(Result):
    """A :class:`Result` of window rows, with the run's statistics."""

    def __init__(self, native: _engine.Stream, handle: _engine.Aggregation) -> None:
        super().__init__(native)
        self._handle = handle
        shutdown.register(self)  # stopped at interpreter exit (pyarrow_ops/shutdown.py)

    def _stop_at_exit(self, timeout: float) -> bool:
        busy = not self.closed
        self._handle.stop(timeout)
        return busy

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
        streams = as_streams(items, time)
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


from pyarrow_ops.streaming import LiveAggregate, live_aggregate  # noqa: E402 (the live form, re-exported)
