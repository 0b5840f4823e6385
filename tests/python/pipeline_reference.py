"""The plain-Python reference of every pipeline operator (docs/pipeline.md), one tuple at a time.

No engine code: tuples are dicts of Python values, operators are loops over them. The differential
tests run a pipeline on the engine and compare it with :func:`run_reference`.

API
---
``run_reference(inputs, time, ops) -> pa.Table``
    ``inputs``: a table, a record batch, or a list of them (same column names and types). They are
    merged in the merged order (time, input index, position), then each operator spec of ``ops`` is
    applied in order. The result has the output schema the engine produces.

An operator spec is a dict ``{"op": <name>, <parameter>: <value>, ...}`` whose parameters are those of
the ``Pipeline`` method of that name, with the same defaults, except that expressions are Python
callables of one tuple (the test translates expressions):

* ``{"op": "filter", "pred": fn}``: ``fn(row) -> bool | None``; None counts as false.
* ``{"op": "select", "columns": [...], "named": {...}}``: ``columns`` lists names (the column as it
  is) or ``(name, fn, type)`` (a computed column); then ``named`` maps a name to ``(fn, type)``.
* ``{"op": "with_columns", "named": {name: (fn, type)}}``.
* ``{"op": "map_batches", "fn": fn, "schema": None}``.
* ``{"op": "sessionize", "key": k, "gap": g, "name": "session"}``.
* ``{"op": "lag", "key": k, "columns": c, "suffix": "_prev"}``.
* ``{"op": "delta", "key": k, "columns": c, "suffix": "_delta"}``.
* ``{"op": "running", "key": k, "aggs": {name: (function, column | None)}}``.
* ``{"op": "dedupe", "key": k, "within": None}``.
* ``{"op": "pairs", "key": k, "item": column, "gap": g}``.
* ``{"op": "window_aggregate", "window": (size, advance[, offset]), "aggs": {...}, "key": None,
  "by_window": False}``: ``by_window`` keeps ``aggregate()``'s order (window start, then key).
* ``{"op": "top_k", "k": n, "by": column, "per": None, "descending": True}``.
* ``{"op": "parametric", "kind": "stateless", "cost_us": 10.0, "selectivity": 1.0, "state_bytes": 0,
  "key": None, "copies": None}``.

A key (``key``) is a column name or a list of names; ``columns`` a name or a list. ``aggs`` values are
``(function, column)`` pairs as in ``reference.reference_aggregate``, or objects with ``.function`` and
``.column`` (``pyarrow_ops.Agg``). A ``window`` is a tuple or an object with integer ``size``,
``advance`` and ``offset`` (``pyarrow_ops.sliding(...)`` with ints). Gaps, ``within`` and windows are
integers in the time column's stored unit (the timestamp's unit, days for date32).

Decisions where docs/pipeline.md is silent
------------------------------------------
* Values a callable sees and returns: Python values, with timestamps and dates as their stored
  integers (exact for every unit; ns timestamps do not fit ``datetime``).
* Keys, ``per`` groups and ``pairs`` items compare as ``aggregate()`` keys: null is a value of its
  own (sorting after every other), -0.0 equals 0.0, NaN equals NaN; strings sort by UTF-8 bytes.
* ``with_columns`` computes every new value from the input tuple; a named column that exists keeps
  its position, a new one is appended. ``select``: the listed columns in order, then ``named``.
* ``map_batches`` is applied to each tuple as a one-row batch (an operator's output is the
  concatenation of its tuples' outputs, engine/ops/operator.h). Its schema is ``schema`` if given,
  otherwise that of ``fn`` applied to an empty batch of the input schema; every output must match it.
* ``lag``: the previous tuple of the key's value (null when that value was null), same type.
* ``delta``: ``c - previous c``, null when either is null or for the key's first tuple; signed and
  unsigned integers give int64 (wrapping like numpy), floats float64 (the difference of the values
  as doubles), timestamp and date32 columns int64 in their unit. Other types raise TypeError.
* ``running``: per key, each aggregate over the key's tuples so far, this one included, with the
  rules and output types of docs/semantics.md (float sums exact, rounded once).
* ``dedupe``: a tuple passes if its key has no passed tuple yet, or with ``within`` if
  ``t - t_last_passed > within``.
* ``pairs``: sessions as ``sessionize(key, gap)``. When a tuple brings an item new to its session,
  one row per earlier distinct item of the session, in the order those items first appeared.
  Null is an item like any other value (sorting last). Columns: the key columns, the time column
  (the new tuple's time), ``item_a`` and ``item_b`` (the item's type).
* ``window_aggregate``: rows computed as ``reference.reference_aggregate`` computes them. With a
  key, a row leaves right after the first tuple of its key at or past ``window_end`` (several at one
  tuple: by window start); rows still open at the end follow, by window start, then key. Without a
  key, rows in aggregate()'s order. The pipeline's time column is gone afterwards unless an output
  column has its name; an operator needing the time then raises ValueError.
* ``top_k``: floats in the total order of docs/semantics.md (-0.0 below 0.0, NaN above every
  number); bools False < True; nulls after every value in either direction; ties keep arrival order.
* ``parametric``: ``p_state`` (uint64) is the engine's hash, which this reference does not compute:
  the column is present and null, so compare every other column. Selectivity 1 passes each tuple
  once; any other selectivity needs ``copies``, a function of the tuple giving its number of
  copies (the engine decides by a hash this reference does not reproduce).
* A column an operator adds may not already exist (ValueError), like ``rank`` in the engine.
* Nullability: columns passed through keep it; ``window_start``, ``window_end`` and ``rank`` are
  non-null as in the engine; every other new column is nullable. Compare names and types.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import pyarrow as pa

from reference import (
    _agg_output_type,
    _aggregate_values,
    _minmax_key,
    _order_key,
    _py_values,
    _to_arrow,
    _wrap,
    reference_aggregate,
    reference_merge,
)

Row = dict


@dataclass
class Stream:
    """The tuples between two operators, in arrival order, with their schema and the time column."""

    rows: list[Row]
    schema: pa.Schema
    time: str

    def check_time(self) -> None:
        """Raises ValueError when an earlier operator dropped the time column."""
        if self.time not in self.schema.names:
            raise ValueError(f"the pipeline's time column {self.time!r} is no longer in the stream "
                             f"(columns: {self.schema.names})")

    def time_of(self, row: Row) -> int:
        self.check_time()
        return row[self.time]


# --- helpers ------------------------------------------------------------------------------------

def _names(value: str | Iterable[str] | None) -> list[str]:
    if value is None:
        return []
    return [value] if isinstance(value, str) else list(value)


def _field(schema: pa.Schema, name: str) -> pa.Field:
    if name not in schema.names:
        raise KeyError(f"column {name!r} not found; the columns are {schema.names}")
    return schema.field(name)


def _identity(row: Row, keys: list[str], schema: pa.Schema) -> tuple:
    """The key of a tuple as aggregate() compares keys (null own key, -0.0 == 0.0, NaN one key)."""
    return tuple(_order_key(row[k], schema.field(k).type) for k in keys)


def _check_keys(schema: pa.Schema, keys: list[str]) -> None:
    if not keys:
        raise ValueError("a key is needed: a column name or a list of names")
    for k in keys:
        _field(schema, k)


def _add_fields(schema: pa.Schema, fields: list[pa.Field]) -> pa.Schema:
    for f in fields:
        if f.name in schema.names:
            raise ValueError(f"the operator adds a column {f.name!r}, but the input already has one")
        schema = schema.append(f)
    return schema


def _agg_pairs(aggs: dict) -> dict[str, tuple[str, str | None]]:
    """aggs as {name: (function, column)}, from pairs or objects with .function and .column."""
    out = {}
    for name, agg in aggs.items():
        out[name] = (agg.function, agg.column) if hasattr(agg, "function") else tuple(agg)
    return out


def _rows_of(table: pa.Table | pa.RecordBatch) -> list[Row]:
    columns = {name: _py_values(table.column(name)) for name in table.schema.names}
    return [{name: values[i] for name, values in columns.items()} for i in range(table.num_rows)]


def _to_table(rows: list[Row], schema: pa.Schema) -> pa.Table:
    arrays = [_to_arrow([r[f.name] for r in rows], f.type) for f in schema]
    return pa.Table.from_arrays(arrays, schema=schema)


# --- stateless ----------------------------------------------------------------------------------

def _filter(s: Stream, pred: Callable[[Row], bool | None]) -> Stream:
    return Stream([r for r in s.rows if pred(r)], s.schema, s.time)  # None is false


def _select(s: Stream, columns: list = (), named: dict | None = None) -> Stream:
    specs = []  # (name, fn or None for a column as it is, output field)
    for c in columns:
        if isinstance(c, str):
            specs.append((c, None, _field(s.schema, c)))
        else:
            name, fn, type_ = c
            specs.append((name, fn, pa.field(name, type_)))
    for name, (fn, type_) in (named or {}).items():
        specs.append((name, fn, pa.field(name, type_)))
    if len({n for n, _, _ in specs}) != len(specs):
        raise ValueError("select would give two columns of one name")
    schema = pa.schema([f for _, _, f in specs])
    rows = [{name: (r[name] if fn is None else fn(r)) for name, fn, _ in specs} for r in s.rows]
    return Stream(rows, schema, s.time)


def _with_columns(s: Stream, named: dict) -> Stream:
    fields = list(s.schema)
    for name, (_, type_) in named.items():
        if name in s.schema.names:
            fields[s.schema.get_field_index(name)] = pa.field(name, type_)
        else:
            fields.append(pa.field(name, type_))
    rows = []
    for r in s.rows:
        out = dict(r)
        out.update({name: fn(r) for name, (fn, _) in named.items()})  # every value from the input
        rows.append(out)
    return Stream(rows, pa.schema(fields), s.time)


def _map_batches(s: Stream, fn: Callable[[pa.RecordBatch], pa.RecordBatch], schema: pa.Schema | None = None) -> Stream:
    def batch_of(rows: list[Row]) -> pa.RecordBatch:
        return pa.RecordBatch.from_arrays([_to_arrow([r[f.name] for r in rows], f.type) for f in s.schema],
                                          schema=s.schema)

    if schema is None:
        schema = fn(batch_of([])).schema
    want = [(f.name, f.type) for f in schema]
    rows = []
    for r in s.rows:  # one tuple at a time
        out = fn(batch_of([r]))
        if [(f.name, f.type) for f in out.schema] != want:
            raise ValueError(f"map_batches: fn returned schema {out.schema}, expected {schema}")
        rows.extend(_rows_of(out))
    return Stream(rows, schema, s.time)


# --- partitioned --------------------------------------------------------------------------------

def _sessions(s: Stream, keys: list[str], gap: int) -> list[int]:
    """The session number within its key of every tuple."""
    last: dict[tuple, tuple[int, int]] = {}  # key -> (time of its previous tuple, its session)
    out = []
    for r in s.rows:
        ident, t = _identity(r, keys, s.schema), s.time_of(r)
        if ident not in last:
            session = 0
        else:
            previous, session = last[ident]
            if t - previous > gap:
                session += 1
        last[ident] = (t, session)
        out.append(session)
    return out


def _sessionize(s: Stream, key, gap: int, name: str = "session") -> Stream:
    keys = _names(key)
    _check_keys(s.schema, keys)
    schema = _add_fields(s.schema, [pa.field(name, pa.int64())])
    rows = [{**r, name: n} for r, n in zip(s.rows, _sessions(s, keys, gap))]
    return Stream(rows, schema, s.time)


_FIRST = object()  # what _previous_values gives for a key's first tuple (None is a value)


def _previous_values(s: Stream, keys: list[str], column: str) -> list:
    """For each tuple, `column` of its key's previous tuple; a marker for the key's first."""
    previous: dict[tuple, object] = {}
    out = []
    for r in s.rows:
        ident = _identity(r, keys, s.schema)
        out.append(previous.get(ident, _FIRST))
        previous[ident] = r[column]
    return out



def _lag(s: Stream, key, columns, suffix: str = "_prev") -> Stream:
    keys, cols = _names(key), _names(columns)
    _check_keys(s.schema, keys)
    schema = _add_fields(s.schema, [pa.field(c + suffix, _field(s.schema, c).type) for c in cols])
    rows = [dict(r) for r in s.rows]
    for c in cols:
        for out, prev in zip(rows, _previous_values(s, keys, c)):
            out[c + suffix] = None if prev is _FIRST else prev
    return Stream(rows, schema, s.time)


def _delta_type(type_: pa.DataType) -> pa.DataType:
    if pa.types.is_integer(type_) or pa.types.is_timestamp(type_) or pa.types.is_date32(type_):
        return pa.int64()
    if pa.types.is_floating(type_):
        return pa.float64()
    raise TypeError(f"delta() needs a numeric or temporal column, got {type_}")


def _delta(s: Stream, key, columns, suffix: str = "_delta") -> Stream:
    keys, cols = _names(key), _names(columns)
    _check_keys(s.schema, keys)
    types = {c: _delta_type(_field(s.schema, c).type) for c in cols}
    schema = _add_fields(s.schema, [pa.field(c + suffix, types[c]) for c in cols])
    rows = [dict(r) for r in s.rows]
    for c in cols:
        for out, prev in zip(rows, _previous_values(s, keys, c)):
            now = out[c]
            if prev is _FIRST or prev is None or now is None:
                out[c + suffix] = None
            elif pa.types.is_floating(types[c]):
                out[c + suffix] = float(now) - float(prev)
            else:
                out[c + suffix] = _wrap(now - prev, pa.int64())
    return Stream(rows, schema, s.time)


def _running(s: Stream, key, aggs: dict) -> Stream:
    keys, specs = _names(key), _agg_pairs(aggs)
    _check_keys(s.schema, keys)
    fields = []
    for name, (function, column) in specs.items():
        type_ = None if column is None else _field(s.schema, column).type
        fields.append(pa.field(name, _agg_output_type(function, type_)))
    schema = _add_fields(s.schema, fields)
    seen: dict[tuple, list[Row]] = {}  # key -> its tuples so far
    rows = []
    for r in s.rows:
        so_far = seen.setdefault(_identity(r, keys, s.schema), [])
        so_far.append(r)
        out = dict(r)
        for name, (function, column) in specs.items():
            type_ = None if column is None else s.schema.field(column).type
            values = [None] * len(so_far) if column is None else [x[column] for x in so_far]
            out[name] = _aggregate_values(function, values, type_)
        rows.append(out)
    return Stream(rows, schema, s.time)


def _dedupe(s: Stream, key, within: int | None = None) -> Stream:
    keys = _names(key)
    _check_keys(s.schema, keys)
    passed: dict[tuple, int] = {}  # key -> time of its last passed tuple
    rows = []
    for r in s.rows:
        ident = _identity(r, keys, s.schema)
        t = s.time_of(r) if within is not None else None
        if ident not in passed or (within is not None and t - passed[ident] > within):
            passed[ident] = t
            rows.append(r)
    return Stream(rows, s.schema, s.time)


def _pairs(s: Stream, key, item: str, gap: int) -> Stream:
    keys = _names(key)
    _check_keys(s.schema, keys)
    item_type = _field(s.schema, item).type
    s.check_time()
    fields = [s.schema.field(k) for k in keys] + [s.schema.field(s.time)]
    fields += [pa.field("item_a", item_type), pa.field("item_b", item_type)]
    if len({f.name for f in fields}) != len(fields):
        raise ValueError(f"pairs would give two columns of one name: {[f.name for f in fields]}")
    items: dict[tuple, tuple[int, list]] = {}  # key -> (session, its distinct items in order)
    rows = []
    for r, session in zip(s.rows, _sessions(s, keys, gap)):
        ident = _identity(r, keys, s.schema)
        if ident not in items or items[ident][0] != session:
            items[ident] = (session, [])
        seen = items[ident][1]
        mine = _order_key(r[item], item_type)
        if any(_order_key(v, item_type) == mine for v in seen):
            continue
        for earlier in seen:
            a, b = sorted([earlier, r[item]], key=lambda v: _order_key(v, item_type))
            rows.append({**{k: r[k] for k in keys}, s.time: s.time_of(r), "item_a": a, "item_b": b})
        seen.append(r[item])
    return Stream(rows, pa.schema(fields), s.time)


def _window_params(window) -> tuple[int, int, int]:
    if isinstance(window, tuple):
        size, advance, *rest = window
        offset = rest[0] if rest else 0
    else:
        size, advance, offset = window.size, window.advance, window.offset
    for v in (size, advance, offset):
        if isinstance(v, bool) or not isinstance(v, int):
            raise TypeError("window size, advance and offset must be ints in the time column's unit")
    return size, advance, offset


def _window_aggregate(s: Stream, window, aggs: dict, key=None, by_window: bool = False) -> Stream:
    keys = _names(key)
    for k in keys:
        _field(s.schema, k)
    size, advance, offset = _window_params(window)
    s.check_time()
    table = reference_aggregate([_to_table(s.rows, s.schema)], time=s.time, key=keys, size=size,
                                advance=advance, offset=offset, aggs=_agg_pairs(aggs))
    if len(set(table.schema.names)) != len(table.schema.names):
        raise ValueError(f"window_aggregate would give two columns of one name: {table.schema.names}")
    # window_start and window_end are never null; key columns keep their input field.
    fields = [f.with_nullable(False) if f.name in ("window_start", "window_end")
              else s.schema.field(f.name) if f.name in keys else f for f in table.schema]
    out = _rows_of(table)  # by window start, then key: aggregate()'s order
    if keys and not by_window:
        # A key's row leaves after the first tuple of that key at or past its window's end; rows
        # still open at the end keep aggregate()'s order. (Stable sort: at one tuple, by start.)
        times: dict[tuple, list[tuple[int, int]]] = {}
        for position, r in enumerate(s.rows):
            times.setdefault(_identity(r, keys, s.schema), []).append((s.time_of(r), position))

        def leaves_at(row: Row) -> float:
            for t, position in times[_identity(row, keys, s.schema)]:
                if t >= row["window_end"]:
                    return position
            return math.inf

        out.sort(key=leaves_at)
    return Stream(out, pa.schema(fields), s.time)


# --- stateful -----------------------------------------------------------------------------------

def _top_k(s: Stream, k: int, by: str, per: str | None = None, descending: bool = True) -> Stream:
    if k < 1:
        raise ValueError(f"top_k needs k >= 1, got {k}")
    by_type = _field(s.schema, by).type
    per_type = _field(s.schema, per).type if per is not None else None
    schema = _add_fields(s.schema, [pa.field("rank", pa.int64(), nullable=False)])

    def order(value):
        return value.encode("utf-8") if isinstance(value, str) else _minmax_key(value, by_type)

    groups: list[list[Row]] = []  # runs of equal per values (one group without per)
    previous = None
    for r in s.rows:
        ident = _order_key(r[per], per_type) if per is not None else ()
        if not groups or ident != previous:
            groups.append([])
        previous = ident
        groups[-1].append(r)
    rows = []
    for group in groups:
        values = [r for r in group if r[by] is not None]
        ranked = sorted(values, key=lambda r: order(r[by]), reverse=descending)  # stable either way
        ranked += [r for r in group if r[by] is None]
        rows.extend({**r, "rank": i + 1} for i, r in enumerate(ranked[:k]))
    return Stream(rows, schema, s.time)


def _parametric(s: Stream, kind: str = "stateless", cost_us: float = 10.0, selectivity: float = 1.0,
                state_bytes: int = 0, key=None, copies: Callable[[Row], int] | None = None) -> Stream:
    del kind, cost_us, state_bytes  # no effect on the output beyond p_state
    if key is not None:
        _check_keys(s.schema, _names(key))
    if copies is None:
        if selectivity != 1.0:
            raise NotImplementedError("selectivity != 1 is decided by the engine's hash: pass copies=fn(row)")
        copies = lambda _row: 1  # noqa: E731
    schema = _add_fields(s.schema, [pa.field("p_state", pa.uint64())])
    rows = [{**r, "p_state": None} for r in s.rows for _ in range(copies(r))]
    return Stream(rows, schema, s.time)


OPERATORS: dict[str, Callable[..., Stream]] = {
    "filter": _filter,
    "select": _select,
    "with_columns": _with_columns,
    "map_batches": _map_batches,
    "sessionize": _sessionize,
    "lag": _lag,
    "delta": _delta,
    "running": _running,
    "dedupe": _dedupe,
    "pairs": _pairs,
    "window_aggregate": _window_aggregate,
    "top_k": _top_k,
    "parametric": _parametric,
}


def apply(stream: Stream, spec: dict) -> Stream:
    """One operator spec ({"op": name, **parameters}) applied to a stream."""
    params = dict(spec)
    name = params.pop("op")
    if name not in OPERATORS:
        raise ValueError(f"unknown operator {name!r}; known: {sorted(OPERATORS)}")
    return OPERATORS[name](stream, **params)


def merged_stream(inputs, time: str) -> Stream:
    """The inputs' tuples in the merged order (time, input index, position)."""
    if isinstance(inputs, (pa.Table, pa.RecordBatch)):
        inputs = [inputs]
    tables = [t if isinstance(t, pa.Table) else pa.Table.from_batches([t]) for t in inputs]
    if not tables:
        raise ValueError("at least one input is needed")
    base = tables[0].schema
    for i, t in enumerate(tables[1:], 1):
        if [(f.name, f.type) for f in t.schema] != [(f.name, f.type) for f in base]:
            raise ValueError(f"input {i} has schema {t.schema}; input 0 has {base}")
    _field(base, time)
    # Nullable wherever any input's column is (docs/semantics.md).
    schema = pa.schema([f.with_nullable(any(t.schema.field(j).nullable for t in tables))
                        for j, f in enumerate(base)])
    merged = reference_merge([t.cast(schema) for t in tables], time)
    return Stream(_rows_of(merged), schema, time)


def run_reference(inputs, time: str, ops: list[dict]) -> pa.Table:
    """The pipeline ``ops`` over ``inputs`` with time column ``time``, by the definitions above."""
    stream = merged_stream(inputs, time)
    for spec in ops:
        stream = apply(stream, spec)
    return _to_table(stream.rows, stream.schema)
