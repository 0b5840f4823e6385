"""The plain-Python reference of operator graphs, one tuple at a time, built on pipeline_reference.py.

No engine code. A node's output is a :class:`pipeline_reference.Stream` (tuples as dicts of Python
values, the schema, the time column's name); a unary operator node is ``pipeline_reference.apply``
of its spec, a source is ``pipeline_reference.merged_stream``. This module adds the nodes with several
inputs: ``union``, the interval ``join`` and ``join_asof``. The differential tests run a graph on the
engine and compare every output with :meth:`Graph.evaluate`.

API
---
``g = Graph()``, then each method adds a node and returns its id (an int, in creation order):

``g.source(inputs, time) -> int``
    ``inputs``: a table, a record batch or a list of them, merged as ``merged_stream(inputs, time)``.
``g.op(node, spec) -> int``
    One unary operator spec as in pipeline_reference (``{"op": name, **parameters}``).
``g.union(*nodes) -> int``
``g.join(left, right, on, within=(lo, hi), how="inner") -> int``
    The interval join; ``how`` is ``"inner"`` or ``"left"``.
``g.join_asof(left, right, by, tolerance=None) -> int``
    ``right`` is a node, or a static ``pa.Table`` (or ``pa.RecordBatch``) used as a lookup table.
``g.evaluate(outputs) -> dict[str, pa.Table]``
    ``outputs`` maps a name to a node id; the result maps it to that node's stream as a table (built
    as ``run_reference`` builds its result, so null-only columns keep their declared types).

``on`` and ``by`` are a column name or a list of names. ``within``, ``tolerance`` and times are
integers in the time column's stored unit (int64, int32, a timestamp's stored integer, date32 days).

Semantics
---------
* One time column name per graph: that of the first ``source``; another source naming another
  column raises ValueError. Every node's stream carries it (an operator may drop the column; a node
  needing the time then raises ValueError, as in pipeline_reference).
* Fan-out: a node used by several nodes gives each of them its whole stream.
* "Sorted": a node's stream that ``union``, ``join`` or ``join_asof`` reads must have non-decreasing,
  non-null times; otherwise ValueError naming the input ("union argument 1", "join left",
  "join_asof right", ...), the row (0-based position in that stream) and the two times.
* Merged order of several streams: by (time, argument index, position in its stream).

``union(*nodes)``
    Every argument has the schema of the first (names, order, types; nullability ignored), else
    ValueError naming the argument index. Output: every argument's rows in the merged order. One
    argument: its stream. A node given twice contributes its rows twice.

``join(left, right, on, within=(lo, hi), how)``, the interval join
    Needs lo <= hi, ``how`` in {"inner", "left"}, every key column in both streams with equal types.
    A pair (l, r) matches when every key is equal and not null (null never matches, as in SQL) and
    lo <= r.time - l.time <= hi. In the merged order of the two inputs (time, side with left = 0 and
    right = 1, position), a pair is emitted at the later of its two tuples (at r when the times are
    equal); pairs emitted at one tuple come in the merged order of their other tuple. With
    how="left", a left tuple l that matched nothing is emitted once no match can come: with
    d = l.time + hi, at the first point after l and before the first tuple (of either input) whose
    time exceeds d, or at the very end; i.e. right after l's own pairs when hi < 0. Several at one
    point come in left order, before the pairs emitted at the tuple that follows that point.
    Columns: the left's columns in order, its time column holding the pair time max(l.time, r.time)
    (max(l.time, l.time + hi) for an unmatched left tuple); then the right's columns except the key
    columns, a name already taken getting the suffix "_right" (the right's time column becomes
    f"{time}_right"); then f"{time}_left", the left tuple's own time (the time column's type). The
    right columns of an unmatched left tuple are null. The output is sorted by time: a pair's time is
    that of the tuple it is emitted at.

``join_asof(left, right, by, tolerance=None)``
    One row per left tuple, in left's order: the right tuple r with equal non-null ``by`` keys and
    r.time <= l.time of greatest time, the last in right's stream among those of that time; with
    ``tolerance`` (an int >= 0) only if l.time - r.time <= tolerance. Columns: the left's columns
    (its time), then the right's except the ``by`` columns, a taken name suffixed "_right". Without
    such an r, the right columns are null. A static table is in force from the start: per key its
    last row; it needs no time column (one named like the time column is an ordinary column, so it
    becomes f"{time}_right"); ``tolerance`` must be None with it.

Decisions where the specification is silent
-------------------------------------------
* Eager evaluation: each method computes its node's stream at once, so every error (schemas,
  keys, unsorted or null times, an operator's own error) is raised by the call that adds the node,
  even for a node no output uses. ``evaluate`` only builds tables. Unknown node ids: ValueError.
* Key equality (``on``, ``by``) follows pipeline_reference's keys: -0.0 equals 0.0, NaN equals NaN,
  strings by value; only null never matches. A key column missing on either side: ValueError (not
  KeyError). An empty key list is allowed: every tuple then has the same key.
* ``lo``, ``hi`` and ``tolerance`` must be ints (not bool): TypeError otherwise; tolerance < 0 and
  lo > hi are ValueError.
* Output names: a right column whose name is taken by an earlier output column is renamed
  name + "_right"; if that is taken too, or f"{time}_left" is taken, ValueError. A key column that is
  the time column itself is dropped from the right's columns like any key (no f"{time}_right").
* The unmatched row's time l.time + hi is not range-checked (overflow fails in Arrow).
* Nullability: columns passed through keep theirs; union's columns are nullable where any
  argument's is; the right's columns become nullable where a row can lack a match (how="left",
  join_asof). Compare names and types, as with pipeline_reference.
* Rows are shared between nodes, not copied (no operator mutates its input's dicts).
"""

from __future__ import annotations

from collections import deque

import pyarrow as pa

from pipeline_reference import Row, Stream, _names, _rows_of, _to_table, apply, merged_stream
from reference import _order_key


# --- helpers ------------------------------------------------------------------------------------

def _check_sorted(s: Stream, what: str) -> None:
    """ValueError unless the stream's times are non-null and non-decreasing."""
    s.check_time()
    previous = None
    for i, r in enumerate(s.rows):
        t = r[s.time]
        if t is None:
            raise ValueError(f"{what}: row {i} has a null time")
        if previous is not None and t < previous:
            raise ValueError(f"{what}: not sorted by time: row {i} has time {t} after time {previous}")
        previous = t


def _check_key_columns(left: pa.Schema, right: pa.Schema, keys: list[str], what: str) -> None:
    for k in keys:
        for side, schema in (("left", left), ("right", right)):
            if k not in schema.names:
                raise ValueError(f"{what}: key column {k!r} is not in the {side} input "
                                 f"(columns: {schema.names})")
        if left.field(k).type != right.field(k).type:
            raise ValueError(f"{what}: key column {k!r} has type {left.field(k).type} on the left "
                             f"and {right.field(k).type} on the right")


def _key(row: Row, keys: list[str], schema: pa.Schema):
    """The tuple's key (pipeline_reference's identity of values), or None when a key value is null."""
    if any(row[k] is None for k in keys):
        return None
    return tuple(_order_key(row[k], schema.field(k).type) for k in keys)


def _right_columns(left: pa.Schema, right: pa.Schema, keys: list[str], nullable: bool,
                   what: str) -> tuple[list[pa.Field], list[tuple[str, str]]]:
    """The right's output fields and (output name, right name) pairs: every right column but the keys,
    a name already taken suffixed "_right"."""
    taken = set(left.names)
    fields, names = [], []
    for f in right:
        if f.name in keys:
            continue
        name = f.name if f.name not in taken else f.name + "_right"
        if name in taken:
            raise ValueError(f"{what}: the right's column {f.name!r} would be named {name!r}, "
                             f"which is taken")
        taken.add(name)
        fields.append(f.with_name(name).with_nullable(f.nullable or nullable))
        names.append((name, f.name))
    return fields, names


def _int(value, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{what} must be an int in the time column's unit, got {value!r}")
    return value


# --- the multi-input nodes ----------------------------------------------------------------------

def union_streams(streams: list[Stream]) -> Stream:
    """All rows of all streams in the merged order (time, argument index, position)."""
    if not streams:
        raise ValueError("union needs at least one input")
    base = streams[0].schema
    for i, s in enumerate(streams):
        if [(f.name, f.type) for f in s.schema] != [(f.name, f.type) for f in base]:
            raise ValueError(f"union argument {i} has schema {s.schema}; argument 0 has {base}")
        _check_sorted(s, f"union argument {i}")
    schema = pa.schema([f.with_nullable(any(s.schema.field(j).nullable for s in streams))
                        for j, f in enumerate(base)])
    tagged = [(r[s.time], i, position, r) for i, s in enumerate(streams) for position, r in enumerate(s.rows)]
    tagged.sort(key=lambda x: x[:3])
    return Stream([r for *_, r in tagged], schema, streams[0].time)


def interval_join(left: Stream, right: Stream, on, within: tuple[int, int], how: str = "inner") -> Stream:
    """The interval join, walking the merged sequence of the two inputs one tuple at a time."""
    keys = _names(on)
    lo, hi = (_int(v, "within") for v in within)
    if lo > hi:
        raise ValueError(f"join: within=(lo, hi) needs lo <= hi, got {within}")
    if how not in ("inner", "left"):
        raise ValueError(f"join: how must be 'inner' or 'left', got {how!r}")
    _check_key_columns(left.schema, right.schema, keys, "join")
    _check_sorted(left, "join left")
    _check_sorted(right, "join right")
    time = left.time

    right_fields, right_names = _right_columns(left.schema, right.schema, keys, how == "left", "join")
    time_left = f"{time}_left"
    if time_left in left.schema.names or time_left in [n for n, _ in right_names]:
        raise ValueError(f"join: the output column {time_left!r} is taken")
    time_field = left.schema.field(time)
    schema = pa.schema(list(left.schema) + right_fields + [time_field.with_name(time_left)])

    def row(l: Row, r: Row | None, pair_time: int) -> Row:
        out = {**l, time: pair_time}
        out.update({name: (None if r is None else r[of]) for name, of in right_names})
        out[time_left] = l[time]
        return out

    def matches(l: Row, r: Row) -> bool:
        k = _key(l, keys, left.schema)
        return (k is not None and k == _key(r, keys, right.schema)
                and lo <= r[time] - l[time] <= hi)

    # The merged sequence: (time, side, position), left = 0, right = 1.
    merged = [(r[time], side, position, r)
              for side, s in enumerate((left, right)) for position, r in enumerate(s.rows)]
    merged.sort(key=lambda x: x[:3])

    out: list[Row] = []
    seen: tuple[list, list] = ([], [])  # each side's (position, tuple) so far, in order
    matched = [False] * len(left.rows)  # by left position
    pending: deque = deque()  # left (position, tuple) of how="left" whose matches may still come

    def flush_unmatched(before: float) -> None:
        # Left tuples that can no longer match (l.time + hi < before), in left order.
        while pending and pending[0][1][time] + hi < before:
            position, l = pending.popleft()
            if not matched[position]:
                out.append(row(l, None, max(l[time], l[time] + hi)))

    for t, side, position, tup in merged:
        flush_unmatched(t)
        # The pairs whose later tuple is this one, by their other tuple's merged position.
        for other_position, other in seen[1 - side]:
            l, r, lpos = (tup, other, position) if side == 0 else (other, tup, other_position)
            if matches(l, r):
                matched[lpos] = True
                out.append(row(l, r, max(l[time], r[time])))
        seen[side].append((position, tup))
        if side == 0 and how == "left":
            pending.append((position, tup))  # with hi < 0, flushed before the next tuple
    flush_unmatched(float("inf"))
    return Stream(out, schema, time)


def asof_join(left: Stream, right: Stream | pa.Table | pa.RecordBatch, by,
              tolerance: int | None = None) -> Stream:
    """For each left tuple, the latest right tuple of its key at or before its time."""
    keys = _names(by)
    static = not isinstance(right, Stream)
    if tolerance is not None:
        _int(tolerance, "tolerance")
        if tolerance < 0:
            raise ValueError(f"join_asof: tolerance must be >= 0, got {tolerance}")
        if static:
            raise ValueError("join_asof: tolerance needs a right stream, not a static table")
    right_schema = right.schema
    _check_key_columns(left.schema, right_schema, keys, "join_asof")
    _check_sorted(left, "join_asof left")
    time = left.time
    right_fields, right_names = _right_columns(left.schema, right_schema, keys, True, "join_asof")
    schema = pa.schema(list(left.schema) + right_fields)

    if static:
        # In force from the start: per key, its last row.
        latest = {}
        for r in _rows_of(right):
            k = _key(r, keys, right_schema)
            if k is not None:
                latest[k] = r
        right_rows = []
    else:
        _check_sorted(right, "join_asof right")
        latest, right_rows = {}, right.rows

    out = []
    j = 0
    for l in left.rows:
        # Take in every right tuple at or before l's time; a later one of a key replaces the earlier.
        while j < len(right_rows) and right_rows[j][time] <= l[time]:
            k = _key(right_rows[j], keys, right_schema)
            if k is not None:
                latest[k] = right_rows[j]
            j += 1
        k = _key(l, keys, left.schema)
        r = None if k is None else latest.get(k)
        if r is not None and tolerance is not None and l[time] - r[time] > tolerance:
            r = None
        out.append({**l, **{name: (None if r is None else r[of]) for name, of in right_names}})
    return Stream(out, schema, time)


# --- the graph ----------------------------------------------------------------------------------

class Graph:
    """Nodes added one call at a time; each node's stream is computed when the node is added."""

    def __init__(self) -> None:
        self._streams: list[Stream] = []
        self._time: str | None = None

    def _add(self, stream: Stream) -> int:
        self._streams.append(stream)
        return len(self._streams) - 1

    def _stream(self, node: int) -> Stream:
        if isinstance(node, bool) or not isinstance(node, int) or not 0 <= node < len(self._streams):
            raise ValueError(f"unknown node {node!r}; this graph has nodes 0..{len(self._streams) - 1}")
        return self._streams[node]

    def source(self, inputs, time: str) -> int:
        if self._time is not None and time != self._time:
            raise ValueError(f"every source of a graph needs one time column: {time!r} != {self._time!r}")
        stream = merged_stream(inputs, time)
        self._time = time
        return self._add(stream)

    def op(self, node: int, spec: dict) -> int:
        return self._add(apply(self._stream(node), spec))

    def union(self, *nodes: int) -> int:
        return self._add(union_streams([self._stream(n) for n in nodes]))

    def join(self, left: int, right: int, on, within: tuple[int, int], how: str = "inner") -> int:
        return self._add(interval_join(self._stream(left), self._stream(right), on, within, how))

    def join_asof(self, left: int, right, by, tolerance: int | None = None) -> int:
        if not isinstance(right, (pa.Table, pa.RecordBatch)):
            right = self._stream(right)
        return self._add(asof_join(self._stream(left), right, by, tolerance))

    def evaluate(self, outputs: dict[str, int]) -> dict[str, pa.Table]:
        return {name: _to_table(self._stream(n).rows, self._stream(n).schema) for name, n in outputs.items()}
