"""The pipeline reference (pipeline_reference.py) on small hand-computed examples, one or more per
operator. These check the reference alone; the differential tests compare the engine with it."""

import math

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from pipeline_reference import run_reference

CLICKS = pa.table({"ts": [1, 2, 5, 90, 91], "user": [1, 2, 1, 1, 2], "page": [10, 11, 12, 10, 13]})


def col(table, name):
    return table.column(name).to_pylist()


def test_inputs_merge_by_time_then_input_then_position():
    a = pa.table({"t": [1, 3, 3], "x": ["a0", "a1", "a2"]})
    b = pa.table({"t": [0, 3, 4], "x": ["b0", "b1", "b2"]})
    out = run_reference([a, b], "t", [])
    assert col(out, "x") == ["b0", "a0", "a1", "a2", "b1", "b2"]
    assert out.schema == a.schema


def test_filter_null_counts_as_false():
    t = pa.table({"ts": [1, 2, 3], "page": [10, None, 9]})
    out = run_reference(t, "ts", [{"op": "filter", "pred": lambda r: None if r["page"] is None else r["page"] >= 10}])
    assert col(out, "ts") == [1]


def test_select_names_computed_and_named():
    out = run_reference(CLICKS, "ts", [{"op": "select",
                                        "columns": ["user", ("p2", lambda r: r["page"] * 2, pa.int64())],
                                        "named": {"one": (lambda r: 1.0, pa.float64())}}])
    assert out.schema.names == ["user", "p2", "one"]
    assert col(out, "p2") == [20, 22, 24, 20, 26]
    assert out.schema.field("one").type == pa.float64()


def test_with_columns_replaces_in_place_and_appends():
    out = run_reference(CLICKS, "ts", [{"op": "with_columns", "named": {
        "page": (lambda r: r["page"] + 1, pa.int32()),
        "page2": (lambda r: r["page"] * 2, pa.int64()),  # sees the input's page, not the new one
    }}])
    assert out.schema.names == ["ts", "user", "page", "page2"]
    assert out.schema.field("page").type == pa.int32()
    assert col(out, "page") == [11, 12, 13, 11, 14]
    assert col(out, "page2") == [20, 22, 24, 20, 26]


def test_map_batches_per_tuple_any_selectivity():
    def doubled(batch):
        rows = pa.Table.from_batches([batch])
        rows = rows.append_column("p2", pc.multiply(rows.column("page"), 2))
        both = pa.concat_tables([rows, rows])  # two rows per tuple
        return both.combine_chunks().to_batches()[0] if both.num_rows else pa.RecordBatch.from_pylist([], both.schema)

    out = run_reference(CLICKS.slice(0, 2), "ts", [{"op": "map_batches", "fn": doubled}])
    assert col(out, "p2") == [20, 20, 22, 22]
    assert out.schema.names == ["ts", "user", "page", "p2"]
    bad = pa.schema([("other", pa.int64())])
    with pytest.raises(ValueError, match="map_batches"):
        run_reference(CLICKS, "ts", [{"op": "map_batches", "fn": doubled, "schema": bad}])


def test_sessionize_gap_is_exclusive():
    out = run_reference(CLICKS, "ts", [{"op": "sessionize", "key": "user", "gap": 30}])
    assert col(out, "session") == [0, 0, 0, 1, 1]
    assert out.schema.field("session").type == pa.int64()
    t = pa.table({"ts": [0, 10, 21, 21], "k": ["a", "a", "a", None]})
    out = run_reference(t, "ts", [{"op": "sessionize", "key": ["k"], "gap": 10, "name": "s"}])
    assert col(out, "s") == [0, 0, 1, 0]  # 10 - 0 == gap stays; the null key is a key of its own


def test_lag():
    out = run_reference(CLICKS, "ts", [{"op": "lag", "key": "user", "columns": ["page", "ts"]}])
    assert col(out, "page_prev") == [None, None, 10, 12, 11]
    assert col(out, "ts_prev") == [None, None, 1, 5, 2]
    t = pa.table({"ts": [1, 2, 3], "k": [0.0, -0.0, 0.0], "v": ["x", None, "z"]})
    out = run_reference(t, "ts", [{"op": "lag", "key": "k", "columns": "v", "suffix": "_p"}])
    assert col(out, "v_p") == [None, "x", None]  # -0.0 is 0.0's key; a null value lags as null
    assert out.schema.field("v_p").type == pa.string()


def test_delta_types_and_nulls():
    t = pa.table({
        "ts": pa.array([1000, 1500, 4000, 4001], pa.timestamp("ms")),
        "k": [1, 1, 1, 2],
        "i8": pa.array([100, -100, None, 5], pa.int8()),
        "u": pa.array([5, 3, 10, 0], pa.uint64()),
        "f": pa.array([1.5, 0.25, 1.0, 2.0], pa.float32()),
    })
    out = run_reference(t, "ts", [{"op": "delta", "key": "k", "columns": ["ts", "i8", "u", "f"]}])
    assert col(out, "ts_delta") == [None, 500, 2500, None]
    assert col(out, "i8_delta") == [None, -200, None, None]
    assert col(out, "u_delta") == [None, -2, 7, None]
    assert col(out, "f_delta") == [None, -1.25, 0.75, None]
    assert [out.schema.field(f"{c}_delta").type for c in ("ts", "i8", "u", "f")] == [pa.int64()] * 3 + [pa.float64()]
    with pytest.raises(TypeError):
        run_reference(pa.table({"ts": [1], "s": ["a"]}), "ts", [{"op": "delta", "key": "s", "columns": "s"}])


def test_running_every_function():
    t = pa.table({"ts": [1, 2, 3, 4], "k": ["a", "a", "b", "a"], "v": [2, None, 5, 1]})
    aggs = {"n": ("count", None), "cv": ("count", "v"), "s": ("sum", "v"), "m": ("mean", "v"),
            "lo": ("min", "v"), "hi": ("max", "v"), "f": ("first", "v"), "l": ("last", "v")}
    out = run_reference(t, "ts", [{"op": "running", "key": "k", "aggs": aggs}])
    assert col(out, "n") == [1, 2, 1, 3]
    assert col(out, "cv") == [1, 1, 1, 2]
    assert col(out, "s") == [2, 2, 5, 3]
    assert col(out, "m") == [2.0, 2.0, 5.0, 1.5]
    assert col(out, "lo") == [2, 2, 5, 1]
    assert col(out, "hi") == [2, 2, 5, 2]
    assert col(out, "f") == [2, 2, 5, 2]
    assert col(out, "l") == [2, None, 5, 1]
    assert [out.schema.field(n).type for n in aggs] == [pa.int64()] * 3 + [pa.float64()] + [pa.int64()] * 4


def test_running_float_total_order_and_null_start():
    t = pa.table({"ts": [1, 2, 3, 4], "k": [0, 0, 0, 0], "f": [None, 0.0, -0.0, math.nan]})
    aggs = {"lo": ("min", "f"), "hi": ("max", "f"), "s": ("sum", "f"), "first": ("first", "f")}
    out = run_reference(t, "ts", [{"op": "running", "key": "k", "aggs": aggs}])
    lo, hi, s = col(out, "lo"), col(out, "hi"), col(out, "s")
    assert lo[0] is None and hi[0] is None and s[0] is None
    assert math.copysign(1, lo[2]) == -1 and math.copysign(1, hi[2]) == 1  # -0.0 below 0.0
    assert math.copysign(1, lo[3]) == -1 and math.isnan(hi[3])  # NaN is the largest
    assert math.isnan(s[3])
    assert col(out, "first") == [None] * 4  # the first tuple's value, null included


def test_dedupe():
    t = pa.table({"ts": [0, 5, 11, 12, 30, 31], "k": [1, 1, 1, 1, 1, 2]})
    assert col(run_reference(t, "ts", [{"op": "dedupe", "key": "k"}]), "ts") == [0, 31]
    assert col(run_reference(t, "ts", [{"op": "dedupe", "key": "k", "within": 10}]), "ts") == [0, 11, 30, 31]


def test_pairs():
    t = pa.table({"ts": [0, 1, 2, 3, 4, 50, 51], "u": [1, 1, 1, 1, 2, 1, 1], "item": [3, 1, 3, 2, 9, 1, 3]})
    out = run_reference(t, "ts", [{"op": "pairs", "key": "u", "item": "item", "gap": 10}])
    assert out.schema.names == ["u", "ts", "item_a", "item_b"]
    assert out.to_pylist() == [
        {"u": 1, "ts": 1, "item_a": 1, "item_b": 3},
        {"u": 1, "ts": 3, "item_a": 2, "item_b": 3},  # earlier items in order of appearance
        {"u": 1, "ts": 3, "item_a": 1, "item_b": 2},
        {"u": 1, "ts": 51, "item_a": 1, "item_b": 3},  # t = 50 opened a new session
    ]
    t = pa.table({"ts": [0, 1, 2], "u": [1, 1, 1], "item": ["b", None, "a"]})
    out = run_reference(t, "ts", [{"op": "pairs", "key": "u", "item": "item", "gap": 10}])
    assert [(r["item_a"], r["item_b"]) for r in out.to_pylist()] == [("b", None), ("a", "b"), ("a", None)]


def test_window_aggregate_keyed_closes_per_key():
    t = pa.table({"t": pa.array([1, 3, 5, 8, 12, 25, 31], pa.int32()),
                  "k": ["a", "b", "a", None, "a", "b", "a"], "v": [1, 2, 3, 4, 5, 6, 7]})
    out = run_reference(t, "t", [{"op": "window_aggregate", "window": (10, 10),
                                  "aggs": {"n": ("count", None), "s": ("sum", "v")}, "key": "k"}])
    assert out.to_pylist() == [
        {"window_start": 0, "window_end": 10, "k": "a", "n": 2, "s": 4},   # closed by a at 12
        {"window_start": 0, "window_end": 10, "k": "b", "n": 1, "s": 2},   # closed by b at 25
        {"window_start": 10, "window_end": 20, "k": "a", "n": 1, "s": 5},  # closed by a at 31
        {"window_start": 0, "window_end": 10, "k": None, "n": 1, "s": 4},  # at the end: start, key
        {"window_start": 20, "window_end": 30, "k": "b", "n": 1, "s": 6},
        {"window_start": 30, "window_end": 40, "k": "a", "n": 1, "s": 7},
    ]
    assert [(f.name, f.type, f.nullable) for f in out.schema][:2] == [
        ("window_start", pa.int32(), False), ("window_end", pa.int32(), False)]


def test_window_aggregate_keyed_sliding_several_at_one_tuple():
    t = pa.table({"t": [0, 1, 9], "k": [1, 1, 1]})
    out = run_reference(t, "t", [{"op": "window_aggregate", "window": (4, 2, 0),
                                  "aggs": {"n": ("count", None)}, "key": ["k"]}])
    # Windows [-2,2), [0,4) hold t = 0 and 1; t = 9 closes both, by start; [6,10) and [8,12)
    # are still open at the end.
    assert [(r["window_start"], r["n"]) for r in out.to_pylist()] == [(-2, 2), (0, 2), (6, 1), (8, 1)]


def test_window_aggregate_without_key_is_aggregate():
    t = pa.table({"t": [0, 4, 5, 11], "v": [1.5, None, 2.0, 4.0]})
    out = run_reference(t, "t", [{"op": "window_aggregate", "window": (5, 5),
                                  "aggs": {"s": ("sum", "v"), "l": ("last", "v")}}])
    assert out.to_pylist() == [
        {"window_start": 0, "window_end": 5, "s": 1.5, "l": None},
        {"window_start": 5, "window_end": 10, "s": 2.0, "l": 2.0},
        {"window_start": 10, "window_end": 15, "s": 4.0, "l": 4.0},
    ]


def test_top_k():
    t = pa.table({"ts": list(range(9)), "g": [1, 1, 1, 1, 2, 2, None, None, 1],
                  "x": [3.0, 5.0, None, 5.0, -0.0, 0.0, math.nan, 1.0, 7.0]})
    out = run_reference(t, "ts", [{"op": "top_k", "k": 2, "by": "x", "per": "g"}])
    # Ties keep arrival order; 0.0 above -0.0; NaN above every number; a new run of g = 1 at the end.
    assert col(out, "ts") == [1, 3, 5, 4, 6, 7, 8]
    assert col(out, "rank") == [1, 2, 1, 2, 1, 2, 1]
    assert (out.schema.field("rank").type, out.schema.field("rank").nullable) == (pa.int64(), False)
    out = run_reference(t, "ts", [{"op": "top_k", "k": 3, "by": "x", "descending": False}])
    assert col(out, "ts") == [4, 5, 7]  # nulls last even ascending; -0.0 first
    out = run_reference(t, "ts", [{"op": "top_k", "k": 20, "by": "x", "descending": False}])
    assert col(out, "ts")[-2:] == [6, 2]  # NaN last of the values, then null


def test_window_aggregate_then_top_k_per_window():
    t = pa.table({"t": [0, 1, 2, 6, 7, 11], "k": ["a", "b", "c", "a", "b", "a"], "v": [5, 7, 6, 1, 2, 9]})
    out = run_reference(t, "t", [
        {"op": "window_aggregate", "window": (5, 5), "aggs": {"s": ("sum", "v")}, "key": "k"},
        {"op": "top_k", "k": 1, "by": "s", "per": "window_start"},
    ])
    # Window rows leave as [0,5) a (at t 6), [0,5) b (t 7), [5,10) a (t 11), then at the end [0,5) c,
    # [5,10) b, [10,15) a: the runs of window_start are 0: a, b | 5: a | 0: c | 5: b | 10: a.
    assert [(r["window_start"], r["k"], r["s"], r["rank"]) for r in out.to_pylist()] == [
        (0, "b", 7, 1), (5, "a", 1, 1), (0, "c", 6, 1), (5, "b", 2, 1), (10, "a", 9, 1)]
    with pytest.raises(ValueError, match="time column"):
        run_reference(t, "t", [
            {"op": "window_aggregate", "window": (5, 5), "aggs": {"s": ("sum", "v")}},
            {"op": "sessionize", "key": "s", "gap": 1},
        ])


def test_parametric():
    out = run_reference(CLICKS, "ts", [{"op": "parametric", "kind": "partitioned", "key": "user"}])
    assert out.schema.names == ["ts", "user", "page", "p_state"]
    assert out.schema.field("p_state").type == pa.uint64()
    assert col(out, "page") == col(CLICKS, "page")
    out = run_reference(CLICKS, "ts", [{"op": "parametric", "selectivity": 1.5, "copies": lambda r: 1 + r["user"] % 2}])
    assert col(out, "ts") == [1, 1, 2, 5, 5, 90, 90, 91]
    with pytest.raises(NotImplementedError):
        run_reference(CLICKS, "ts", [{"op": "parametric", "selectivity": 0.5}])


def test_errors():
    with pytest.raises(ValueError, match="unknown operator"):
        run_reference(CLICKS, "ts", [{"op": "nope"}])
    with pytest.raises(ValueError, match="already has one"):
        run_reference(CLICKS, "ts", [{"op": "sessionize", "key": "user", "gap": 1, "name": "page"}])
    with pytest.raises(KeyError):
        run_reference(CLICKS, "ts", [{"op": "lag", "key": "nobody", "columns": "page"}])
    with pytest.raises(ValueError, match="k >= 1"):
        run_reference(CLICKS, "ts", [{"op": "top_k", "k": 0, "by": "page"}])
