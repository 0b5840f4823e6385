"""Expressions: the engine's evaluate() and filter() against pyarrow.compute on random batches with
nulls (and sliced at odd offsets), the promotion and division rules, and the error messages."""

import math

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import given
from hypothesis import strategies as st

import pyarrow_ops as po
from pyarrow_ops import _engine, col, lit

INTS = {"i32": pa.int32(), "i64": pa.int64(), "u8": pa.uint8()}
NUMERIC = [*INTS, "f64"]


def ints(t: pa.DataType):
    info = np.iinfo(t.to_pandas_dtype())
    lo, hi = int(info.min), int(info.max)
    # small values often, so zero and -1 divisors and equal values turn up
    return st.one_of(st.integers(max(lo, -3), 3), st.integers(lo, hi))


@st.composite
def batches(draw, max_rows=40):
    n = draw(st.integers(0, max_rows))

    def column(elements, type_):
        return pa.array(draw(st.lists(st.none() | elements, min_size=n, max_size=n)), type=type_)

    texts = st.text(alphabet="abc", max_size=4)
    batch = pa.record_batch(
        {
            **{name: column(ints(t), t) for name, t in INTS.items()},
            "f64": column(st.floats(width=64) | st.sampled_from([0.0, -0.0, 1.0, -1.0, 0.5]), pa.float64()),
            "b": column(st.booleans(), pa.bool_()),
            "b2": column(st.booleans(), pa.bool_()),
            "s": column(texts, pa.string()),
            "ls": column(texts, pa.large_string()),
            "ts": column(st.integers(-(10**12), 10**12) | st.integers(-3, 3), pa.timestamp("ms")),
            "ts2": column(st.integers(-3, 3), pa.timestamp("ms")),
        }
    )
    # A slice at an odd offset makes every bitmap start off a byte boundary.
    return batch.slice(draw(st.integers(0, min(n, 9))))


def evaluate(expr, batch):
    return _engine.evaluate(expr._to_ir(), batch)


def same(actual: pa.Array, expected: pa.Array):
    """Equal types and values, NaN equal to NaN."""
    assert actual.type == expected.type, (actual.type, expected.type)
    a, e = actual.to_pylist(), expected.to_pylist()
    assert len(a) == len(e)
    for x, y in zip(a, e):
        if isinstance(x, float) and isinstance(y, float) and math.isnan(x) and math.isnan(y):
            continue
        assert x == y and type(x) is type(y), (a, e)


def promote(a: pa.DataType, b: pa.DataType) -> pa.DataType:
    """The promotion rule of core/expr.h, written independently."""
    if pa.types.is_floating(a) or pa.types.is_floating(b):
        return pa.float32() if a == b == pa.float32() else pa.float64()
    signed_a, signed_b = pa.types.is_signed_integer(a), pa.types.is_signed_integer(b)
    if signed_a == signed_b:
        width = max(a.bit_width, b.bit_width)
        return pa.from_numpy_dtype(np.dtype(f"{'i' if signed_a else 'u'}{width // 8}"))
    ws, wu = (a.bit_width, b.bit_width) if signed_a else (b.bit_width, a.bit_width)
    width = ws if ws > wu else min(2 * wu, 64)
    return pa.from_numpy_dtype(np.dtype(f"i{width // 8}"))


# An operand: a column name, or a Python literal (int64 or double in the engine).
numeric_operands = st.sampled_from(NUMERIC) | st.integers(-5, 5) | st.sampled_from([2.5, -0.5, 0.0])


def as_expr(operand):
    return col(operand) if isinstance(operand, str) else lit(operand)


def as_array(operand, batch: pa.RecordBatch) -> pa.Array:
    if isinstance(operand, str):
        return batch.column(operand)
    return pa.array([operand] * batch.num_rows, pa.int64() if isinstance(operand, int) else pa.float64())


def both(a, b, batch):
    """The two operands as arrays of their common type, as the engine sees them."""
    x, y = as_array(a, batch), as_array(b, batch)
    t = promote(x.type, y.type)
    return x.cast(t, safe=False), y.cast(t, safe=False), t


@given(batches(), numeric_operands, numeric_operands, st.sampled_from(["+", "-", "*", "/"]))
def test_arithmetic_matches_pyarrow(batch, a, b, op):
    if not (isinstance(a, str) or isinstance(b, str)):
        a = "i64"
    ea, eb = as_expr(a), as_expr(b)
    expr = {"+": ea + eb, "-": ea - eb, "*": ea * eb, "/": ea / eb}[op]
    x, y, _ = both(a, b, batch)
    if op == "/":  # true division: always double
        expected = pc.divide(x.cast(pa.float64(), safe=False), y.cast(pa.float64(), safe=False))
    else:  # pyarrow's unchecked kernels wrap, as the engine does
        expected = {"+": pc.add, "-": pc.subtract, "*": pc.multiply}[op](x, y)
    same(evaluate(expr, batch), expected)


@given(st.sampled_from(list(INTS)), st.sampled_from(list(INTS)))
def test_integer_promotion_agrees_with_pyarrow(a, b):
    batch = pa.record_batch({"a": pa.array([1], INTS[a]), "b": pa.array([2], INTS[b])})
    assert evaluate(col("a") + col("b"), batch).type == pc.add(batch.column("a"), batch.column("b")).type
    assert evaluate(col("a") + 1, batch).type == pc.add(batch.column("a"), 1).type


def test_promotion_rule_for_the_remaining_pairs():
    batch = pa.record_batch(
        {
            "i64": pa.array([1], pa.int64()),
            "u64": pa.array([2**63], pa.uint64()),
            "f32": pa.array([1.5], pa.float32()),
            "i8": pa.array([1], pa.int8()),
        }
    )
    assert evaluate(col("i64") + col("u64"), batch).to_pylist() == [-(2**63) + 1]  # int64, wrapping
    assert evaluate(col("f32") * col("f32"), batch).type == pa.float32()
    assert evaluate(col("f32") + col("i8"), batch).type == pa.float64()
    assert evaluate(col("i8") / col("i8"), batch).type == pa.float64()
    assert evaluate(col("f32") + 1, batch).to_pylist() == [2.5]


def python_floor(x, y, op, t):
    """Integer // and % as Python computes them, wrapped into t."""
    r = x // y if op == "//" else x % y
    bits = t.bit_width
    r &= (1 << bits) - 1
    return r - (1 << bits) if pa.types.is_signed_integer(t) and r >= 1 << (bits - 1) else r


@given(batches(), numeric_operands, numeric_operands, st.sampled_from(["//", "%"]))
def test_floor_division_and_modulo(batch, a, b, op):
    if not (isinstance(a, str) or isinstance(b, str)):
        a = "i32"
    ea, eb = as_expr(a), as_expr(b)
    expr = ea // eb if op == "//" else ea % eb
    x, y, t = both(a, b, batch)
    xs, ys = x.to_pylist(), y.to_pylist()
    if pa.types.is_integer(t):
        if any(p is not None and q == 0 for p, q in zip(xs, ys)):
            with pytest.raises(po.InvalidInputError, match=r"row \d+ of the batch: integer division by zero in "):
                evaluate(expr, batch)
            return
        expected = pa.array([None if p is None or q is None else python_floor(p, q, op, t) for p, q in zip(xs, ys)], t)
    else:  # numpy's floor_divide and mod, nulls kept
        with np.errstate(all="ignore"):
            fn = np.floor_divide if op == "//" else np.mod
            values = fn(x.fill_null(1.0).to_numpy(), y.fill_null(1.0).to_numpy())
        expected = pa.array(values, t, mask=pc.or_(x.is_null(), y.is_null()).to_numpy(zero_copy_only=False))
    same(evaluate(expr, batch), expected)


def test_division_semantics():
    batch = pa.record_batch({"a": pa.array([7, -7, 7, None], pa.int64()), "d": pa.array([2, 2, 0, 0], pa.int64())})
    assert evaluate(col("a") / col("d"), batch).to_pylist() == [3.5, -3.5, math.inf, None]
    assert evaluate(col("a") // 2, batch).to_pylist() == [3, -4, 3, None]
    assert evaluate(col("a") % -2, batch).to_pylist() == [-1, -1, -1, None]
    assert evaluate(col("a").cast("double") // 0, batch).to_pylist() == [math.inf, -math.inf, math.inf, None]
    with pytest.raises(po.InvalidInputError, match=r'row 2 of the batch: integer division by zero in \(col\("a"\) // col\("d"\)\)'):
        evaluate(col("a") // col("d"), batch)
    # the zero divisor of the null row is not an error
    assert evaluate(col("a") % col("d"), batch.slice(3)).to_pylist() == [None]


COMPARISONS = {
    "==": pc.equal, "!=": pc.not_equal, "<": pc.less, "<=": pc.less_equal, ">": pc.greater, ">=": pc.greater_equal,
}


def compare(ea, eb, op):
    return {"==": ea == eb, "!=": ea != eb, "<": ea < eb, "<=": ea <= eb, ">": ea > eb, ">=": ea >= eb}[op]


@given(batches(), numeric_operands, numeric_operands, st.sampled_from(list(COMPARISONS)))
def test_numeric_comparisons(batch, a, b, op):
    if not (isinstance(a, str) or isinstance(b, str)):
        b = "u8"
    x, y, _ = both(a, b, batch)
    same(evaluate(compare(as_expr(a), as_expr(b), op), batch), COMPARISONS[op](x, y))


@given(
    batches(),
    st.sampled_from(
        [("s", "ls"), ("ls", "s"), ("b", "b2"), ("ts", "ts2"), ("s", "lit:b"), ("lit:a", "ls"), ("b", "lit:True"),
         ("ls", "lit:a long literal of 25 ch")]  # a literal over 16 bytes: the memcmp path of == and !=
    ),
    st.sampled_from(list(COMPARISONS)),
)
def test_string_bool_and_timestamp_comparisons(batch, pair, op):
    def operand(name):
        if not name.startswith("lit:"):
            return col(name), batch.column(name)
        value = True if name == "lit:True" else name[4:]
        return lit(value), pa.array([value] * batch.num_rows)

    (ea, x), (eb, y) = operand(pair[0]), operand(pair[1])
    same(evaluate(compare(ea, eb, op), batch), COMPARISONS[op](x, y))


@given(st.lists(st.none() | st.text(alphabet="ab", max_size=18), max_size=40), st.text(alphabet="ab", max_size=18),
       st.integers(0, 40), st.sampled_from([pa.string(), pa.large_string()]))
def test_string_equals_a_literal_of_any_length(values, literal, pick, type_):
    # Every path of == / != against one string: under 4 bytes, 4 to 16 (two overlapping word
    # loads), over 16 (memcmp); the literal is often one of the column's values.
    present = [v for v in values if v is not None]
    if present and pick < 30:
        literal = present[pick % len(present)]
    # Strings of the literal's length that differ from it in one byte: first, middle or last.
    flip = {"a": "b", "b": "a"}
    values = values + [literal[:i] + flip[literal[i]] + literal[i + 1:] for i in {0, len(literal) // 2, len(literal) - 1}
                       if literal] + [literal]
    batch = pa.record_batch({"s": pa.array(values, type_)})
    same(evaluate(col("s") == literal, batch), pc.equal(batch.column("s"), literal))
    same(evaluate(col("s") != literal, batch), pc.not_equal(batch.column("s"), literal))
    same(evaluate(lit(literal) != col("s"), batch), pc.not_equal(batch.column("s"), literal))


@given(batches(), st.integers(-5, 5), st.sampled_from(list(COMPARISONS)))
def test_timestamps_compare_with_integers_in_their_unit(batch, value, op):
    raw = batch.column("ts").cast(pa.int64())
    same(evaluate(compare(col("ts"), lit(value), op), batch), COMPARISONS[op](raw, value))
    same(evaluate(compare(lit(value), col("ts"), op), batch), COMPARISONS[op](pa.scalar(value), raw))


@given(batches(), st.integers(-1000, 1000))
def test_timestamp_arithmetic(batch, shift):
    ts, ts2 = batch.column("ts"), batch.column("ts2")
    diff = evaluate(col("ts") - col("ts2"), batch)
    same(diff, pc.subtract(ts.cast(pa.int64()), ts2.cast(pa.int64())))
    moved = evaluate(col("ts") + shift, batch)
    same(moved, pc.add(ts.cast(pa.int64()), shift).cast(pa.timestamp("ms")))
    same(evaluate(shift + col("ts2"), batch), pc.add(ts2.cast(pa.int64()), shift).cast(pa.timestamp("ms")))


bool_operands = st.sampled_from(["b", "b2", True, False, None])


@given(batches(), bool_operands, bool_operands)
def test_kleene_logic_matches_pyarrow(batch, a, b):
    def operand(v):
        if isinstance(v, str):
            return col(v), batch.column(v)
        return lit(v), pa.array([v] * batch.num_rows, pa.bool_())

    (ea, x), (eb, y) = operand(a), operand(b)
    same(evaluate(ea & eb, batch), pc.and_kleene(x, y))
    same(evaluate(ea | eb, batch), pc.or_kleene(x, y))
    same(evaluate(~ea, batch), pc.invert(x))


@given(batches(), st.sampled_from(["i32", "i64", "u8", "f64", "b", "s", "ls", "ts"]))
def test_is_null_and_is_not_null(batch, name):
    same(evaluate(col(name).is_null(), batch), pc.is_null(batch.column(name)))
    same(evaluate(col(name).is_not_null(), batch), pc.is_valid(batch.column(name)))


@given(
    batches(),
    st.sampled_from(["i32", "i64", "u8", "b"]),
    st.sampled_from(
        [pa.int8(), pa.int16(), pa.int32(), pa.int64(), pa.uint8(), pa.uint16(), pa.uint32(), pa.uint64()]
        + [pa.float32(), pa.float64(), pa.bool_()]
    ),
)
def test_casts_between_numbers_and_bools(batch, name, to):
    same(evaluate(col(name).cast(to), batch), batch.column(name).cast(to, safe=False))


@given(batches(), st.sampled_from([pa.int8(), pa.int32(), pa.int64(), pa.uint8(), pa.uint64()]))
def test_float_to_integer_casts_truncate_or_fail(batch, to):
    f = batch.column("f64")
    info = np.iinfo(to.to_pandas_dtype())
    values = [v for v in f.to_pylist() if v is not None]
    if all(math.isfinite(v) and info.min <= math.trunc(v) <= info.max for v in values):
        expected = pa.array([None if v is None else math.trunc(v) for v in f.to_pylist()], to)
        same(evaluate(col("f64").cast(to), batch), expected)
    else:
        with pytest.raises(po.InvalidInputError, match=rf"cannot cast .* to {to} in col\(\"f64\"\)\.cast\(\"{to}\"\)"):
            evaluate(col("f64").cast(to), batch)


@given(batches(), st.sampled_from(["i32", "i64", "u8", "b"]))
def test_casts_to_and_from_strings(batch, name):
    as_text = evaluate(col(name).cast("string"), batch)
    same(as_text, batch.column(name).cast(pa.string()))
    if name != "b":  # the engine does not parse bools
        same(evaluate(col(name).cast("large_string").cast(batch.column(name).type), batch), batch.column(name))
    same(evaluate(col("s").cast(pa.large_string()), batch), batch.column("s").cast(pa.large_string()))


def test_casts_of_temporal_values():
    batch = pa.record_batch({"t": pa.array([1500, -1500, None], pa.timestamp("ms")), "d": pa.array([1, None, 3], pa.date32())})
    assert evaluate(col("t").cast("int64"), batch).to_pylist() == [1500, -1500, None]
    assert evaluate(col("t").cast("timestamp[s]"), batch).equals(batch.column("t").cast(pa.timestamp("s"), safe=False))
    assert evaluate(col("t").cast(pa.timestamp("us", "UTC")), batch).equals(batch.column("t").cast(pa.timestamp("us", "UTC")))
    assert evaluate(col("d").cast("int32"), batch).to_pylist() == [1, None, 3]
    assert evaluate(lit(5).cast("date32"), batch).type == pa.date32()


@given(batches(), st.text(alphabet="abc", max_size=2), st.sampled_from(["s", "ls"]))
def test_contains_and_starts_with(batch, pattern, name):
    same(evaluate(col(name).str.contains(pattern), batch), pc.match_substring(batch.column(name), pattern))
    same(evaluate(col(name).str.starts_with(pattern), batch), pc.starts_with(batch.column(name), pattern))


# Predicates for filter(): an expression and its pyarrow.compute reference.
leaf_predicates = st.one_of(
    st.tuples(st.sampled_from(NUMERIC), st.sampled_from(list(COMPARISONS)), st.integers(-3, 3)).map(
        lambda t: (
            compare(col(t[0]), lit(t[2]), t[1]),
            lambda b, t=t: COMPARISONS[t[1]](*both(t[0], t[2], b)[:2]),
        )
    ),
    st.sampled_from(["b", "b2"]).map(lambda name: (col(name), lambda b, name=name: b.column(name))),
    st.sampled_from(["a", "ab", ""]).map(
        lambda p: (col("s").str.contains(p), lambda b, p=p: pc.match_substring(b.column("s"), p))
    ),
    st.sampled_from(["i32", "f64", "s"]).map(lambda n: (col(n).is_null(), lambda b, n=n: pc.is_null(b.column(n)))),
)


def combine(children):
    return st.one_of(
        st.tuples(children, children).map(lambda p: (p[0][0] & p[1][0], lambda b, p=p: pc.and_kleene(p[0][1](b), p[1][1](b)))),
        st.tuples(children, children).map(lambda p: (p[0][0] | p[1][0], lambda b, p=p: pc.or_kleene(p[0][1](b), p[1][1](b)))),
        children.map(lambda c: (~c[0], lambda b, c=c: pc.invert(c[1](b)))),
    )


predicates = st.recursive(leaf_predicates, combine, max_leaves=6)


@given(batches(), predicates)
def test_filter_matches_pyarrow(batch, predicate):
    expr, reference = predicate
    got = _engine.filter(expr._to_ir(), batch)
    expected = batch.filter(reference(batch), null_selection_behavior="drop")
    assert got.schema == batch.schema
    for name in batch.schema.names:
        same(got.column(name), expected.column(name))


def test_filter_of_one_run_is_a_zero_copy_slice(no_leaked_exports):
    batch = pa.record_batch({"t": pa.array(range(100), pa.int64()), "s": [str(i) for i in range(100)]})
    got = _engine.filter(((col("t") >= 10) & (col("t") < 60))._to_ir(), batch)
    assert got.column("t").to_pylist() == list(range(10, 60))
    assert got.column("t").buffers()[1].address == batch.column("t").buffers()[1].address
    several = _engine.filter((col("t") % 2 == 0)._to_ir(), batch)
    assert several.column("s").to_pylist() == [str(i) for i in range(0, 100, 2)]
    assert _engine.filter(lit(None, "bool")._to_ir(), batch).num_rows == 0


def test_column_reference_is_zero_copy(no_leaked_exports):
    batch = pa.record_batch({"a": pa.array([1, None, 3], pa.int32())}).slice(1)
    got = evaluate(col("a"), batch)
    assert got.buffers()[1].address == batch.column("a").buffers()[1].address
    assert got.to_pylist() == [None, 3]


def test_nulls_in_literals():
    batch = pa.record_batch({"a": pa.array([1, None], pa.int32()), "b": [True, None]})
    assert evaluate(col("a") + lit(None), batch).equals(pa.array([None, None], pa.int32()))
    assert evaluate(col("b") | lit(None), batch).to_pylist() == [True, None]
    assert evaluate(col("b") & lit(None), batch).to_pylist() == [None, None]
    assert evaluate(lit(None, "string").is_null(), batch).to_pylist() == [True, True]
    assert evaluate(lit("x"), batch).to_pylist() == ["x", "x"]
    assert evaluate(lit(2**63), batch).type == pa.uint64()
    assert evaluate(lit(7, "int8"), batch).equals(pa.array([7, 7], pa.int8()))


# ---- errors


def test_unknown_column_names_it_and_the_available_ones():
    batch = pa.record_batch({"a": [1], "b": [2.0]})
    with pytest.raises(po.InvalidInputError) as info:
        evaluate(col("a") + col("nope"), batch)
    assert str(info.value) == "unknown column 'nope' in col(\"nope\"); available columns: a, b"
    assert isinstance(info.value, ValueError)


def test_type_mismatch_names_the_expression_and_both_types():
    batch = pa.record_batch(
        {"a": [1], "s": ["x"], "t": pa.array([1], pa.timestamp("s", "UTC")), "u": pa.array([1], pa.timestamp("s"))}
    )
    expr = col("a") + col("s")
    with pytest.raises(po.UnsupportedTypeError) as info:
        evaluate(expr, batch)
    assert str(info.value) == f"cannot apply + to int64 and string in {expr!r}"
    assert isinstance(info.value, TypeError)
    with pytest.raises(po.UnsupportedTypeError, match=r"cannot apply < to timestamp\[s, tz=UTC\] and timestamp\[s\]"):
        evaluate(col("t") < col("u"), batch)
    with pytest.raises(po.UnsupportedTypeError, match=r"cannot cast string to date32\[day\] in col\(\"s\"\)\.cast"):
        evaluate(col("s").cast("date32"), batch)
    with pytest.raises(po.UnsupportedTypeError, match=r"str\.contains needs a string, got int64"):
        evaluate(col("a").str.contains("x"), batch)
    bool_needed = r"filter needs a bool predicate; \(col\(\"a\"\) \* lit\(2\)\) has type int64"
    with pytest.raises(po.UnsupportedTypeError, match=bool_needed):
        _engine.filter((col("a") * 2)._to_ir(), batch)
    with pytest.raises(po.UnsupportedTypeError, match=r"unknown type 'decimal128\(5, 2\)'"):
        evaluate(col("a").cast(pa.decimal128(5, 2)), batch)
    with pytest.raises(po.InvalidInputError, match=r'lit\(300, "int8"\): 300 does not fit int8'):
        evaluate(lit(300, "int8"), batch)
    with pytest.raises(po.InvalidInputError, match=r"out of the int64 and uint64 range"):
        evaluate(lit(2**64), batch)


def test_expressions_have_no_truth_value():
    message = r"an expression has no truth value: combine conditions with & \| ~"
    with pytest.raises(TypeError, match=message):
        if col("a") > 1:
            pass
    with pytest.raises(TypeError, match=message):
        (col("a") > 1) and (col("b") < 2)  # noqa: B015
    with pytest.raises(TypeError, match=message):
        not col("a")  # noqa: B015
    with pytest.raises(TypeError, match=message):
        1 < col("a") < 3  # noqa: B015 (a chained comparison is an `and`)


def test_bad_arguments_fail_in_python():
    with pytest.raises(TypeError, match="a literal must be None, bool, int, float or str, not list"):
        col("a") + [1]
    with pytest.raises(TypeError, match="a column name must be a str"):
        col(1)
    with pytest.raises(TypeError, match="str.contains takes a str"):
        col("s").str.contains(1)
    with pytest.raises(TypeError, match="a type must be a pyarrow DataType or its name"):
        col("a").cast(int)


# ---- rendering

names = st.text(alphabet=st.characters(codec="utf-8"), max_size=5)
literals = st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1) | st.floats() | names
exprs = st.recursive(
    names.map(col) | literals.map(lit) | st.integers(-5, 5).map(lambda v: lit(v, "int32")),
    lambda e: st.one_of(
        st.tuples(e, e, st.sampled_from(["+", "-", "*", "/", "//", "%", "==", "!=", "<", "<=", ">", ">=", "&", "|"])).map(
            lambda t: {
                "+": t[0] + t[1], "-": t[0] - t[1], "*": t[0] * t[1], "/": t[0] / t[1], "//": t[0] // t[1],
                "%": t[0] % t[1], "&": t[0] & t[1], "|": t[0] | t[1], **{op: compare(t[0], t[1], op) for op in COMPARISONS},
            }[t[2]]
        ),
        e.map(lambda x: -x),
        e.map(lambda x: ~x),
        e.map(lambda x: x.is_null()),
        e.map(lambda x: x.is_not_null()),
        st.tuples(e, st.sampled_from(["int8", "float64", "timestamp[ms, tz=UTC]", pa.large_string()])).map(
            lambda t: t[0].cast(t[1])
        ),
        st.tuples(e, names).map(lambda t: t[0].str.contains(t[1])),
        st.tuples(e, names).map(lambda t: t[0].str.starts_with(t[1])),
    ),
    max_leaves=6,
)


@given(exprs)
def test_repr_matches_the_engines_rendering(expr):
    assert repr(expr) == _engine.render(expr._to_ir())


def test_repr_examples():
    assert repr(col("a") + 1) == '(col("a") + lit(1))'
    assert repr(~(col("x") == "y\n")) == '(~(col("x") == lit("y\\n")))'
    assert repr(col("f").cast(pa.float32()) > 1e16) == '(col("f").cast("float") > lit(1e+16))'
    assert repr(lit(None, pa.timestamp("ms", "UTC"))) == 'lit(None, "timestamp[ms, tz=UTC]")'
    assert po.Expr is type(col("a"))
