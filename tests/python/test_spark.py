"""pyarrow_ops.spark on real PySpark (local[2]): the same query gives the identical table on Spark as
in-process, for inputs given as separate DataFrames or as one with an input-index column, with empty
partitions and partitions holding one key; engine errors raised in the Python worker reach the driver."""

from __future__ import annotations

import random

import hypothesis.strategies as st
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, example, given, settings

import pyarrow_ops as po

pyspark = pytest.importorskip("pyspark")
ps = pytest.importorskip("pyarrow_ops.spark")

RUNS = {"equal": 0}


@pytest.fixture(scope="module")
def spark():
    return ps.session()  # one local[2] session for the module: starting the JVM is the slow part


def _inputs(rng: random.Random, n_inputs: int, rows: int, keys: int, string_keys: bool) -> list[pa.Table]:
    out = []
    for _ in range(n_inputs):
        n = rng.randrange(0, rows + 1)
        t = sorted(rng.randrange(0, 60) for _ in range(n))
        k = [None if rng.random() < 0.05 else rng.randrange(keys) for _ in range(n)]
        out.append(pa.table({
            "t": pa.array(t, pa.int64()),
            "k": pa.array([None if x is None else f"k{x}" for x in k] if string_keys else k,
                          pa.string() if string_keys else pa.int64()),
            "v": pa.array([None if rng.random() < 0.1 else float(rng.randrange(-9, 9)) for _ in range(n)],
                          pa.float64()),
        }))
    return out


AGGS = {"n": po.count(), "total": po.sum("v"), "avg": po.mean("v"), "lo": po.min("v"), "first": po.first("v"),
        "last": po.last("v")}


def _same(got: pa.Table, expected: pa.Table) -> None:
    assert got.column_names == expected.column_names
    assert got.to_pylist() == expected.to_pylist()


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1), n_inputs=st.integers(1, 3), keys=st.integers(1, 6),
       string_keys=st.booleans(), size=st.integers(1, 8), advance=st.integers(1, 8), as_one=st.booleans())
@example(seed=139, n_inputs=1, keys=1, string_keys=False, size=1, advance=1, as_one=True)  # empty input
def test_spark_equals_in_process(spark, seed, n_inputs, keys, string_keys, size, advance, as_one):
    rng = random.Random(seed)
    tables = _inputs(rng, n_inputs, 80, keys, string_keys)
    window = po.sliding(size=size, advance=advance)
    expected = po.aggregate(tables, time="t", key="k", window=window, aggs=AGGS).to_arrow()
    if as_one:  # one DataFrame with an input-index column and a position column
        combined = pa.concat_tables([
            t.append_column("src", pa.array([i] * t.num_rows, pa.int32()))
             .append_column("seq", pa.array(range(t.num_rows), pa.int64())) for i, t in enumerate(tables)])
        df = spark.createDataFrame(combined)
        out = ps.aggregate(df, time="t", key="k", window=window, aggs=AGGS, input_column="src", order_by="seq")
    else:
        out = ps.aggregate([spark.createDataFrame(t) for t in tables], time="t", key="k", window=window,
                           aggs=AGGS, partitions=3)
    _same(out.toArrow(), expected)
    RUNS["equal"] += 1


def test_empty_partitions_and_a_partition_with_one_key(spark):
    t = pa.table({"t": [1, 2, 3, 8], "k": [5, 5, 5, 5], "v": [1.0, 2.0, 3.0, 4.0]})
    expected = po.aggregate(t, time="t", key="k", window=po.tumbling(4), aggs=AGGS).to_arrow()
    out = ps.aggregate([spark.createDataFrame(t)], time="t", key="k", window=po.tumbling(4), aggs=AGGS, partitions=8)
    _same(out.toArrow(), expected)


def test_result_goes_to_polars_through_arrow(spark):
    import polars as pl

    t = pa.table({"t": [1, 2, 3], "k": [1, 2, 1], "v": [1.0, 2.0, 3.0]})
    out = ps.aggregate([spark.createDataFrame(t)], time="t", key="k", window=po.tumbling(2),
                       aggs={"n": po.count()})
    df = pl.from_arrow(out.toArrow())
    assert df["n"].to_list() == [1, 1, 1]


def test_no_key_runs_in_one_partition_with_a_warning(spark):
    t = pa.table({"t": [1, 2, 3, 9], "v": [1.0, 2.0, 3.0, 4.0]})
    expected = po.aggregate(t, time="t", window=po.tumbling(5), aggs={"n": po.count()}).to_arrow()
    with pytest.warns(UserWarning, match="no key"):
        out = ps.aggregate([spark.createDataFrame(t)], time="t", window=po.tumbling(5), aggs={"n": po.count()})
    _same(out.toArrow(), expected)


def test_an_unsorted_input_fails_on_the_driver_with_the_engine_message(spark):
    t = pa.table({"t": [1, 5, 3], "k": [1, 1, 1], "v": [1.0, 2.0, 3.0], "seq": [0, 1, 2]})
    out = ps.aggregate([spark.createDataFrame(t)], time="t", key="k", window=po.tumbling(2),
                       aggs={"n": po.count()}, order_by="seq")
    with pytest.raises(Exception, match=r"input 0 is not sorted by 't'|not sorted"):
        out.toArrow()


def test_udf_factory_for_map_in_arrow(spark):
    from pyspark.sql import functions as F
    from pyspark.sql.pandas.types import from_arrow_schema, to_arrow_schema

    t = pa.table({"t": [1, 2, 6], "k": [1, 1, 2], "v": [1.0, 2.0, 3.0]})
    df = (spark.createDataFrame(t).withColumn(ps.INPUT_COLUMN, F.lit(0).cast("int")).repartition(2, "k")
          .sortWithinPartitions(ps.INPUT_COLUMN, "t"))
    fn, schema = ps.aggregate_udf(to_arrow_schema(df.schema), 1, time="t", key="k", window=po.tumbling(4),
                                  aggs={"n": po.count()})
    got = df.mapInArrow(fn, from_arrow_schema(schema)).orderBy("window_start", "k").toArrow()
    assert got.to_pylist() == [{"window_start": 0, "window_end": 4, "k": 1, "n": 2},
                               {"window_start": 4, "window_end": 8, "k": 2, "n": 1}]
