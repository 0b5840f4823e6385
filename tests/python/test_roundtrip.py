"""Arrow in and out: every supported type, with nulls, any batch sizes, through the engine."""

import numpy as np
import polars as pl
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

import pyarrow_ops as po
from reference import SUPPORTED_TYPES, TIME_TYPES, random_column, reference_merge, sorted_times, split


@st.composite
def random_inputs(draw):
    """1-5 time-sorted inputs of one random schema, split into random batches."""
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    types = draw(st.lists(st.sampled_from(SUPPORTED_TYPES), min_size=0, max_size=6))
    time_type = draw(st.sampled_from(TIME_TYPES))
    time_index = draw(st.integers(0, len(types)))
    null_rate = draw(st.sampled_from([0.0, 0.0, 0.2, 0.9]))
    k = draw(st.integers(1, 5))
    max_batch = draw(st.sampled_from([1, 3, 17, 200]))
    spread = draw(st.sampled_from([0, 1, 5, 1000]))
    inputs = []
    for _ in range(k):
        n = int(rng.integers(0, 120))
        columns = {f"c{j}": random_column(t, n, rng, null_rate) for j, t in enumerate(types)}
        items = list(columns.items())
        items.insert(time_index, ("time", sorted_times(time_type, n, rng, spread)))
        table = pa.table(dict(items))
        inputs.append((table, split(table, rng, max_batch)))
    batch_size = draw(st.sampled_from([1, 2, 7, 64, 65536]))
    return inputs, batch_size


def as_reader(table, batches):
    return pa.RecordBatchReader.from_batches(table.schema, batches)


@given(random_inputs(), st.sampled_from(["table", "reader", "batches", "generator"]))
def test_merge_equals_reference_for_every_type(case, form):
    inputs, batch_size = case
    makers = {
        "table": lambda t, b: pa.Table.from_batches(b, t.schema),
        "reader": as_reader,
        "batches": lambda t, b: b if b else as_reader(t, b),
        "generator": lambda t, b: (x for x in b) if b else as_reader(t, b),
    }
    args = [makers[form](t, b) for t, b in inputs]
    got = po.merge(args, time="time", batch_size=batch_size).to_arrow()
    expected = reference_merge([t for t, _ in inputs], "time")
    assert got.schema == expected.schema  # types, time zones and names kept
    assert got.equals(expected)


@given(random_inputs())
def test_single_input_round_trips_unchanged(case):
    inputs, batch_size = case
    table, batches = inputs[0]
    got = po.merge(as_reader(table, batches), time="time", batch_size=batch_size).to_arrow()
    assert got.equals(table)
    assert [b.num_rows for b in got.to_batches()] == [b.num_rows for b in batches if b.num_rows]


@pytest.mark.parametrize("out", ["to_arrow", "pa.table", "reader", "pl.DataFrame", "pl.from_arrow", "iter"])
def test_every_output_route(out):
    a = pa.table({"t": pa.array([1, 3], pa.timestamp("us", tz="Europe/Paris")), "v": ["a", None]})
    b = pa.table({"t": pa.array([2, 3], pa.timestamp("us", tz="Europe/Paris")), "v": ["b", "c"]})
    result = po.merge([a, b], time="t", batch_size=3)
    routes = {
        "to_arrow": lambda r: r.to_arrow(),
        "pa.table": pa.table,
        "reader": lambda r: pa.RecordBatchReader.from_stream(r).read_all(),
        "pl.DataFrame": lambda r: pl.DataFrame(r).to_arrow(),
        # Polars reads any bare stream object as a struct Series; unnest gives the frame.
        "pl.from_arrow": lambda r: pl.from_arrow(r).struct.unnest().to_arrow(),
        "iter": lambda r: pa.Table.from_batches(list(r)),
    }
    table = routes[out](result)
    # The tie at t=3 goes to input 0 first.
    assert table.column("v").to_pylist() == ["a", "b", None, "c"]
    assert table.schema.field("t").type.tz == "Europe/Paris"


def test_polars_inputs_with_string_views():
    a = pl.DataFrame({"t": [1, 4], "s": ["x", None], "n": [1.5, 2.5]})
    b = pl.DataFrame({"t": [2, 3], "s": ["y", "z"], "n": [3.5, None]})
    got = po.merge([a, b], time="t").to_polars()
    expected = pl.concat([a, b]).sort("t", maintain_order=True)
    assert got.equals(expected)


def test_parquet_paths_are_read_lazily(tmp_path):
    import pyarrow.parquet as pq

    rng = np.random.default_rng(3)
    tables = []
    for i in range(3):
        t = pa.table({"time": sorted_times(pa.int64(), 500, rng, 3), "v": random_column(pa.string(), 500, rng, 0.1)})
        pq.write_table(t, tmp_path / f"part{i}.parquet", row_group_size=64)
        tables.append(t)
    paths = [tmp_path / f"part{i}.parquet" for i in range(3)]
    got = po.merge([str(paths[0]), paths[1], paths[2]], time="time").to_arrow()
    assert got.equals(reference_merge(tables, "time"))


def test_missing_parquet_file_names_the_input(tmp_path):
    with pytest.raises(FileNotFoundError, match="input 1: no such Parquet file"):
        po.merge([pa.table({"t": [1]}), str(tmp_path / "nope.parquet")], time="t")


@pytest.mark.parametrize(
    "column, words",
    [
        (pa.array([[1], [2]]), "column 'x' has type list"),
        (pa.array([b"a", b"b"]), "column 'x' has type binary"),
        (pa.array([1, 2], pa.decimal128(5, 2)), "column 'x' has type decimal"),
        (pa.array(["a", "b"]).dictionary_encode(), "column 'x' is dictionary-encoded"),
        (pa.array([1, 2], pa.time32("s")), "column 'x' has type time32[s]"),
    ],
)
def test_unsupported_types_name_column_and_type(column, words):
    table = pa.table({"t": [1, 2], "x": column})
    with pytest.raises(po.UnsupportedTypeError, match=r"input 0: " + words.replace("[", r"\[").replace("]", r"\]")):
        po.merge(table, time="t")
