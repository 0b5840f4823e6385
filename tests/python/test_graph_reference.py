"""The graph reference (graph_reference.py) on small hand-computed examples for every rule, plus
property tests against brute-force formulations. These check the reference alone; the differential
tests compare the engine with it."""

from collections import Counter

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from graph_reference import Graph


def col(table, name):
    return table.column(name).to_pylist()


def tkx(rows, value="x", time_type=pa.int64()):
    """A table of (t, k, value) rows."""
    t, k, v = zip(*rows) if rows else ((), (), ())
    return pa.table({"t": pa.array(t, time_type), "k": pa.array(k, pa.int64()), value: pa.array(v, pa.string())})


def join(left_rows, right_rows, within, how="inner", on="k"):
    g = Graph()
    left, right = g.source(tkx(left_rows, "a"), "t"), g.source(tkx(right_rows, "b"), "t")
    return g.evaluate({"out": g.join(left, right, on, within, how)})["out"]


def pairs(out):
    return list(zip(col(out, "t"), col(out, "a"), col(out, "b")))


# --- sources, operators, fan-out ----------------------------------------------------------------

def test_source_merges_inputs_and_op_applies_a_spec():
    g = Graph()
    s = g.source([tkx([(1, 1, "a0"), (3, 1, "a1")]), tkx([(0, 2, "b0"), (3, 2, "b1")])], "t")
    f = g.op(s, {"op": "filter", "pred": lambda r: r["k"] == 1})
    out = g.evaluate({"s": s, "f": f})
    assert col(out["s"], "x") == ["b0", "a0", "a1", "b1"]
    assert col(out["f"], "x") == ["a0", "a1"]


def test_every_source_uses_one_time_column():
    g = Graph()
    g.source(tkx([(1, 1, "a")]), "t")
    with pytest.raises(ValueError, match="one time column"):
        g.source(pa.table({"u": [1]}), "u")


def test_fan_out_gives_each_consumer_the_whole_stream():
    g = Graph()
    s = g.source(tkx([(1, 1, "a"), (2, 2, "b"), (3, 1, "c")]), "t")
    ones = g.op(s, {"op": "filter", "pred": lambda r: r["k"] == 1})
    tagged = g.op(s, {"op": "with_columns", "named": {"x": (lambda r: r["x"] + "!", pa.string())}})
    both = g.union(s, tagged)
    joined = g.join(ones, s, "k", (0, 0))  # every tuple of key 1 with itself
    out = g.evaluate({"both": both, "joined": joined, "s": s})
    assert col(out["both"], "x") == ["a", "a!", "b", "b!", "c", "c!"]
    assert col(out["joined"], "x") == ["a", "c"]
    assert col(out["joined"], "x_right") == ["a", "c"]
    assert col(out["s"], "x") == ["a", "b", "c"]  # unchanged by its consumers


def test_unknown_node():
    g = Graph()
    g.source(tkx([(1, 1, "a")]), "t")
    with pytest.raises(ValueError, match="unknown node"):
        g.op(3, {"op": "filter", "pred": lambda r: True})


# --- union --------------------------------------------------------------------------------------

def test_union_ties_by_argument_index():
    g = Graph()
    a = g.source(tkx([(1, 0, "a0"), (3, 0, "a1"), (3, 0, "a2")]), "t")
    b = g.source(tkx([(0, 0, "b0"), (3, 0, "b1"), (4, 0, "b2")]), "t")
    out = g.evaluate({"ab": g.union(a, b), "ba": g.union(b, a), "a": g.union(a)})
    assert col(out["ab"], "x") == ["b0", "a0", "a1", "a2", "b1", "b2"]
    assert col(out["ba"], "x") == ["b0", "a0", "b1", "a1", "a2", "b2"]
    assert col(out["a"], "x") == ["a0", "a1", "a2"]
    assert out["ab"].schema == tkx([]).schema


def test_union_of_a_node_with_itself():
    g = Graph()
    a = g.source(tkx([(1, 0, "a0"), (2, 0, "a1")]), "t")
    assert col(g.evaluate({"o": g.union(a, a)})["o"], "x") == ["a0", "a0", "a1", "a1"]


def test_union_schema_must_match_nullability_ignored():
    g = Graph()
    a = g.source(tkx([(1, 0, "a")]), "t")
    b = g.source(pa.table({"t": [2], "k": [0], "x": [5]}), "t")
    c = g.source(pa.Table.from_pylist([{"t": 3, "k": 0, "x": "c"}], pa.schema(
        [pa.field("t", pa.int64(), nullable=False), ("k", pa.int64()), ("x", pa.string())])), "t")
    with pytest.raises(ValueError, match="argument 2"):
        g.union(a, c, b)
    assert col(g.evaluate({"o": g.union(c, a)})["o"], "x") == ["a", "c"]


def test_union_needs_sorted_non_null_times():
    g = Graph()
    a = g.source(tkx([(1, 0, "a"), (2, 0, "b")]), "t")
    neg = g.op(a, {"op": "with_columns", "named": {"t": (lambda r: -r["t"], pa.int64())}})
    with pytest.raises(ValueError, match=r"union argument 1: .*row 1 has time -2 after time -1"):
        g.union(a, neg)
    null = g.op(a, {"op": "with_columns", "named": {"t": (lambda r: None if r["t"] == 2 else 1, pa.int64())}})
    with pytest.raises(ValueError, match="union argument 0: row 1 has a null time"):
        g.union(null)
    with pytest.raises(ValueError, match="at least one"):
        g.union()


# --- interval join ------------------------------------------------------------------------------

def test_join_window_around_zero_and_columns():
    g = Graph()
    left = g.source(tkx([(1, 1, "l0"), (4, 1, "l1"), (5, 2, "l2")]), "t")
    right = g.source(tkx([(0, 1, "r0"), (2, 1, "r1"), (4, 1, "r2"), (6, 2, "r3")]), "t")
    out = g.evaluate({"o": g.join(left, right, "k", (-1, 2))})["o"]
    assert out.schema.names == ["t", "k", "x", "t_right", "x_right", "t_left"]
    assert out.to_pylist() == [
        {"t": 1, "k": 1, "x": "l0", "t_right": 0, "x_right": "r0", "t_left": 1},  # at l0
        {"t": 2, "k": 1, "x": "l0", "t_right": 2, "x_right": "r1", "t_left": 1},  # at r1
        {"t": 4, "k": 1, "x": "l1", "t_right": 4, "x_right": "r2", "t_left": 4},  # equal times: at r2
        {"t": 6, "k": 2, "x": "l2", "t_right": 6, "x_right": "r3", "t_left": 5},
    ]


def test_join_window_after_the_left_several_pairs_at_one_tuple():
    out = join([(0, 1, "l0"), (2, 1, "l1")], [(1, 1, "r0"), (2, 1, "r1"), (3, 1, "r2"), (5, 1, "r3")], (1, 3))
    # merged: l0 r0 l1 r1 r2 r3; l0 matches r0 r1 r2, l1 matches r2 r3 (r1 is at distance 0 < lo)
    assert pairs(out) == [(1, "l0", "r0"), (2, "l0", "r1"), (3, "l0", "r2"), (3, "l1", "r2"), (5, "l1", "r3")]
    assert col(out, "t_left") == [0, 0, 0, 2, 2]


def test_join_window_before_the_left():
    out = join([(5, 1, "l0"), (6, 1, "l1"), (7, 2, "l2")],
               [(2, 1, "r0"), (4, 1, "r1"), (5, 1, "r2"), (6, 2, "r3")], (-3, -1))
    # merged: r0 r1 l0 r2 l1 r3 l2: every pair at its left tuple, by right position
    assert pairs(out) == [(5, "l0", "r0"), (5, "l0", "r1"), (6, "l1", "r1"), (6, "l1", "r2"), (7, "l2", "r3")]


def test_join_equal_times_emit_at_the_right_in_left_order():
    out = join([(1, 1, "l0"), (1, 1, "l1")], [(1, 1, "r0"), (1, 1, "r1")], (0, 0))
    assert pairs(out) == [(1, "l0", "r0"), (1, "l1", "r0"), (1, "l0", "r1"), (1, "l1", "r1")]


def test_join_null_keys_never_match():
    rows = [(1, None, "n"), (1, 1, "one")]
    assert pairs(join(rows, rows, (0, 0))) == [(1, "one", "one")]
    left = join(rows, rows, (0, 0), "left")
    assert pairs(left) == [(1, "one", "one"), (1, "n", None)]  # n: d = 1, nothing past it: at the end


def test_join_several_keys():
    g = Graph()
    schema = {"t": [1, 1, 1], "k1": [1, 1, 2], "k2": ["a", "b", "a"]}
    left = g.source(pa.table({**schema, "x": [0, 1, 2]}), "t")
    right = g.source(pa.table({**schema, "y": [10, 11, 12]}), "t")
    out = g.evaluate({"o": g.join(left, right, ["k1", "k2"], (0, 0))})["o"]
    assert out.schema.names == ["t", "k1", "k2", "x", "t_right", "y", "t_left"]
    assert list(zip(col(out, "x"), col(out, "y"))) == [(0, 10), (1, 11), (2, 12)]


def test_left_join_emission_points_and_pair_time():
    out = join([(1, 1, "l0"), (2, 9, "l1"), (3, 1, "l2"), (10, 9, "l3")],
               [(2, 1, "r0"), (3, 1, "r1"), (4, 5, "r2"), (5, 1, "r3")], (0, 2), "left")
    # merged: l0 l1 r0 l2 r1 r2 r3 l3. l1 (d = 4) leaves before r3, the first tuple past 4, and
    # before r3's pair; l3 (d = 12) at the end. Their time is l.time + hi.
    assert pairs(out) == [(2, "l0", "r0"), (3, "l0", "r1"), (3, "l2", "r1"), (4, "l1", None),
                          (5, "l2", "r3"), (12, "l3", None)]
    assert col(out, "t_left") == [1, 1, 3, 2, 3, 10]
    assert col(out, "t_right") == [2, 3, 3, None, 5, None]


def test_left_join_negative_hi_emits_right_after_the_left_tuple():
    out = join([(5, 1, "l0"), (6, 9, "l1"), (7, 1, "l2")], [(4, 1, "r0"), (6, 1, "r1"), (6, 1, "r2")],
               (-2, -1), "left")
    # merged: r0 l0 l1 r1 r2 l2; l1 leaves right after itself, with its own time (6 > 6 - 1)
    assert pairs(out) == [(5, "l0", "r0"), (6, "l1", None), (7, "l2", "r1"), (7, "l2", "r2")]


def test_left_join_several_unmatched_at_one_point_in_left_order():
    out = join([(1, 7, "l0"), (1, 8, "l1"), (2, 1, "l2")], [(2, 1, "r0"), (4, 1, "r1")], (0, 1), "left")
    # l0, l1 (d = 2) leave before r1 (time 4), after r0's pair
    assert pairs(out) == [(2, "l2", "r0"), (2, "l0", None), (2, "l1", None)]


def test_left_join_without_matches_keeps_types():
    g = Graph()
    ms = pa.timestamp("ms")
    left = g.source(tkx([(1, 1, "l0")], "a", ms), "t")
    right = g.source(tkx([(5, 2, "r0")], "b", ms), "t")
    out = g.evaluate({"o": g.join(left, right, "k", (-1, 1), "left")})["o"]
    assert [(f.name, f.type) for f in out.schema] == [
        ("t", ms), ("k", pa.int64()), ("a", pa.string()), ("t_right", ms), ("b", pa.string()), ("t_left", ms)]
    assert out.column("t").cast(pa.int64()).to_pylist() == [2]
    assert col(out, "b") == [None]


def test_join_errors():
    g = Graph()
    left = g.source(tkx([(1, 1, "a"), (2, 1, "b")]), "t")
    right = g.source(pa.table({"t": [1], "k": pa.array([1], pa.int32()), "t_left": [0]}), "t")
    with pytest.raises(ValueError, match="lo <= hi"):
        g.join(left, left, "k", (1, 0))
    with pytest.raises(ValueError, match="how"):
        g.join(left, left, "k", (0, 1), "outer")
    with pytest.raises(ValueError, match="'z' is not in the left"):
        g.join(left, left, "z", (0, 1))
    with pytest.raises(ValueError, match="type"):
        g.join(left, right, "k", (0, 1))
    unsorted = g.op(left, {"op": "with_columns", "named": {"t": (lambda r: 3 - r["t"], pa.int64())}})
    with pytest.raises(ValueError, match="join right: .*row 1 has time 1 after time 2"):
        g.join(left, unsorted, "k", (0, 1))
    with pytest.raises(ValueError, match="join left"):
        g.join(unsorted, left, "k", (0, 1))
    with pytest.raises(ValueError, match="'t_left' is taken"):
        g.join(left, g.op(right, {"op": "with_columns", "named": {"k": (lambda r: r["k"], pa.int64())}}),
               "k", (0, 1))
    clash = g.source(pa.table({"t": [1], "k": [1], "x": [0], "x_right": [0]}), "t")
    with pytest.raises(ValueError, match="'x_right', which is taken"):
        g.join(clash, clash, "k", (0, 0))


# --- as-of join ---------------------------------------------------------------------------------

ASOF_LEFT = [(1, 1, "l0"), (3, 1, "l1"), (3, 2, "l2"), (5, 3, "l3"), (6, None, "l4"), (9, 1, "l5")]
ASOF_RIGHT = [(0, 1, "a"), (3, 1, "b"), (3, 1, "c"), (4, 2, "d"), (5, None, "e"), (7, 1, "f")]


def asof(right, tolerance=None, left_rows=ASOF_LEFT):
    g = Graph()
    left = g.source(tkx(left_rows, "x"), "t")
    if not isinstance(right, pa.Table):
        right = g.source(tkx(right, "v"), "t")
    return g.evaluate({"o": g.join_asof(left, right, "k", tolerance)})["o"]


def test_asof_equal_times_last_wins_missing_and_null_keys():
    out = asof(ASOF_RIGHT)
    assert out.schema.names == ["t", "k", "x", "t_right", "v"]
    assert col(out, "x") == ["l0", "l1", "l2", "l3", "l4", "l5"]
    assert col(out, "v") == ["a", "c", None, None, None, "f"]
    assert col(out, "t_right") == [0, 3, None, None, None, 7]
    assert col(out, "t") == [1, 3, 3, 5, 6, 9]


def test_asof_tolerance():
    assert col(asof(ASOF_RIGHT, 1), "v") == ["a", "c", None, None, None, None]
    assert col(asof(ASOF_RIGHT, 0), "v") == [None, "c", None, None, None, None]
    with pytest.raises(ValueError, match=">= 0"):
        asof(ASOF_RIGHT, -1)


def test_asof_static_table_last_row_per_key():
    table = pa.table({"k": [1, 2, 1, None], "v": ["a", "b", "c", "d"]})
    out = asof(table)
    assert out.schema.names == ["t", "k", "x", "v"]
    assert col(out, "v") == ["c", "c", "b", None, None, "c"]
    timed = pa.table({"t": [100], "k": [3], "v": ["z"]})  # a time column is an ordinary column
    out = asof(timed)
    assert out.schema.names == ["t", "k", "x", "t_right", "v"]
    assert col(out, "t_right") == [None, None, None, 100, None, None]
    with pytest.raises(ValueError, match="static"):
        asof(table, 5)


def test_asof_errors():
    with pytest.raises(ValueError, match="type"):
        asof(pa.table({"k": pa.array([1], pa.int32()), "v": ["a"]}))
    with pytest.raises(ValueError, match="'k' is not in the right"):
        asof(pa.table({"v": ["a"]}))
    g = Graph()
    s = g.source(tkx([(1, 1, "a"), (2, 1, "b")]), "t")
    unsorted = g.op(s, {"op": "with_columns", "named": {"t": (lambda r: 3 - r["t"], pa.int64())}})
    with pytest.raises(ValueError, match="join_asof right: .*row 1"):
        g.join_asof(s, unsorted, "k")


# --- properties against brute force -------------------------------------------------------------

KEYS = st.sampled_from([None, 0, 1, 1])  # mostly non-null, few values: many matches


@st.composite
def timed_rows(draw, max_size=8):
    """Rows (t, k, id) sorted by time."""
    steps = draw(st.lists(st.integers(0, 3), max_size=max_size))
    times, t = [], draw(st.integers(-3, 3))
    for step in steps:
        t += step
        times.append(t)
    return [(t, draw(KEYS), i) for i, t in enumerate(times)]


def table_of(rows, id_name):
    return pa.table({"t": pa.array([r[0] for r in rows], pa.int64()),
                     "k": pa.array([r[1] for r in rows], pa.int64()),
                     id_name: pa.array([r[2] for r in rows], pa.int64())})


@settings(max_examples=50, deadline=None)
@given(st.lists(timed_rows(), min_size=1, max_size=3), st.data())
def test_union_is_the_stable_merge(inputs, data):
    g = Graph()
    nodes = [g.source(table_of(rows, "id"), "t") for rows in inputs]
    args = data.draw(st.lists(st.sampled_from(range(len(nodes))), min_size=1, max_size=4))
    out = g.evaluate({"o": g.union(*[nodes[a] for a in args])})["o"]
    tagged = [(r[0], i, pos, (a, r[2])) for i, a in enumerate(args) for pos, r in enumerate(inputs[a])]
    times = col(out, "t")
    assert times == sorted(times)
    got = list(zip(times, col(out, "k"), col(out, "id")))
    want = [(t, inputs[a][pos][1], ident) for t, _, pos, (a, ident) in sorted(tagged, key=lambda x: x[:3])]
    assert Counter(got) == Counter((r[0], r[1], r[2]) for a in args for r in inputs[a])
    assert got == want


def brute_join(left, right, lo, hi, how):
    """(t, lid, rid) in the emission order, by the definitions: a sort key per output row."""
    merged = sorted([(r[0], 0, p) for p, r in enumerate(left)] + [(r[0], 1, p) for p, r in enumerate(right)])
    index = {(side, p): i for i, (_, side, p) in enumerate(merged)}
    out = []
    for lp, l in enumerate(left):
        found = False
        for rp, r in enumerate(right):
            if l[1] is not None and l[1] == r[1] and lo <= r[0] - l[0] <= hi:
                found = True
                li, ri = index[(0, lp)], index[(1, rp)]
                out.append(((max(li, ri), 1, min(li, ri)), (max(l[0], r[0]), l[2], r[2])))
        if how == "left" and not found:
            d = l[0] + hi
            first_past = next((i for i, (t, _, _) in enumerate(merged) if t > d), len(merged))
            point = max(index[(0, lp)] + 1, first_past)
            out.append(((point, 0, index[(0, lp)]), (max(l[0], d), l[2], None)))
    return [row for _, row in sorted(out)]


@settings(max_examples=50, deadline=None)
@given(timed_rows(), timed_rows(), st.integers(-4, 4), st.integers(0, 5), st.sampled_from(["inner", "left"]))
def test_join_matches_nested_loop(left, right, lo, width, how):
    hi = lo + width
    g = Graph()
    out = g.evaluate({"o": g.join(g.source(table_of(left, "lid"), "t"), g.source(table_of(right, "rid"), "t"),
                                  "k", (lo, hi), how)})["o"]
    got = list(zip(col(out, "t"), col(out, "lid"), col(out, "rid")))
    times = col(out, "t")
    assert times == sorted(times)
    nested = {(l[2], r[2]) for l in left for r in right
              if l[1] is not None and l[1] == r[1] and lo <= r[0] - l[0] <= hi}
    assert {(a, b) for _, a, b in got if b is not None} == nested
    assert len([b for _, _, b in got if b is not None]) == len(nested)
    if how == "left":
        assert {a for _, a, b in got if b is None} == {l[2] for l in left} - {a for a, _ in nested}
    assert got == brute_join(left, right, lo, hi, how)
    assert col(out, "t_left") == [left[lid][0] for lid in col(out, "lid")]


@settings(max_examples=50, deadline=None)
@given(timed_rows(), timed_rows(), st.one_of(st.none(), st.integers(0, 4)))
def test_asof_matches_per_row_brute_force(left, right, tolerance):
    g = Graph()
    out = g.evaluate({"o": g.join_asof(g.source(table_of(left, "lid"), "t"), g.source(table_of(right, "rid"), "t"),
                                       "k", tolerance)})["o"]
    want = []
    for l in left:
        candidates = [(r[0], p) for p, r in enumerate(right)
                      if l[1] is not None and r[1] == l[1] and r[0] <= l[0]]
        best = max(candidates) if candidates else None
        if best is not None and tolerance is not None and l[0] - best[0] > tolerance:
            best = None
        want.append((l[2], None if best is None else right[best[1]][2]))
    assert list(zip(col(out, "lid"), col(out, "rid"))) == want
    assert col(out, "t") == [l[0] for l in left]
