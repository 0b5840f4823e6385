"""merge(): the merged order, and clear errors for bad input with nothing emitted past them."""

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pyarrow_ops as po
from reference import reference_merge


def ts(values, unit="ms", tz="UTC"):
    return pa.array(values, pa.int64()).cast(pa.timestamp(unit, tz=tz))


@given(
    st.lists(st.lists(st.integers(-3, 3), max_size=30).map(sorted), min_size=1, max_size=8),
    st.integers(1, 40),
)
def test_ties_go_by_input_then_position(times, batch_size):
    tables = [
        pa.table(
            {
                "t": pa.array(t, pa.int64()),
                "input": pa.array([i] * len(t), pa.int64()),
                "pos": pa.array(range(len(t)), pa.int64()),
            }
        )
        for i, t in enumerate(times)
    ]
    got = po.merge(tables, time="t", batch_size=batch_size).to_arrow()
    keys = list(zip(*(got.column(c).to_pylist() for c in ["t", "input", "pos"])))
    assert keys == sorted(keys)
    assert got.equals(reference_merge(tables, "t"))


@given(st.integers(1, 6), st.integers(1, 300), st.integers(0, 2**31))
def test_result_does_not_depend_on_batch_size(k, batch_size, seed):
    rng = np.random.default_rng(seed)
    tables = [
        pa.table({"t": np.sort(rng.integers(0, 50, n)), "v": rng.random(n)}) for n in rng.integers(0, 200, k)
    ]
    base = po.merge(tables, time="t", batch_size=65536).to_arrow()
    assert po.merge(tables, time="t", batch_size=batch_size).to_arrow().equals(base)


@settings(max_examples=15, deadline=None)
@given(st.integers(2, 6), st.sampled_from([2, 3, 4]), st.integers(0, 2**31))
def test_threads_give_the_same_rows(k, threads, seed):
    """Inputs large enough that each region of ready rows is cut into parts (of about 8,192 rows)
    merged side by side, in batches of several sizes: the rows equal one thread's, and the plain
    reference's (a stable sort of the concatenation)."""
    rng = np.random.default_rng(seed)
    tables = []
    for i, n in enumerate(rng.integers(0, 40_000, k)):
        tables.append(pa.table({"t": np.sort(rng.integers(0, 5_000, n)), "input": np.full(n, i),
                                "pos": np.arange(n), "s": rng.choice(["a", "bb", None], n)}))
    batches = [rng.integers(1, 30_000) for _ in range(k)]
    inputs = [t.to_batches(max_chunksize=int(b)) or t for t, b in zip(tables, batches)]
    one = po.merge(tables, time="t", threads=1).to_arrow()
    assert one.equals(reference_merge(tables, "t"))
    got = po.merge([pa.Table.from_batches(b, t.schema) if isinstance(b, list) else b
                    for b, t in zip(inputs, tables)], time="t", threads=threads).to_arrow()
    assert got.equals(one)


def test_time_zone_and_unit_are_kept():
    a = pa.table({"time": ts([1, 5], "ns", "America/New_York")})
    b = pa.table({"time": ts([3], "ns", "America/New_York")})
    got = po.merge([a, b], time="time").to_arrow()
    assert got.schema.field("time").type == pa.timestamp("ns", tz="America/New_York")
    assert got.column("time").cast(pa.int64()).to_pylist() == [1, 3, 5]


@pytest.mark.parametrize("type_", [pa.int32(), pa.int64(), pa.date32(), pa.timestamp("s")])
def test_time_column_types(type_):
    def column(values):
        raw = pa.array(values, pa.int32() if type_.bit_width == 32 else pa.int64())
        return raw.cast(type_)

    got = po.merge([pa.table({"d": column([1, 4])}), pa.table({"d": column([2, 3])})], time="d").to_arrow()
    assert got.column("d").type == type_
    assert got.column("d").cast(pa.int64() if type_.bit_width == 64 else pa.int32()).to_pylist() == [1, 2, 3, 4]


def test_empty_inputs():
    empty = pa.table({"t": pa.array([], pa.int64()), "v": pa.array([], pa.string())})
    full = pa.table({"t": [1, 2], "v": ["a", "b"]})
    assert po.merge([empty, full, empty], time="t").to_arrow().equals(full)
    got = po.merge([empty], time="t").to_arrow()
    assert got.num_rows == 0 and got.schema == empty.schema


def test_unsorted_input_names_input_row_and_values():
    good = pa.table({"t": ts([0, 1, 2])})
    bad = pa.Table.from_batches(
        [pa.record_batch({"t": ts([1000, 2000])}), pa.record_batch({"t": ts([3000, 1500])})]
    )
    with pytest.raises(po.UnsortedInputError) as info:
        po.merge([good, bad], time="t").to_arrow()
    assert str(info.value) == (
        "input 1 is not sorted by 't': row 3 has 1970-01-01T00:00:01.500Z (1500), "
        "earlier than 1970-01-01T00:00:03.000Z (3000) at row 2"
    )
    assert isinstance(info.value, ValueError)


def test_nothing_is_emitted_past_a_bad_row():
    # One input, batches of 2 rows; the bad row is in the third batch.
    bad = pa.Table.from_batches(
        [pa.record_batch({"t": [1, 2]}), pa.record_batch({"t": [3, 4]}), pa.record_batch({"t": [5, 0]})]
    )
    seen = []
    with pytest.raises(po.UnsortedInputError, match="row 5 has 0, earlier than 5 at row 4"):
        for batch in po.merge(bad, time="t"):
            seen.extend(batch.column("t").to_pylist())
    assert seen == [1, 2, 3, 4]


def test_null_time_is_named():
    bad = pa.table({"t": pa.array([1, None, 3], pa.int64())})
    with pytest.raises(po.NullTimeError, match="input 0 has a null time in column 't' at row 1"):
        po.merge(bad, time="t").to_arrow()


def test_missing_and_non_temporal_time_columns():
    table = pa.table({"when": [1], "name": ["x"], "f": [1.5]})
    with pytest.raises(po.InvalidInputError, match=r"time column 't' not found in input 0; its columns are: when: int64, name: string, f: double"):
        po.merge(table, time="t")
    with pytest.raises(po.InvalidInputError, match="time column 'name' of input 0 has type string; expected a timestamp"):
        po.merge(table, time="name")
    with pytest.raises(po.InvalidInputError, match="has type double"):
        po.merge(table, time="f")


def test_schema_mismatch_names_input_and_column():
    a = pa.table({"t": [1], "v": [1.0]})
    with pytest.raises(po.SchemaMismatchError, match="input 2 does not match input 0: column 'v' has type int64; expected double"):
        po.merge([a, a, pa.table({"t": [1], "v": [1]})], time="t")
    with pytest.raises(po.SchemaMismatchError, match="column 1 is 'w'; expected 'v'"):
        po.merge([a, pa.table({"t": [1], "w": [1.0]})], time="t")
    with pytest.raises(po.SchemaMismatchError, match=r"it has 1 columns \(t\); expected 2 \(t, v\)"):
        po.merge([a, pa.table({"t": [1]})], time="t")
    tz = pa.table({"t": ts([1], "ms", "UTC")})
    with pytest.raises(po.SchemaMismatchError, match=r"timestamp\[ms\]; expected timestamp\[ms, tz=UTC\]"):
        po.merge([tz, pa.table({"t": ts([1], "ms", None)})], time="t")


def test_schema_drift_inside_an_input_names_the_batch():
    batches = [pa.record_batch({"t": [1], "v": [1]}), pa.record_batch({"t": [2], "v": [1.5]})]
    with pytest.raises(po.SchemaMismatchError, match="input 0, batch 1 does not match the input's first batch: column 'v' has type double; expected int64"):
        po.merge([iter(batches)], time="t").to_arrow()


def test_python_errors_in_inputs_propagate_unchanged():
    def broken():
        yield pa.record_batch({"t": [1]})
        raise KeyError("sensor feed lost")

    with pytest.raises(KeyError, match="sensor feed lost"):
        po.merge([broken(), pa.table({"t": [0, 5]})], time="t").to_arrow()


def test_bad_arguments():
    t = pa.table({"t": [1]})
    with pytest.raises(TypeError, match="time must be a column name"):
        po.merge(t, time=0)
    with pytest.raises(po.InvalidInputError, match="batch_size must be at least 1, got 0"):
        po.merge(t, time="t", batch_size=0)
    with pytest.raises(po.InvalidInputError, match="at least one input"):
        po.merge([], time="t")
    with pytest.raises(ValueError, match="threads must be at least 1, got 0"):
        po.merge(t, time="t", threads=0)
    with pytest.raises(TypeError, match="threads must be an int or None"):
        po.merge(t, time="t", threads=1.5)
    with pytest.raises(TypeError, match="input 1: cannot read a int"):
        po.merge([t, 5], time="t")
    with pytest.raises(TypeError, match="inputs must be a list"):
        po.merge({"t": [1]}, time="t")
    with pytest.raises(po.InvalidInputError, match="input 0 is an empty iterable"):
        po.merge([[]], time="t")


def test_a_result_is_read_once():
    result = po.merge(pa.table({"t": [1]}), time="t")
    assert result.to_arrow().num_rows == 1
    assert result.closed
    with pytest.raises(po.UsageError):
        result.to_arrow()
    with pytest.raises(po.UsageError):
        pa.table(result)


def test_everything_from_one_package_namespace():
    assert issubclass(po.UnsortedInputError, po.InvalidInputError)
    assert issubclass(po.InvalidInputError, po.PyArrowOpsError)
    assert issubclass(po.SchemaMismatchError, TypeError)
    assert po.UnsortedInputError.__module__ == "pyarrow_ops.errors"


def test_string_flavours_of_one_column_merge(tmp_path):
    # A Polars frame (string_view, read as string) and the Parquet file Polars wrote of it
    # (large_string), plus a pyarrow table (string): read as large_string, rows as one input's.
    import polars as pl
    import pyarrow.parquet as pq

    frame = pl.DataFrame({"t": [1, 4, 6], "name": ["a", None, "c"]})
    path = tmp_path / "b.parquet"
    pl.DataFrame({"t": [2, 5], "name": ["bb", "ee"]}).write_parquet(path)
    assert pq.read_schema(path).field("name").type == pa.large_string()
    table = pa.table({"t": [3], "name": pa.array(["ddd"], pa.string())})
    for inputs, flavour in (([frame, str(path)], pa.large_string()), ([frame, str(path), table], pa.large_string()),
                            ([table, frame], pa.string())):  # string_view is read as string: these agree
        out = po.merge(inputs, time="t").to_arrow()
        assert out.schema.field("name").type == flavour
        expected = sorted((r for i in inputs for r in pa.table(pq.read_table(i) if isinstance(i, str) else i).to_pylist()),
                          key=lambda r: r["t"])
        assert out.to_pylist() == expected
    agg = po.aggregate([frame, str(path)], time="t", key="name", window=po.tumbling(10), aggs={"n": po.count()})
    assert agg.to_arrow().column("name").to_pylist() == ["a", "bb", "c", "ee", None]
    # Inputs that agree keep their type, uncast.
    assert po.merge([table, table], time="t").to_arrow().schema.field("name").type == pa.string()
    # Other differences still name the input and the column.
    with pytest.raises(po.SchemaMismatchError, match="input 1"):
        po.merge([table, pa.table({"t": [1], "name": [1]})], time="t").to_arrow()


def test_a_pushed_batch_of_another_string_flavour_is_cast():
    schema = pa.schema([("t", pa.int64()), ("s", pa.string())])
    live = po.live_aggregate(schema, inputs=1, time="t", key="s", window=po.tumbling(10), aggs={"n": po.count()})
    live.push(0, pa.record_batch({"t": [1, 2], "s": pa.array(["x", "y"], pa.large_string())}))
    live.close(0)
    assert [r["s"] for b in live for r in b.to_pylist()] == ["x", "y"]
