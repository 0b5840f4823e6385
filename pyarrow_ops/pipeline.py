"""Ordered parallel pipelines: chains of operators over time-sorted inputs that use every core
and give exactly the output of a sequential run (docs/pipeline.md)."""

from __future__ import annotations

import copy
import datetime as dt
import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import pyarrow as pa

from pyarrow_ops import _engine, replay, shutdown
from pyarrow_ops.aggregate import _aggs, _keys
from pyarrow_ops.aggregates import Agg
from pyarrow_ops.engine_specs import merge_spec, step_spec
from pyarrow_ops.experiment import NONE as NO_EXPERIMENT
from pyarrow_ops.experiment import Experiment
from pyarrow_ops.expr import Expr, col
from pyarrow_ops.idle import check_clock, timeout_seconds
from pyarrow_ops.io import Input, Result, as_input_list, as_streams
from pyarrow_ops.lateness import Late, LateLog, Lateness, bounds, check_late, within
from pyarrow_ops.live import IdleGroup, LiveInput
from pyarrow_ops.windows import Session, Window

from pyarrow_ops.run_options import (  # noqa: F401  (re-exported: po.pipeline.SCHEDULERS, ...)
    PARTITIONINGS, REORDERS, SCHEDULERS, THREADINGS, Partitioning, Reorder, Scheduler, Threading)
from pyarrow_ops.run_options import options as _options


def _names(columns: str | Iterable[str], what: str) -> list[str]:
    if isinstance(columns, str):
        return [columns]
    out = list(columns)
    if not out or not all(isinstance(c, str) for c in out):
        raise TypeError(f"{what} must be a column name or a non-empty list of names, got {columns!r}")
    return out


def _key(key: str | list[str]) -> list[str]:
    keys = _keys(key)
    if not keys:
        raise TypeError("key must be a column name or a list of column names")
    return keys


def _expr(value: Any, what: str) -> Expr:
    if isinstance(value, Expr):
        return value
    raise TypeError(f"{what} must be an expression such as col('x') > 3, got {type(value).__name__}")


@dataclass(frozen=True, eq=False)
class _Merge:
    """Where a pipeline that reads several streams starts: ``union`` of ``parents``, or a ``join``
    or ``join_asof`` of the two ``parents`` (left, right) with checked ``args``. Compared by
    identity: a node used twice is one node (fan-out)."""

    name: str
    parents: tuple[Pipeline, ...]
    args: tuple[Any, ...]


@dataclass(frozen=True)
class Step:
    """One operator of a pipeline as written: the :class:`Pipeline` method's name and its checked
    arguments (lengths still as given, ints or timedeltas). :attr:`Pipeline.steps` is the
    pipeline's plan as data, which planners (``pyarrow_ops.spark`` forms its stages from it) read
    and rewrite; :meth:`Pipeline.from_steps` builds a pipeline back from steps."""

    name: str
    args: tuple[Any, ...]


class Pipeline:
    """A chain of operators over one or several time-sorted inputs.

    Each method returns a new pipeline with one more operator; nothing runs until :meth:`run`.
    The inputs are merged in the merged order (time, input index, position) as for
    :func:`pyarrow_ops.merge`.

    >>> import pyarrow as pa, pyarrow_ops as po
    >>> from pyarrow_ops import col
    >>> t = pa.table({"ts": [1, 2, 40, 41], "user": [1, 1, 1, 2], "page": [3, 4, 5, 6]})
    >>> p = po.Pipeline(t, time="ts").filter(col("page") > 3).sessionize("user", gap=30)
    >>> p.run(threads=2).to_arrow().to_pydict()
    {'ts': [2, 40, 41], 'user': [1, 1, 2], 'page': [4, 5, 6], 'session': [0, 1, 0]}
    """

    def __init__(self, inputs: Input | Iterable[Input], *, time: str, lateness: Lateness = None,
                 late: Late = "error", idle_timeout: float | dt.timedelta | None = None,
                 clock: Callable[[], float] | None = None) -> None:
        """``lateness``, ``late``: inputs out of time order within a bound, and what happens to rows
        later than that, as for :func:`pyarrow_ops.merge` (each input is put back in order before
        the merge; ``result.late`` and ``stats()["late"]``). ``idle_timeout`` (seconds or a
        timedelta of processing time by ``clock``, default the monotonic clock): a
        :class:`LiveInput` silent that long is heartbeated to the least floor of the live inputs
        still speaking, until it speaks (as in :func:`pyarrow_ops.live_aggregate`; the result's
        ``check_idle()`` and ``stats()["idle"]``)."""
        if not isinstance(time, str):
            raise TypeError(f"time must be a column name (str), got {type(time).__name__}")
        check_late(late)
        self._time_order: tuple[Lateness, str] = (lateness, late)
        self._idle_rule: tuple[float | None, Callable[[], float] | None] = (
            timeout_seconds(idle_timeout), None if clock is None else check_clock(clock))
        self._inputs = as_input_list(inputs)
        if not self._inputs:
            raise _engine.InvalidInputError("a pipeline needs at least one input")
        for index, item in enumerate(self._inputs):
            if isinstance(item, LiveInput):
                item._bind(f"live input {index}", time)  # errors name the input as the merge does
        self._time = time
        self._steps: tuple[Step, ...] = ()
        self._origin: _Merge | None = None
        self._last: PipelineResult | None = None

    @classmethod
    def from_steps(cls, steps: Iterable[Step], *, time: str, inputs: Input | Iterable[Input] = ()) -> Pipeline:
        """A pipeline of ``steps`` (as :attr:`steps` gives them) over ``inputs`` (none: only
        :meth:`plan` with a schema, or :meth:`with_inputs` later)."""
        p = cls.__new__(cls)
        p._inputs, p._time, p._steps, p._last = as_input_list(inputs), time, tuple(steps), None
        p._origin = None
        p._time_order = (None, "error")
        p._idle_rule = (None, None)
        return p

    @property
    def steps(self) -> tuple[Step, ...]:
        """The operators, in order, as :class:`Step` values."""
        return self._steps

    @property
    def time(self) -> str:
        """The time column."""
        return self._time

    def with_inputs(self, inputs: Input | Iterable[Input]) -> Pipeline:
        """The same operators over other inputs."""
        self._refuse_graph("with_inputs()")
        return Pipeline.from_steps(self._steps, time=self._time, inputs=inputs)

    def _add(self, name: str, *args: Any) -> Pipeline:
        # The new pipeline shares this one's inputs, origin and Step objects: the graph compiler
        # (_Graph) recognises a shared prefix by their identity, so two pipelines grown from one
        # node read it once (fan-out) instead of computing it twice.
        p = Pipeline.from_steps((*self._steps, Step(name, args)), time=self._time)
        p._inputs = self._inputs
        p._origin = self._origin
        p._time_order = self._time_order
        p._idle_rule = self._idle_rule
        return p

    @property
    def is_chain(self) -> bool:
        """True for one chain of operators over one set of inputs (no union or join upstream):
        the pipelines :attr:`steps` describes completely, and the ones ``pyarrow_ops.spark.run``
        takes."""
        return self._origin is None

    def _refuse_graph(self, what: str) -> None:
        if self._origin is not None:
            raise _engine.UsageError(f"{what} takes a chain of operators over one set of inputs; this pipeline "
                                     f"reads a {self._origin.name}, so it is a graph")

    # Several streams.
    def join(self, right: Pipeline, on: str | list[str] | tuple[str, ...] = (), *,
             within: tuple[int | dt.timedelta, int | dt.timedelta], how: Literal["inner", "left"] = "inner") -> Pipeline:
        """An interval join: pairs of a row of this stream (left) and one of ``right`` with equal
        ``on`` keys (a null key matches nothing) and ``lo <= right.time - left.time <= hi`` for
        ``within=(lo, hi)``. A pair leaves when its later row arrives; its time is that row's.
        With ``how="left"`` a left row that matched nothing leaves, with null right columns, once
        no match can come (at time ``left.time + hi``, or its own time if ``hi < 0``).

        Columns: this stream's (the time column holding the pair's time), then ``right``'s but
        the keys (a name taken gets ``_right``, so the right's time is ``<time>_right``), then
        ``<time>_left``, the left row's own time. docs/graphs.md gives the exact order.

        >>> import pyarrow as pa, pyarrow_ops as po
        >>> sales = po.Pipeline(pa.table({"t": [1, 5], "item": [7, 8]}), time="t")
        >>> returns = po.Pipeline(pa.table({"t": [3, 20], "item": [7, 8]}), time="t")
        >>> sales.join(returns, on="item", within=(0, 10)).run(threads=2).to_arrow().to_pydict()
        {'t': [3], 'item': [7], 't_right': [3], 't_left': [1]}
        """
        if not isinstance(right, Pipeline):
            raise TypeError(f"join's right must be a Pipeline, got {type(right).__name__} (join_asof also "
                            "takes a static table)")
        self._same_time(right, "join")
        if not (isinstance(within, tuple) and len(within) == 2):
            raise TypeError(f"within must be a pair (lo, hi), got {within!r}")
        if how not in ("inner", "left"):
            raise ValueError(f"how must be 'inner' or 'left', got {how!r}")
        return Pipeline._merged(_Merge("join", (self, right), (_keys(on), within[0], within[1], how)), self._time)

    def join_asof(self, right: Pipeline | Input, by: str | list[str] | tuple[str, ...] = (), *,
                  tolerance: int | dt.timedelta | None = None) -> Pipeline:
        """Each row of this stream with the latest row of ``right`` with equal ``by`` keys (a
        null key matches nothing) at or before its time (equal times count; of several right
        rows of one time, the last), no older than ``tolerance`` if given; null right columns when
        there is none. Like Polars' backward ``join_asof``. One row per row of this stream, in its
        order and with its time; columns: this stream's, then ``right``'s but the keys (a name
        taken gets ``_right``).

        ``right`` may also be a static table (anything Arrow-shaped): for each key its last row
        is in force from the start (a lookup join).

        >>> import pyarrow as pa, pyarrow_ops as po
        >>> readings = po.Pipeline(pa.table({"t": [5, 15], "meter": [1, 1]}), time="t")
        >>> tariffs = po.Pipeline(pa.table({"t": [0, 10], "meter": [1, 1], "price": [0.2, 0.3]}), time="t")
        >>> readings.join_asof(tariffs, by="meter").run(threads=2).to_arrow().to_pydict()
        {'t': [5, 15], 'meter': [1, 1], 't_right': [0, 10], 'price': [0.2, 0.3]}
        """
        keys = _keys(by)
        if tolerance is not None and (isinstance(tolerance, bool) or not isinstance(tolerance, (int, dt.timedelta))):
            raise TypeError(f"tolerance must be an int, a timedelta or None, got {tolerance!r}")
        if isinstance(right, Pipeline):
            self._same_time(right, "join_asof")
            return Pipeline._merged(_Merge("join_asof", (self, right), (keys, tolerance)), self._time)
        if tolerance is not None:
            raise ValueError("tolerance needs a right stream: a static table has no times to be old")
        return self._add("join_table", keys, right)

    def _same_time(self, other: Pipeline, what: str) -> None:
        if other._time != self._time:
            raise ValueError(f"{what} needs both streams to use one time column; this uses {self._time!r}, "
                             f"the other {other._time!r}")

    @staticmethod
    def _merged(origin: _Merge, time: str) -> Pipeline:
        p = Pipeline.from_steps((), time=time)
        p._origin = origin
        return p

    # Stateless operators.
    def filter(self, predicate: Expr) -> Pipeline:
        """Keeps the rows where ``predicate`` is true (null counts as false)."""
        return self._add("filter", _expr(predicate, "predicate"))

    def select(self, *columns: str | Expr, **named: Expr) -> Pipeline:
        """Only the given columns: names, ``col(...)`` references, then ``name=expression``."""
        items: list[tuple[str, Expr]] = []
        for c in columns:
            if isinstance(c, str):
                items.append((c, col(c)))
            elif isinstance(c, Expr) and c._to_ir()[0] == "col":
                items.append((c._to_ir()[1], c))
            else:
                raise TypeError(f"select takes column names or col(...) positionally and name=expression "
                                f"by keyword, got {c!r}")
        items += [(n, _expr(e, n)) for n, e in named.items()]
        return self._add("select", items)

    def with_columns(self, **named: Expr) -> Pipeline:
        """The input columns plus (or replacing) ``name=expression`` for each keyword."""
        if not named:
            raise TypeError("with_columns needs at least one name=expression")
        return self._add("with_columns", [(n, _expr(e, n)) for n, e in named.items()])

    def map_batches(self, fn: Callable[[pa.RecordBatch], pa.RecordBatch], schema: pa.Schema | None = None) -> Pipeline:
        """Applies a Python function to each morsel (a record batch of some of the rows).

        ``fn`` must treat rows independently (the engine cuts batches as it likes), return a
        record batch of ``schema`` (default: the schema of ``fn`` applied to an empty batch) and
        may return any number of rows. It runs under the GIL, so it never runs on two workers at
        once; the rest of the pipeline keeps running in parallel meanwhile. An exception it
        raises stops the run and reaches the caller unchanged.
        """
        if not callable(fn):
            raise TypeError(f"map_batches needs a callable, got {type(fn).__name__}")
        return self._add("map_batches", fn, schema)

    # Partitioned stateful operators.
    def sessionize(self, key: str | list[str], gap: int | dt.timedelta, name: str = "session") -> Pipeline:
        """Adds ``name`` (int64): the tuple's session number within its key, a new session
        starting when the time since the key's previous tuple is greater than ``gap``."""
        return self._add("sessionize", _key(key), gap, name)

    def lag(self, key: str | list[str], columns: str | list[str], suffix: str = "_prev") -> Pipeline:
        """Adds ``c + suffix`` per column: the value of the key's previous tuple (null if none)."""
        return self._add("lag", _key(key), _names(columns, "columns"), suffix)

    def delta(self, key: str | list[str], columns: str | list[str] | None = None, suffix: str = "_delta") -> Pipeline:
        """Adds ``c + suffix``: ``c`` minus the key's previous ``c`` (null for its first tuple).
        Default columns: the time column."""
        return self._add("delta", _key(key), [] if columns is None else _names(columns, "columns"), suffix)

    def running(self, key: str | list[str], aggs: Mapping[str, Agg]) -> Pipeline:
        """Adds one column per aggregate over the key's tuples so far, this one included."""
        return self._add("running", _key(key), _aggs(aggs))

    def dedupe(self, key: str | list[str], within: int | dt.timedelta | None = None) -> Pipeline:
        """Keeps a key's first tuple; with ``within``, also a tuple more than ``within`` after the
        key's last kept one."""
        return self._add("dedupe", _key(key), within)

    def pairs(self, key: str | list[str], item: str, gap: int | dt.timedelta) -> Pipeline:
        """For each item new to a key's session, a row per earlier distinct item of the session:
        key columns, time, ``item_a`` (the lesser), ``item_b`` (the greater)."""
        if not isinstance(item, str):
            raise TypeError(f"item must be a column name, got {item!r}")
        return self._add("pairs", _key(key), item, gap)

    def window_aggregate(self, window: Window, aggs: Mapping[str, Agg], key: str | list[str] | None = None, *,
                         by_window: bool = False) -> Pipeline:
        """Window rows as :func:`pyarrow_ops.aggregate`. With a key, partitioned: a key's windows
        close when its own time passes them (docs/pipeline.md); without one, stateful. With
        ``by_window=True`` every key's windows close together when the stream's time passes them,
        a window set at a time in window-start order, keys ascending, exactly as ``aggregate()``
        (stateful: one worker), which is what a ``top_k(per="window_start")`` after it needs.
        ``window=po.session(gap)``: session windows, closing on the stream's time, rows by
        ``window_end`` then key, exactly as ``aggregate()`` (stateful, with or without a key)."""
        if not isinstance(window, (Window, Session)):
            raise TypeError(f"window must be po.sliding(...), po.tumbling(...) or po.session(...), got {window!r}")
        return self._add("window_aggregate", _keys(key), window, _aggs(aggs), bool(by_window))

    # Stateful operators.
    def top_k(self, k: int, by: str, per: str | None = None, descending: bool = True) -> Pipeline:
        """The ``k`` best rows by ``by`` of each run of equal ``per`` values, plus ``rank``."""
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ValueError(f"k must be a positive int, got {k!r}")
        return self._add("top_k", k, by, per, bool(descending))

    def experimental_parametric(self, kind: str = "stateless", cost_us: float = 10.0, selectivity: float = 1.0,
                                state_bytes: int = 0, key: str | list[str] | None = None) -> Pipeline:
        """The ordered-processing paper's synthetic operator, for experiments and benchmarks
        (docs/pipeline.md): spins ``cost_us`` per tuple and adds ``p_state``, an order-sensitive
        hash. Experimental: not for applications, and it may change."""
        if kind not in ("stateless", "partitioned", "stateful"):
            raise ValueError(f"kind must be 'stateless', 'partitioned' or 'stateful', got {kind!r}")
        if kind == "partitioned" and key is None:
            raise TypeError("a partitioned parametric operator needs key=")
        return self._add("parametric", kind, _keys(key), float(cost_us), float(selectivity), int(state_bytes))

    # Planning and running.
    def _specs(self, time_type: pa.DataType) -> list[Any]:
        """The steps as the engine's typed operator specs, lengths in the time column's unit."""
        return [step_spec(step, time_type) for step in self._steps]

    @property
    def input_schema(self) -> pa.Schema:
        """The first input's schema (inputs whose schema is known without reading them: tables,
        readers, live inputs, objects with ``__arrow_c_schema__``)."""
        self._refuse_graph("input_schema")
        if not self._inputs:
            raise _engine.UsageError("the pipeline has no inputs; pass a schema to plan(), or use with_inputs()")
        first = self._inputs[0]
        if isinstance(first, (pa.Table, pa.RecordBatch, pa.RecordBatchReader, LiveInput)):
            return first.schema
        if hasattr(first, "__arrow_c_schema__") or hasattr(first, "__arrow_c_stream__"):
            return pa.schema(first) if hasattr(first, "__arrow_c_schema__") else pa.table(first).schema
        raise TypeError("explain() needs inputs whose schema is known without reading them (tables, readers)")

    def _time_type(self, schema: pa.Schema) -> pa.DataType:
        if self._time not in schema.names:
            raise _engine.InvalidInputError(
                f"time column '{self._time}' not found in input 0; its columns are: {', '.join(schema.names)}")
        return schema.field(self._time).type

    def plan(self, schema: pa.Schema | None = None, *, carry: str | None = None) -> list[dict[str, Any]]:
        """The operators as the engine sees them over inputs of ``schema`` (default:
        :attr:`input_schema`): name, description, kind, selectivity, keys, max_parallelism (None:
        every worker) and output_schema. With ``carry`` (an int64 column of ``schema``), every
        operator keeps that column, as ``pyarrow_ops.spark`` runs its stages."""
        self._refuse_graph("plan()")
        schema = self.input_schema if schema is None else schema
        # Without the time column (a later Spark stage after an operator dropped it) lengths
        # resolve as ints; an operator that needs the column still says so.
        time_type = self._time_type(schema) if carry is None or self._time in schema.names else pa.int64()
        return _engine.plan(schema.__arrow_c_schema__(), self._time, self._specs(time_type), carry or "")

    def explain(self, *, fuse: bool = True, push_down: bool = True) -> str:
        """The plan as text (see :func:`explain`): one line per operator (kind, keys, selectivity,
        parallelism, inputs), then the parallel regions with their routing and ordering, the
        fused chains and the shuffles.

        >>> import pyarrow as pa, pyarrow_ops as po
        >>> from pyarrow_ops import col
        >>> print(po.Pipeline(pa.table({"t": [1], "u": [2]}), time="t").filter(col("u") > 0).sessionize("u", gap=5).explain())
        source 0  t, u
        0 filter  stateless  selectivity: at most one  parallelism: every worker  <- source 0
        1 sessionize  partitioned by [u]  selectivity: exactly one  parallelism: partitions  <- 0
        region 0: operators 0, 1  routing: hash by [u]  ordering: seqno and pulses
        output result <- 1
        """
        from pyarrow_ops.plans import explain

        return explain({"result": self}, fuse=fuse, push_down=push_down)

    def run(self, threads: int | Literal["auto"] | None = None, scheduler: Scheduler = "ct", reorder: Reorder = "nonblocking",
            partitioning: Partitioning = "hybrid", *, morsel: int | None = None, partitions: int | None = None,
            reorder_capacity: int | None = None, max_inflight: int | None = None, slice_us: int | None = None,
            batch_size: int = 65536, fuse: bool = True, push_down: bool = True,
            threading: Threading = "ordered", experiment: Experiment = NO_EXPERIMENT) -> PipelineResult:
        """Runs the pipeline; returns a :class:`PipelineResult` (read it once, like any Result).

        Every combination of the options gives the identical result; they change only speed.

        Args:
            threads: workers (default: cores), or ``"auto"``: up to one per core, how many of them
                run adapting to the measured throughput while the run goes on (the IBM Streams
                elasticity rules with history, docs/architecture.md "Elastic thread level"); the
                result is the same, ``stats()["thread_levels"]`` tells the levels over time.
            scheduler: one of :data:`SCHEDULERS`.
            reorder: one of :data:`REORDERS`.
            partitioning: one of :data:`PARTITIONINGS`.
            morsel: rows per unit of work (default adaptive); 1 processes tuple by tuple.
            partitions: partitions of partitioned operators (default 4 per thread for hybrid, else threads).
            reorder_capacity: inputs an operator may run ahead of its oldest unfinished one.
            max_inflight: morsels alive at once before reading more input.
            slice_us: microseconds a worker stays on one operator before rescheduling.
            batch_size: rows per batch when several inputs are merged.
            fuse: run adjacent stateless operators as one task (:meth:`explain` shows which);
                False runs each on its own.
            push_down: with several inputs, run the leading filters and projections on each
                input before the merge, in parallel (:meth:`explain` shows which; the result is
                the same); False merges first.
            threading: ``"ordered"`` (default): the ordered runtime's workers and an ingress
                thread; ``"manual"``: no threads of the run's own: the thread that reads the result
                reads the input and runs the operators itself, as far as the next result batch (one
                core, the lowest latency; ``threads`` must be unset or 1); ``"dedicated"``: a thread
                per operator (a fused chain is one), each running its operator alone (``threads``
                must be unset); ``"dynamic"``: the IBM Streams scheduler: ``threads`` workers take
                operators from a lock-free list in least recently used order instead of by
                ``scheduler``'s heuristic (``threads="auto"`` works with it too).
            experiment: for benchmarks: a :class:`pyarrow_ops.Experiment` (pacing); changes no
                result.
        """
        kwargs = dict(threads=threads, scheduler=scheduler, reorder=reorder, partitioning=partitioning, morsel=morsel,
                      partitions=partitions, reorder_capacity=reorder_capacity, max_inflight=max_inflight,
                      slice_us=slice_us, batch_size=batch_size, fuse=fuse, push_down=push_down, threading=threading)
        options = _options(threads, scheduler, reorder, partitioning, morsel, partitions, reorder_capacity,
                           max_inflight, slice_us, experiment, fuse, push_down, threading)
        self._last = _run_graph({"result": self}, options, batch_size)["result"]
        # The query for checkpoints, as a copy without `_last`: the result must not keep itself
        # alive through a cycle (result -> spec -> pipeline -> result) until a garbage collection.
        definition = copy.copy(self)
        definition._last = None
        self._last._run = replay.RunSpec("pipeline", {"result": definition}, kwargs)
        return self._last

    def __getstate__(self) -> dict[str, Any]:
        # Pickled for checkpoints (pyarrow_ops/replay.py) and Spark: the definition, not a run.
        return {**self.__dict__, "_last": None}

    def _start(self, options: _engine.PipelineOptions, batch_size: int = 65536, *, merge: bool = True,
               carry: str = "") -> PipelineResult:
        # merge=False, carry: see _engine.run_pipeline; pyarrow_ops.spark runs stages this way.
        self._refuse_graph("a Spark stage")
        if self._time_order != (None, "error"):
            raise _engine.UsageError("lateness= and late= are applied by pyarrow_ops.spark.run, before the partitions; "
                                     "a pipeline_udf takes rows in time order (sort each input first)")
        streams: list[_engine.Stream] = []
        try:
            streams = as_streams(self._inputs, self._time)
            schema = pa.schema(streams[0])
            # Unmerged input (a later Spark stage) may have lost the time column to an operator,
            # like a window_aggregate; an operator that needs it still says so.
            time_type = self._time_type(schema) if merge or self._time in schema.names else pa.int64()
            specs = self._specs(time_type)
            native, handle = _engine.run_pipeline(streams, self._time, specs, options, batch_size, merge, carry)
        finally:
            for stream in streams:
                stream.close()
        return PipelineResult(native, handle)

    def stats(self) -> dict[str, Any]:
        """The statistics of this pipeline's last run (see :meth:`PipelineResult.stats`)."""
        if self._last is None:
            raise _engine.UsageError("stats() needs a run first: call run()")
        return self._last.stats()

    def __repr__(self) -> str:
        origin = "" if self._origin is None else f"{self._origin.name} of {len(self._origin.parents)}, "
        return f"Pipeline(time={self._time!r}, {origin}operators={[s.name for s in self._steps]})"


class PipelineResult(Result):
    """A :class:`Result` of a pipeline run, with its statistics."""

    def __init__(self, native: _engine.Stream, handle: _engine.PipelineHandle) -> None:
        super().__init__(native)
        self._handle = handle
        self._output = replay.Output()
        self._run: replay.RunSpec | None = None
        self._idle_groups: list[IdleGroup] = []  # per source with idle_timeout and live inputs
        self._lives: list[LiveInput] = []  # the run's live inputs
        self._sole = True  # the run's only output (a graph's outputs: False)
        shutdown.register(self)  # stopped at interpreter exit (pyarrow_ops/shutdown.py)

    def close(self) -> None:
        """Stops the work and releases the inputs and any unread data; idempotent. The only output
        of a run (``Pipeline.run``) stops the run: its live inputs stop feeding it (a push after that
        raises :class:`UsageError`), its threads are joined, and a thread reading it meanwhile stops
        (its stream ends where it was closed, or it gets the cancel as an error). An output of a
        graph run stops being kept (:meth:`GraphResult.close` stops the run)."""
        super().close()
        if self._sole:
            self._stop()

    def _stop(self, why: str = "closed", timeout: float | None = None) -> None:
        # The live inputs first: a cancel joins the ingress, which may be waiting on one.
        for live in self._lives:
            live._stop_feeding(why)
        if timeout is None:
            self._handle.cancel()
        else:
            shutdown.stop_joined(self._handle.cancel, timeout)

    def _stop_at_exit(self, timeout: float) -> bool:
        if self.closed and self._sole:
            return False  # read out or closed: the run has stopped
        self._stop("stopped at interpreter exit", timeout)
        return True

    def __iter__(self) -> Iterator[pa.RecordBatch]:
        return replay.iterate(self)

    def __arrow_c_stream__(self, requested_schema: object | None = None) -> object:
        if self._output.skip == 0:
            return super().__arrow_c_stream__(requested_schema)
        return pa.RecordBatchReader.from_batches(self.schema, iter(self)).__arrow_c_stream__()

    def write_ipc(self, path: str | os.PathLike[str] | None = None, *, rows_per_batch: int = 65536,
                  checkpoint_dir: str | os.PathLike[str] | None = None,
                  checkpoint_every: int | dt.timedelta | None = None, keep_checkpoints: int = 3) -> None:
        """Reads the result to its end into an Arrow IPC stream file at ``path``, in batches of
        ``rows_per_batch`` rows. With ``checkpoint_dir``, snapshots every ``checkpoint_every``
        output rows (or timedelta), keeping the last ``keep_checkpoints``, each committing the
        file: after :func:`pyarrow_ops.restore` the file is byte for byte the uninterrupted run's
        (docs/checkpoints.md). A restored run resumes its file (leave the arguments out)."""
        self._write(path, "ipc", rows_per_batch, checkpoint_dir, checkpoint_every, keep_checkpoints)

    def write_parquet(self, path: str | os.PathLike[str] | None = None, *, rows_per_batch: int = 65536,
                      checkpoint_dir: str | os.PathLike[str] | None = None,
                      checkpoint_every: int | dt.timedelta | None = None, keep_checkpoints: int = 3) -> None:
        """:meth:`write_ipc` into a Parquet file (a row group per ``rows_per_batch`` rows), written
        when the run ends from ``<path>.spool``, the committed stream."""
        self._write(path, "parquet", rows_per_batch, checkpoint_dir, checkpoint_every, keep_checkpoints)

    def _write(self, path: Any, format: str, *args: Any) -> None:
        spec = self._one_run("write")
        replay.write({"result": self}, spec, {} if path is None else {"result": path}, format, *args,
                     next_any=replay.one_output(self._native))

    def checkpoint(self, path: str | os.PathLike[str] | None = None) -> Path:
        """Writes a snapshot of the run (the rows that have left, the output file's committed
        state, the query) at ``path`` (default: the next in ``checkpoint_dir``); returns its path."""
        return replay.checkpoint({"result": self}, self._one_run("checkpoint"), path)

    def _one_run(self, what: str) -> replay.RunSpec:
        if self._run is None or self._run.kind != "pipeline":
            raise _engine.UsageError(f"{what}() is for a pipeline's run(); for an output of a graph run, "
                                     f"call the GraphResult's {what}()")
        return self._run

    def stats(self) -> dict[str, Any]:
        """Per operator (``operators``): tuples in and out, worker time (``busy_ns`` by the clock,
        ``cpu_ns`` the workers' CPU time in it, without the time the OS ran other threads on their
        cores), cost per tuple (``cost_ns_per_tuple``: busy_ns per tuple in),
        selectivity, queued tuples, maximum and peak parallelism, ``copies`` (more than 1: it ran
        on each input before their merge, see ``push_down``, and the figures are the copies'
        sums; the merge then shows as a ``union`` after the pipeline's operators); overall: tuples in and out,
        threads, partitions, peak morsels alive, ``ingress_steps`` (operator steps the ingress
        thread ran while back-pressure held it) and ``helper_steps`` (those :class:`LiveInput`
        pushers ran while waiting for room), ``latencies_ns``: per result batch, the time
        from the first operator starting on its input to its arrival at the output, and
        ``thread_levels`` (``threads="auto"``): per period of the elastic controller, ``at_ns``
        (since the start), the ``threads`` that ran in it, the ``tuples_per_s`` all operators
        took in over it and the ``free_cores`` other processes left (None: unknown); ``late``: per source given ``lateness`` or ``late``, its policy and
        the late rows per input; ``idle`` (``idle_timeout``): each idle period of a live input,
        ``input``, ``from_s``, ``to_s`` (and ``source`` when several sources have them)."""
        d = self._handle.stats()
        d["late"] = self._late_stats()
        many = len(self._idle_groups) > 1
        d["idle"] = [{**period, "source": s} if many else period
                     for s, group in enumerate(self._idle_groups) for period in group.idle.periods()]
        return d

    def check_idle(self) -> None:
        """With ``idle_timeout`` on a pipeline of :class:`LiveInput` inputs: heartbeats every live
        input idle by the pipeline's ``clock`` now (it runs by itself, a few times per timeout, with
        the default clock; call it after moving an injected clock)."""
        for group in self._idle_groups:
            group.check_idle()


# --- Graphs ---------------------------------------------------------------------------------------


def union(*nodes: Pipeline) -> Pipeline:
    """The rows of every stream in the merged order: by time, then the order of the arguments,
    then position within each stream. The streams must have the same columns (names and types)
    and each be sorted by time (an :class:`UnsortedInputError` names the one that is not).

    >>> import pyarrow as pa, pyarrow_ops as po
    >>> a = po.Pipeline(pa.table({"t": [1, 3], "x": [10, 30]}), time="t")
    >>> b = po.Pipeline(pa.table({"t": [1, 2], "x": [11, 21]}), time="t")
    >>> po.union(a, b).run(threads=2).to_arrow()["x"].to_pylist()
    [10, 11, 21, 30]
    """
    if not nodes:
        raise TypeError("union needs at least one pipeline")
    for n in nodes:
        if not isinstance(n, Pipeline):
            raise TypeError(f"union takes pipelines, got {type(n).__name__}")
        nodes[0]._same_time(n, "union")
    return Pipeline._merged(_Merge("union", tuple(nodes), ()), nodes[0]._time)


class _Graph:
    """Pipelines compiled into the engine's graph: sources (one per set of inputs), then nodes in
    topological order. A node reached twice (the same inputs, the same merge, the same Step
    objects) is one node: using a pipeline twice is a fan-out, computed once."""

    def __init__(self, outputs: Mapping[str, Pipeline]) -> None:
        if not outputs:
            raise TypeError("run needs at least one output: run({'name': pipeline, ...})")
        times = {p._time for p in outputs.values() if isinstance(p, Pipeline)}
        for name, p in outputs.items():
            if not isinstance(name, str) or not isinstance(p, Pipeline):
                raise TypeError(f"run takes a mapping of names to pipelines, got {name!r}: {type(p).__name__}")
        if len(times) != 1:
            raise ValueError(f"the pipelines of one run must share their time column, got {sorted(times)}")
        self.time = times.pop()
        self.inputs: list[list[Any]] = []     # per source: its inputs
        self.time_orders: list[tuple[Any, str]] = []  # per source: (lateness, late)
        self.idle_rules: list[tuple[float | None, Any]] = []  # per source: (idle_timeout, clock)
        self.nodes: list[tuple[str, Any, list[int]]] = []  # (kind, payload, input nodes)
        self._memo: dict[tuple[Any, ...], int] = {}
        self.outputs = [self._node(p) for p in outputs.values()]
        self.names = list(outputs)

    def _add(self, key: tuple[Any, ...], kind: str, payload: Any, inputs: list[int]) -> int:
        if key not in self._memo:
            self.nodes.append((kind, payload, inputs))
            self._memo[key] = len(self.nodes) - 1
        return self._memo[key]

    def _node(self, p: Pipeline) -> int:
        if p._origin is None:
            if not p._inputs:
                raise _engine.UsageError("a pipeline of this run has no inputs; use with_inputs()")
            key: tuple[Any, ...] = ("source", id(p._inputs))
            if key not in self._memo:
                self.inputs.append(p._inputs)
                self.time_orders.append(p._time_order)
                self.idle_rules.append(p._idle_rule)
            node = self._add(key, "source", len(self.inputs) - 1, [])
        else:
            parents = [self._node(q) for q in p._origin.parents]
            node = self._add(("merge", id(p._origin)), p._origin.name, p._origin.args, parents)
        for step in p._steps:
            node = self._add(("step", node, id(step)), "step", step, [node])
        return node

    def specs(self, schemas: list[pa.Schema]) -> list[Any]:
        """The nodes as the engine's specs, lengths in the time column's unit of their source."""
        specs, time_types = [], []
        for kind, payload, inputs in self.nodes:
            if kind == "source":
                schema = schemas[payload]
                if self.time not in schema.names:
                    raise _engine.InvalidInputError(
                        f"time column '{self.time}' not found in input 0; its columns are: {', '.join(schema.names)}")
                time_types.append(schema.field(self.time).type)
                specs.append(_engine.GraphNode(_engine.SourceSpec(payload), []))
                continue
            time_type = time_types[inputs[0]]
            time_types.append(time_type)
            specs.append(_engine.GraphNode(merge_spec(kind, payload, time_type) if kind != "step"
                                           else step_spec(payload, time_type), inputs))
        return specs

    def run(self, options: _engine.PipelineOptions, batch_size: int,
            resume: dict[str, Any] | None = None) -> dict[str, PipelineResult]:
        groups: list[list[_engine.Stream]] = []
        logs: list[LateLog] = []
        try:
            for k, (inputs, (lateness, late)) in enumerate(zip(self.inputs, self.time_orders, strict=True)):
                labels = []
                for i, item in enumerate(inputs):
                    labels.append(f"live input {i}" if isinstance(item, LiveInput) else f"input {i}")
                    if isinstance(item, LiveInput):
                        item._bind(labels[-1], self.time)
                groups.append(as_streams(inputs, self.time))
                schema = pa.schema(groups[-1][0])
                if (lateness is not None or late != "error") and self.time in schema.names:
                    log = LateLog(schema, late, len(inputs))
                    input_bounds = bounds(lateness, late, len(inputs), schema.field(self.time).type)
                    groups[-1] = within(groups[-1], self.time, input_bounds, log, labels,  # type: ignore[arg-type]
                                        replay.input_states(resume, k, len(inputs)))
                    logs.append(log)
            specs = self.specs([pa.schema(group[0]) for group in groups])
            natives, handle = _engine.run_graph(groups, self.time, specs, self.outputs, options, batch_size, resume)
        finally:
            for group in groups:
                for stream in group:
                    stream.close()
        results = {name: PipelineResult(native, handle) for name, native in zip(self.names, natives)}
        for inputs in self.inputs:  # their pushers run operators while they wait for room
            for item in inputs:
                if isinstance(item, LiveInput) and not item._closed:
                    item._helper = handle.help
        groups = [IdleGroup([x if isinstance(x, LiveInput) else None for x in inputs], timeout, clock)
                  for inputs, (timeout, clock) in zip(self.inputs, self.idle_rules, strict=True)
                  if timeout is not None and any(isinstance(x, LiveInput) for x in inputs)]
        lives = [item for inputs in self.inputs for item in inputs if isinstance(item, LiveInput)]
        for r in results.values():
            r._late_logs = logs
            r._idle_groups = groups
            r._lives = lives
            r._sole = len(results) == 1
        return results


def _run_graph(outputs: Mapping[str, Pipeline], options: _engine.PipelineOptions, batch_size: int,
               resume: dict[str, Any] | None = None) -> dict[str, PipelineResult]:
    return _Graph(outputs).run(options, batch_size, resume)  # resume: a cut, pyarrow_ops/replay.py


class GraphResult(Mapping[str, PipelineResult]):
    """The results of :func:`run`: one :class:`PipelineResult` per named output, each a stream that
    fills as the run goes. Read the outputs together (:meth:`to_arrow`, or alternating between
    them): an output nobody reads holds at most ``max_inflight`` batches, and then the whole run
    waits for it. Close an output you do not want: the run stops keeping its rows."""

    def __init__(self, results: dict[str, PipelineResult], spec: replay.RunSpec | None = None) -> None:
        self._results = results
        self._run = spec
        for r in results.values():
            r._run = spec

    def write_ipc(self, paths: Mapping[str, str | os.PathLike[str]] | None = None, *, rows_per_batch: int = 65536,
                  checkpoint_dir: str | os.PathLike[str] | None = None,
                  checkpoint_every: int | dt.timedelta | None = None, keep_checkpoints: int = 3) -> None:
        """Reads every output to its end, all together, into the Arrow IPC stream file
        ``paths[name]``; checkpoints as :meth:`PipelineResult.write_ipc` does."""
        replay.write(self._results, self._run_spec(), paths or {}, "ipc", rows_per_batch, checkpoint_dir,
                     checkpoint_every, keep_checkpoints, next_any=replay.any_output(self._handle()))

    def write_parquet(self, paths: Mapping[str, str | os.PathLike[str]] | None = None, *,
                      rows_per_batch: int = 65536, checkpoint_dir: str | os.PathLike[str] | None = None,
                      checkpoint_every: int | dt.timedelta | None = None, keep_checkpoints: int = 3) -> None:
        """:meth:`write_ipc` into Parquet files."""
        replay.write(self._results, self._run_spec(), paths or {}, "parquet", rows_per_batch, checkpoint_dir,
                     checkpoint_every, keep_checkpoints, next_any=replay.any_output(self._handle()))

    def checkpoint(self, path: str | os.PathLike[str] | None = None) -> Path:
        """A snapshot of the run (every output's rows that have left and file); returns its path."""
        return replay.checkpoint(self._results, self._run_spec(), path)

    def _run_spec(self) -> replay.RunSpec:
        if self._run is None:
            raise _engine.UsageError("this graph result was not made by run()")
        return self._run

    def _handle(self) -> Any:
        return next(iter(self._results.values()))._handle

    def __getitem__(self, name: str) -> PipelineResult:
        return self._results[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._results)

    def __len__(self) -> int:
        return len(self._results)

    def to_arrow(self) -> dict[str, pa.Table]:
        """Reads every output to its end, all together (each batch as it comes, from whichever
        output has one), as tables."""
        names = list(self._results)
        batches: dict[str, list[pa.RecordBatch]] = {name: [] for name in names}
        for index, batch in replay.any_output(self._handle()):
            batch = self._results[names[index]]._output.drop_seen(batch)
            batches[names[index]].append(batch)
        for r in self._results.values():
            r.close()
        return {name: pa.Table.from_batches(batches[name], schema=r.schema) for name, r in self._results.items()}

    def to_polars(self) -> dict[str, Any]:
        """:meth:`to_arrow`, as Polars DataFrames (numeric columns not copied)."""
        import polars as pl

        return {name: pl.from_arrow(t, rechunk=False) for name, t in self.to_arrow().items()}

    def stats(self) -> dict[str, Any]:
        """The run's statistics (the same for every output; see :meth:`PipelineResult.stats`)."""
        return next(iter(self._results.values())).stats()

    @property
    def late(self) -> pa.Table | None:
        """The run's late rows (the same for every output; see :attr:`Result.late`)."""
        return next(iter(self._results.values())).late

    def close(self) -> None:
        """Stops the run: closes every output, and stops the run as a pipeline's close() does."""
        for r in self._results.values():
            r.close()
        next(iter(self._results.values()))._stop()


def run(outputs: Mapping[str, Pipeline], threads: int | Literal["auto"] | None = None, scheduler: Scheduler = "ct",
        reorder: Reorder = "nonblocking", partitioning: Partitioning = "hybrid", *, morsel: int | None = None,
        partitions: int | None = None, reorder_capacity: int | None = None, max_inflight: int | None = None,
        slice_us: int | None = None, batch_size: int = 65536, fuse: bool = True, push_down: bool = True,
        threading: Threading = "ordered", experiment: Experiment = NO_EXPERIMENT) -> GraphResult:
    """Runs a graph of pipelines with several outputs, each named, in one run: a pipeline used by
    several others is computed once and feeds them all (fan-out), and every output equals what a
    sequential run gives. The options are :meth:`Pipeline.run`'s.

    >>> import pyarrow as pa, pyarrow_ops as po
    >>> from pyarrow_ops import col
    >>> clicks = po.Pipeline(pa.table({"t": [1, 2, 3, 9], "user": [1, 2, 1, 1]}), time="t")
    >>> out = po.run({"sessions": clicks.sessionize("user", gap=5), "late": clicks.filter(col("t") > 2)}, threads=2)
    >>> tables = out.to_arrow()
    >>> tables["sessions"]["session"].to_pylist(), tables["late"]["t"].to_pylist()
    ([0, 0, 0, 1], [3, 9])
    """
    kwargs = dict(threads=threads, scheduler=scheduler, reorder=reorder, partitioning=partitioning, morsel=morsel,
                  partitions=partitions, reorder_capacity=reorder_capacity, max_inflight=max_inflight,
                  slice_us=slice_us, batch_size=batch_size, fuse=fuse, push_down=push_down, threading=threading)
    options = _options(threads, scheduler, reorder, partitioning, morsel, partitions, reorder_capacity, max_inflight,
                       slice_us, experiment, fuse, push_down, threading)
    return GraphResult(_run_graph(outputs, options, batch_size), replay.RunSpec("graph", outputs, kwargs))
