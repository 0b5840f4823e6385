"""pyarrow_ops.spark on real PySpark (local[2]): the same query gives the identical table on Spark as
in-process, for inputs given as separate DataFrames or as one with an input-index column, with empty
partitions and partitions holding one key; engine errors raised in the Python worker reach the driver."""

from __future__ import annotations

import os
import random
import warnings

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


def _frame(spark, table: pa.Table):
    """The table as a DataFrame. Concatenated inputs can hold empty record batches, after which
    PySpark's createDataFrame(pa.Table) drops every row (peers._to_spark works around it)."""
    from benchmarks.peers import _to_spark

    return _to_spark(spark, table)


def _same(got: pa.Table, expected: pa.Table) -> None:
    assert got.column_names == expected.column_names
    assert got.to_pylist() == expected.to_pylist()


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1), n_inputs=st.integers(1, 3), keys=st.integers(1, 6),
       string_keys=st.booleans(), size=st.integers(1, 8), advance=st.integers(1, 8), as_one=st.booleans(),
       pinned=st.booleans())
@example(seed=139, n_inputs=1, keys=1, string_keys=False, size=1, advance=1, as_one=True, pinned=True)  # empty input
def test_spark_equals_in_process(spark, seed, n_inputs, keys, string_keys, size, advance, as_one, pinned):
    """Separate DataFrames, or one with an input-index column; positions from Spark's row ids (packed
    with the index into one long) or pinned by a column (index and position as two)."""
    rng = random.Random(seed)
    tables = _inputs(rng, n_inputs, 80, keys, string_keys)
    window = po.sliding(size=size, advance=advance)
    expected = po.aggregate(tables, time="t", key="k", window=window, aggs=AGGS).to_arrow()
    if as_one:  # one DataFrame with an input-index column and a position column
        combined = pa.concat_tables([
            t.append_column("src", pa.array([i] * t.num_rows, pa.int32()))
             .append_column("seq", pa.array(range(t.num_rows), pa.int64())) for i, t in enumerate(tables)])
        df = _frame(spark, combined)
        out = ps.aggregate(df, time="t", key="k", window=window, aggs=AGGS, input_column="src",
                           order_by="seq" if pinned else None)
    else:
        frames = [spark.createDataFrame(t.append_column("seq", pa.array(range(t.num_rows), pa.int64())))
                  for t in tables]
        out = ps.aggregate(frames, time="t", key="k", window=window, aggs=AGGS, partitions=3,
                           order_by="seq" if pinned else None)
    _same(out.toArrow(), expected)
    RUNS["equal"] += 1


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1), n_inputs=st.integers(1, 3), keyed=st.booleans(), size=st.integers(1, 8),
       advance=st.integers(1, 8), offset=st.integers(0, 7), partitions=st.integers(1, 4))
def test_split_by_time_equals_in_process(spark, seed, n_inputs, keyed, size, advance, offset, partitions):
    """split="time": each range of window starts in its own partition, tuples of windows across a
    boundary in both; the result needs no sort and is the in-process table, keyed or not."""
    rng = random.Random(seed)
    tables = _inputs(rng, n_inputs, 80, 4, False)
    window = po.sliding(size=size, advance=advance, offset=offset)
    key = "k" if keyed else None
    expected = po.aggregate(tables, time="t", key=key, window=window, aggs=AGGS).to_arrow()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # spans too short to split fall back to one partition, warning
        out = ps.aggregate([spark.createDataFrame(t) for t in tables], time="t", key=key, window=window,
                           aggs=AGGS, split="time", partitions=partitions)
    _same(out.toArrow(), expected)
    RUNS["equal"] += 1


def test_split_by_time_puts_each_range_in_its_own_partition(spark):
    from pyspark.sql import functions as F

    rows = 4000
    t = pa.table({"t": pa.array(range(rows), pa.int64()), "v": pa.array([1.0] * rows)})
    window = po.sliding(size=10, advance=5)
    expected = po.aggregate(t, time="t", window=window, aggs={"n": po.count()}).to_arrow()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a keyless query that can be split must not warn
        out = ps.aggregate([spark.createDataFrame(t)], time="t", window=window, aggs={"n": po.count()},
                           partitions=4)
    _same(out.toArrow(), expected)
    layout = out.groupBy(F.spark_partition_id().alias("p")).agg(F.min("window_start").alias("lo"),
                                                               F.max("window_start").alias("hi"),
                                                               F.count("*").alias("n")).orderBy("p").collect()
    assert [r["p"] for r in layout] == [0, 1, 2, 3]
    assert all(a["hi"] < b["lo"] for a, b in zip(layout, layout[1:]))  # partition order is window order
    assert sum(r["n"] for r in layout) == expected.num_rows
    assert min(r["n"] for r in layout) > expected.num_rows // 8  # spread, not piled into one


def test_split_by_time_falls_back_to_one_partition_with_a_warning(spark):
    t = pa.table({"t": [1, 2, 3, 9], "k": [1, 2, 1, 2], "v": [1.0, 2.0, 3.0, 4.0]})
    expected = po.aggregate(t, time="t", key="k", window=po.tumbling(5), aggs={"n": po.count()}).to_arrow()
    with pytest.warns(UserWarning, match="could not be split by time"):
        out = ps.aggregate([spark.createDataFrame(t)], time="t", key="k", window=po.tumbling(5),
                           aggs={"n": po.count()}, split="time")
    _same(out.toArrow(), expected)
    with pytest.raises(ValueError, match="split must be"):
        ps.aggregate([spark.createDataFrame(t)], time="t", key="k", window=po.tumbling(5),
                     aggs={"n": po.count()}, split="hash")


def test_empty_partitions_and_a_partition_with_one_key(spark):
    t = pa.table({"t": [1, 2, 3, 8], "k": [5, 5, 5, 5], "v": [1.0, 2.0, 3.0, 4.0]})
    expected = po.aggregate(t, time="t", key="k", window=po.tumbling(4), aggs=AGGS).to_arrow()
    out = ps.aggregate([spark.createDataFrame(t)], time="t", key="k", window=po.tumbling(4), aggs=AGGS, partitions=8)
    _same(out.toArrow(), expected)
    unordered = ps.aggregate([spark.createDataFrame(t)], time="t", key="k", window=po.tumbling(4), aggs=AGGS,
                             partitions=8, ordered=False)
    _same(unordered.toArrow().sort_by([("window_start", "ascending"), ("k", "ascending")]), expected)


def test_result_goes_to_polars_through_arrow(spark):
    import polars as pl

    t = pa.table({"t": [1, 2, 3], "k": [1, 2, 1], "v": [1.0, 2.0, 3.0]})
    out = ps.aggregate([spark.createDataFrame(t)], time="t", key="k", window=po.tumbling(2),
                       aggs={"n": po.count()})
    df = pl.from_arrow(out.toArrow())
    assert df["n"].to_list() == [1, 1, 1]


def test_no_key_and_too_short_a_span_runs_in_one_partition_with_a_warning(spark):
    t = pa.table({"t": [1, 2, 3, 9], "v": [1.0, 2.0, 3.0, 4.0]})
    expected = po.aggregate(t, time="t", window=po.tumbling(5), aggs={"n": po.count()}).to_arrow()
    with pytest.warns(UserWarning, match="no key"):
        out = ps.aggregate([spark.createDataFrame(t)], time="t", window=po.tumbling(5), aggs={"n": po.count()})
    _same(out.toArrow(), expected)


def test_an_unsorted_input_fails_on_the_driver_with_the_engine_message(spark):
    t = pa.table({"t": [1, 5, 3], "k": [1, 1, 1], "v": [1.0, 2.0, 3.0], "seq": [0, 1, 2]})
    with pytest.raises(Exception, match=r"input 0 is not sorted by 't'|not sorted"):
        # Sorted (the default with a key), the engine runs in the call itself; unsorted, at the action.
        ps.aggregate([spark.createDataFrame(t)], time="t", key="k", window=po.tumbling(2),
                     aggs={"n": po.count()}, order_by="seq")
    loose = ps.aggregate([spark.createDataFrame(t)], time="t", key="k", window=po.tumbling(2),
                         aggs={"n": po.count()}, order_by="seq", ordered=False)
    with pytest.raises(Exception, match=r"input 0 is not sorted by 't'|not sorted"):
        loose.toArrow()


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


def test_udf_splits_by_a_packed_position_and_refuses_bad_input_indexes():
    """The mapInArrow function alone, on plain record batches: the input index packed into the
    position's high bits, rows grouped by input (cut into slices) or interleaved (filtered); a null
    or out-of-range index is an error naming the row, never a dropped row."""
    a = pa.table({"t": [1, 2, 6], "k": [1, 1, 2], "v": [1.0, 2.0, 3.0]})
    b = pa.table({"t": [2, 3], "k": [1, 2], "v": [5.0, 7.0]})
    query = dict(time="t", key="k", window=po.tumbling(4), aggs=AGGS)
    expected = po.aggregate([a, b], **query).to_arrow()
    shift = ps._position_shift(2)
    rows = [(i, r) for i, t in enumerate([a, b]) for r in range(t.num_rows)]

    def table(order, index=None):
        data = {c: [[a, b][i].column(c)[r].as_py() for i, r in order] for c in ("t", "k", "v")}
        if index is None:
            data[ps.POSITION_COLUMN] = pa.array([(i << shift) + r for i, r in order], pa.int64())
        else:
            data[ps.INPUT_COLUMN] = pa.array(index, pa.int32())
        return pa.table(data)

    def run(t):
        fn, schema = ps.aggregate_udf(t.schema, 2, **query)
        return pa.Table.from_batches(list(fn(iter(t.to_batches(max_chunksize=2)))), schema)

    _same(run(table(rows)), expected)  # grouped by input
    _same(run(table([rows[0], rows[3], rows[1], rows[4], rows[2]])), expected)  # interleaved
    with pytest.raises(po.InvalidInputError, match=r"row 1 of the partition has a null __pao_input"):
        run(table(rows, [0, None, 0, 1, 1]))
    with pytest.raises(po.InvalidInputError, match=r"row 3 of the partition has input index 5, outside 0 to 1"):
        run(table(rows, [0, 0, 0, 5, 1]))
    with pytest.raises(po.InvalidInputError, match=r"row 0 of the partition has input index -1"):
        run(table(rows, [-1, 0, 0, 1, 1]))


def test_a_row_id_too_large_to_pack_fails_the_query(spark):
    from pyspark.sql import functions as F

    fits = ps._with_packed_position(spark.range(2), F.lit(2), 3, ids=F.col("id"))
    assert [r[ps.POSITION_COLUMN] for r in fits.collect()] == [2 << ps._position_shift(3), (2 << ps._position_shift(3)) + 1]
    too_large = ps._with_packed_position(spark.range(2), F.lit(2), 3, ids=F.lit(2**61) + F.col("id"))
    with pytest.raises(Exception, match="leaves no room for the input index of 3 inputs"):
        too_large.collect()


def test_session_sets_the_arrow_settings(spark):
    for name, value in ps.ARROW_SETTINGS.items():
        assert spark.conf.get(name).rstrip("b") == value


def test_udf_factory_for_apply_in_arrow(spark):
    from pyspark.sql import functions as F
    from pyspark.sql.pandas.types import from_arrow_schema, to_arrow_schema

    a = pa.table({"t": [1, 2, 6, 7], "k": [1, 1, 2, 1], "v": [1.0, 2.0, 3.0, 4.0]})
    b = pa.table({"t": [1, 3, 6], "k": [2, 1, 1], "v": [5.0, 6.0, 7.0]})
    query = dict(time="t", key="k", window=po.sliding(size=4, advance=2), aggs=AGGS)
    expected = po.aggregate([a, b], **query).to_arrow()
    df = None
    for i, t in enumerate([a, b]):
        one = (spark.createDataFrame(t).withColumn(ps.INPUT_COLUMN, F.lit(i).cast("int"))
               .withColumn(ps.POSITION_COLUMN, F.monotonically_increasing_id()))
        df = one if df is None else df.unionByName(one)
    fn, schema = ps.aggregate_group_udf(to_arrow_schema(df.schema), 2, **query)
    got = df.groupBy("k").applyInArrow(fn, from_arrow_schema(schema)).orderBy("window_start", "k").toArrow()
    _same(got, expected)


# --- Pipelines ------------------------------------------------------------------------------

from test_pipeline import _engine_pipeline, _random_chain  # noqa: E402  (the in-process suite's generator)
from test_pipeline import _inputs as _pipeline_inputs  # noqa: E402

PIPELINE_RUNS = {"equal": 0}


def _same_pipeline(got: pa.Table, expected: pa.Table) -> None:
    assert got.column_names == expected.column_names
    assert got.to_pylist() == expected.to_pylist()


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1), n_inputs=st.integers(1, 3), rows=st.integers(0, 120),
       keys=st.integers(1, 8), string_keys=st.booleans(), as_one=st.booleans(), partitions=st.integers(1, 4))
@example(seed=1, n_inputs=3, rows=1, keys=1, string_keys=False, as_one=True, partitions=1)  # empty inputs first
def test_random_pipelines_on_spark_equal_the_in_process_run(spark, seed, n_inputs, rows, keys, string_keys, as_one,
                                                            partitions):
    rng = random.Random(seed)
    tables = _pipeline_inputs(rng, n_inputs, rows, keys, string_keys)
    pipeline = _engine_pipeline(tables, _random_chain(rng))
    expected = pipeline.run(threads=2).to_arrow()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # one-partition stages warn
        if as_one:
            combined = pa.concat_tables([
                t.append_column("src", pa.array([i] * t.num_rows, pa.int32()))
                 .append_column("seq", pa.array(range(t.num_rows), pa.int64())) for i, t in enumerate(tables)])
            out = ps.run(pipeline, _frame(spark, combined), input_column="src", order_by="seq",
                         partitions=partitions)
        else:
            out = ps.run(pipeline, [spark.createDataFrame(t) for t in tables], partitions=partitions)
        got = out.toArrow()
    _same_pipeline(got, expected)
    PIPELINE_RUNS["equal"] += 1


def test_stages_split_at_incompatible_keys():
    t = pa.table({"ts": [1], "u": [1], "s": [2], "v": [3]})
    p = po.Pipeline(t, time="ts")
    assert ps.stages(p.filter(po.col("v") > 0).sessionize(["u", "s"], gap=3).lag("u", "v").dedupe("s")) == [
        "filter, sessionize, lag  (partitioned by [u])", "dedupe  (partitioned by [s])"]
    # A key computed by an earlier operator cannot partition the stage's input.
    assert ps.stages(p.with_columns(u=po.col("v") % 2).sessionize("u", gap=3)) == [
        "with_columns  (any partitioning)", "sessionize  (partitioned by [u])"]
    assert ps.stages(p.sessionize("u", gap=3).top_k(1, "v").filter(po.col("v") > 0)) == [
        "sessionize  (partitioned by [u])", "top_k, filter  (one partition)"]
    assert ps.stages(p.window_aggregate(po.tumbling(5), {"n": po.count()}, key="u").lag("u", "n")) == [
        "window_aggregate  (partitioned by [u])", "lag  (partitioned by [u])"]


def test_pipeline_with_order_sensitive_state_and_a_filtering_map(spark):
    a = pa.table({"ts": [1, 2, 5, 40, 41, 90], "user": [1, 2, 1, 1, 2, 2], "page": [3, 4, 5, 6, 3, 8]})
    b = pa.table({"ts": [2, 3, 50, 60], "user": [3, 1, 3, 1], "page": [7, 7, 1, 2]})

    def odd_pages_twice(batch: pa.RecordBatch) -> pa.RecordBatch:  # 0 or 2 rows per row
        import numpy as np

        odd = np.asarray(batch.column("page")) % 2 == 1
        return batch.take(pa.array(np.repeat(np.arange(batch.num_rows), np.where(odd, 2, 0)), pa.int64()))

    p = (po.Pipeline([a, b], time="ts").experimental_parametric("partitioned", cost_us=0, key="user")
         .map_batches(odd_pages_twice).sessionize("user", gap=30))
    expected = p.run(threads=2, morsel=1).to_arrow()
    got = ps.run(p, [spark.createDataFrame(a), spark.createDataFrame(b)], partitions=2).toArrow()
    assert got.column("p_state").type == pa.decimal128(20, 0)  # Spark has no uint64
    assert [int(x) for x in got.column("p_state").to_pylist()] == expected.column("p_state").to_pylist()
    _same_pipeline(got.drop_columns(["p_state"]), expected.drop_columns(["p_state"]))


def test_pipeline_stateful_stage_warns_and_errors_reach_the_driver(spark):
    t = pa.table({"ts": [1, 2, 9], "u": [1, 2, 1], "v": [5, 7, 6]})
    p = po.Pipeline(t, time="ts").top_k(2, "v")
    with pytest.warns(UserWarning, match="one Spark partition"):
        out = ps.run(p, [spark.createDataFrame(t)])
    _same_pipeline(out.toArrow(), p.run().to_arrow())
    loose = ps.run(po.Pipeline(t, time="ts").sessionize("u", gap=2), [spark.createDataFrame(t)], ordered=False)
    _same_pipeline(loose.toArrow().sort_by("ts"), po.Pipeline(t, time="ts").sessionize("u", gap=2).run().to_arrow())
    unsorted = pa.table({"ts": [1, 5, 3], "u": [1, 1, 1], "v": [1, 2, 3], "seq": [0, 1, 2]})
    with pytest.raises(Exception, match="not sorted"):  # the stages run in the call (the result is sorted)
        ps.run(po.Pipeline(t, time="ts").sessionize("u", gap=2), [spark.createDataFrame(unsorted)], order_by="seq")


def test_report_equality_counts():
    print(f"\nspark equality: {RUNS['equal']} aggregate runs, {PIPELINE_RUNS['equal']} pipeline runs")


def test_pipeline_udf_factories(spark):
    from pyspark.sql import functions as F
    from pyspark.sql.pandas.types import from_arrow_schema, to_arrow_schema

    a = pa.table({"ts": [1, 2, 5, 40], "user": [1, 2, 1, 1], "page": [3, 4, 5, 6]})
    b = pa.table({"ts": [2, 3, 50], "user": [3, 1, 3], "page": [7, 7, 1]})
    p = po.Pipeline([a, b], time="ts").sessionize("user", gap=30).lag("user", "page")
    expected = p.run().to_arrow().sort_by([("user", "ascending"), ("ts", "ascending")])
    df = None
    for i, t in enumerate([a, b]):
        one = (spark.createDataFrame(t).withColumn(ps.INPUT_COLUMN, F.lit(i).cast("int"))
               .withColumn(ps.POSITION_COLUMN, F.monotonically_increasing_id()))
        df = one if df is None else df.unionByName(one)
    fn, schema = ps.pipeline_group_udf(p, to_arrow_schema(df.schema), 2)
    got = df.groupBy("user").applyInArrow(fn, from_arrow_schema(schema)).orderBy("user", "ts").toArrow()
    _same_pipeline(got, expected)
    fn, schema = ps.pipeline_udf(p, to_arrow_schema(df.schema), 2)
    ordered = df.repartition(2, "user").sortWithinPartitions(ps.INPUT_COLUMN, ps.POSITION_COLUMN)
    got = ordered.mapInArrow(fn, from_arrow_schema(schema)).orderBy("user", "ts").toArrow()
    _same_pipeline(got, expected)


def test_a_null_time_fails_on_the_driver_naming_the_input(spark):
    t = pa.table({"t": pa.array([1, None, 3], pa.int64()), "k": [1, 1, 2], "v": [1.0, 2.0, 3.0]})
    with pytest.raises(Exception, match=r"input 0.*null|null.*input 0"):
        ps.aggregate([spark.createDataFrame(t)], time="t", key="k", window=po.tumbling(2), aggs={"n": po.count()})
    with pytest.raises(po.InvalidInputError, match="'nope'"):  # checked on the driver, before Spark runs
        ps.aggregate([spark.createDataFrame(t)], time="nope", key="k", window=po.tumbling(2), aggs={"n": po.count()})


# --- The user's own session -------------------------------------------------------------------------

BYTES = "spark.sql.execution.arrow.maxBytesPerBatch"


@pytest.fixture
def session_without_arrow_settings(spark):
    """The module's session with maxBytesPerBatch as a given value or unset (Spark's default) for the test,
    then as it was."""
    saved = spark.conf.get(BYTES, None)

    def use(value):
        if value is None:
            spark.conf.unset(BYTES)
        else:
            spark.conf.set(BYTES, value)
        return spark

    yield use
    use(saved)


def test_arrow_settings_are_in_force_for_the_block_then_as_they_were(session_without_arrow_settings):
    spark = session_without_arrow_settings(None)
    with ps.arrow_settings(spark):
        assert spark.conf.get(BYTES).rstrip("b") == "2147483647"
    assert spark.conf.get(BYTES, None) is None  # unset again, not set to the default's value
    session_without_arrow_settings("1000")
    with pytest.raises(RuntimeError, match="inside"):
        with ps.arrow_settings(spark):
            raise RuntimeError("inside")
    assert spark.conf.get(BYTES) == "1000"


def test_the_sorted_result_runs_its_udf_under_the_arrow_settings_whatever_the_session_has(
        spark, session_without_arrow_settings):
    """Spark reads maxBytesPerBatch when a job runs. With 1 byte, every batch it hands a UDF is one row: so
    a UDF run at the caller's action sees one-row batches, one run inside _sorted (as aggregate's and run's
    engine stages do) sees whole batches, and the session keeps its 1 byte."""
    from pyspark.sql import functions as F

    def batch_rows(batches):  # nested, so that cloudpickle ships it by value to the workers
        for batch in batches:
            yield batch.append_column("batch_rows", pa.array([batch.num_rows] * batch.num_rows, pa.int64()))

    session_without_arrow_settings("1")
    rows = spark.range(0, 300, numPartitions=1)
    lazy = rows.mapInArrow(batch_rows, "id long, batch_rows long")
    assert {r["batch_rows"] for r in lazy.collect()} == {1}  # the session's setting, at the action
    sorted_ = ps._sorted(rows.mapInArrow(batch_rows, "id long, batch_rows long"), [F.col("id").desc()], 2)
    assert spark.conf.get(BYTES) == "1"
    got = sorted_.collect()
    assert [r["id"] for r in got] == list(range(299, -1, -1))
    assert {r["batch_rows"] for r in got} == {300}  # one batch: computed under ARROW_SETTINGS
    # The given partition count, not spark.sql.shuffle.partitions (4 here), which adaptive execution coalesces.
    assert sorted_.rdd.getNumPartitions() == 2


def test_span_of_window_starts_and_its_merge():
    """The accumulator the sort's ranges come from: the least and greatest window start, as Spark keeps
    it (microseconds for timestamps of any unit), merged across partitions; None where it cannot say."""
    ns = pa.array([3_000, 1_999, 7_000_000], pa.timestamp("ns", tz="UTC"))
    assert ps._span_of(ns) == (1, 7_000)  # microseconds, truncated (the order is kept)
    assert ps._span_of(pa.chunked_array([pa.array([5, -2], pa.int32()), pa.array([9], pa.int32())])) == (-2, 9)
    assert ps._span_of(pa.array([1.5, 2.5])) is None
    assert ps._span_of(pa.array([], pa.int64())) is None
    merge = ps._Span()
    assert merge.zero(None) is None
    assert merge.addInPlace(None, (3, 4)) == (3, 4) and merge.addInPlace((3, 4), None) == (3, 4)
    assert merge.addInPlace((3, 4), (-1, 2)) == (-1, 4)


def test_the_sorted_result_is_cut_into_equal_spans_of_window_start(spark):
    """ps.aggregate's sort cuts the window starts the engine saw into equal spans, span r in partition
    r: the partitions are in window order, none left empty, and the rows are the in-process table."""
    from pyspark.sql import functions as F

    rows = 4000
    t = pa.table({"t": pa.array(range(rows), pa.int64()), "k": pa.array([i % 7 for i in range(rows)]),
                  "v": pa.array([1.0] * rows)})
    query = dict(time="t", key="k", window=po.sliding(size=10, advance=5), aggs={"n": po.count()})
    out = ps.aggregate([spark.createDataFrame(t)], **query, partitions=4)
    _same(out.toArrow(), po.aggregate(t, **query).to_arrow())
    layout = out.groupBy(F.spark_partition_id().alias("p")).agg(F.min("window_start").alias("lo"),
                                                               F.max("window_start").alias("hi"),
                                                               F.count("*").alias("n")).orderBy("p").collect()
    assert [r["p"] for r in layout] == [0, 1, 2, 3]
    assert all(a["hi"] < b["lo"] for a, b in zip(layout, layout[1:]))
    assert min(r["n"] for r in layout) > sum(r["n"] for r in layout) // 8  # equal spans of evenly spread rows


def test_a_session_without_the_arrow_settings_is_warned_once_where_the_result_runs_later(
        spark, session_without_arrow_settings):
    t = pa.table({"t": list(range(200)), "k": [i % 3 for i in range(200)], "v": [1.0] * 200})
    query = dict(time="t", key="k", window=po.tumbling(10), aggs={"n": po.count()})
    expected = po.aggregate(t, **query).to_arrow()
    session_without_arrow_settings(None)
    ps._warned_lazy.discard(spark.sparkContext.applicationId)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # sorted: computed here under the settings, so no warning
        _same(ps.aggregate([spark.createDataFrame(t)], **query).toArrow(), expected)
    with pytest.warns(UserWarning, match=r"computed when your action runs.*arrow_settings"):
        loose = ps.aggregate([spark.createDataFrame(t)], **query, ordered=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # once per SparkContext
        again = ps.aggregate([spark.createDataFrame(t)], **query, ordered=False)
    with ps.arrow_settings(spark):
        _same(loose.toArrow().sort_by([("window_start", "ascending"), ("k", "ascending")]), expected)
    _same(again.toArrow().sort_by([("window_start", "ascending"), ("k", "ascending")]), expected)
    session_without_arrow_settings(ps.ARROW_SETTINGS[BYTES])
    ps._warned_lazy.discard(spark.sparkContext.applicationId)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a session that has them: no warning
        ps.aggregate([spark.createDataFrame(t)], **query, ordered=False)


def test_check_workers_passes_with_this_interpreter_and_probes_once_per_context(spark):
    sc = spark.sparkContext
    ps._workers_ok.discard(sc.applicationId)
    try:
        sc.setJobGroup("pao-check-1", "check_workers")
        ps.check_workers(spark)
        sc.setJobGroup("pao-check-2", "check_workers again")
        ps.check_workers(spark)
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)
        sc.setLocalProperty("spark.job.description", None)
    tracker = sc.statusTracker()
    assert len(tracker.getJobIdsForGroup("pao-check-1")) == 1  # the probe
    assert tracker.getJobIdsForGroup("pao-check-2") == []  # cached


def _interpreter_without_pyarrow_ops() -> str | None:
    """This virtual environment's base interpreter, if it cannot import pyarrow_ops (same Python version,
    so the workers start and fail only on the import)."""
    import subprocess
    import sys

    base = getattr(sys, "_base_executable", None)
    if not base:
        return None
    found = subprocess.run([base, "-c", "import pyarrow_ops"], capture_output=True).returncode == 0
    return None if found else base


WRONG_WORKERS = """
import pyarrow as pa
from pyspark.sql import SparkSession
import pyarrow_ops as po
import pyarrow_ops.spark as ps

spark = SparkSession.builder.master("local[1]").config("spark.ui.showConsoleProgress", "false").getOrCreate()
df = spark.createDataFrame(pa.table({"t": [1, 2], "k": [1, 1]}))
try:
    ps.aggregate([df], time="t", key="k", window=po.tumbling(2), aggs={"n": po.count()})
except po.UsageError as e:
    print("USAGE ERROR:", e)
"""


def test_workers_that_cannot_import_pyarrow_ops_raise_one_clear_error(tmp_path):
    """A plain session whose PYSPARK_PYTHON is an interpreter without pyarrow_ops: ps.aggregate raises
    UsageError naming the fix, in a process of its own (the workers' interpreter is fixed per context)."""
    import subprocess
    import sys

    wrong = _interpreter_without_pyarrow_ops()
    if wrong is None:
        pytest.skip("no interpreter without pyarrow_ops at hand (not in a virtual environment)")
    script = tmp_path / "wrong_workers.py"
    script.write_text(WRONG_WORKERS)
    env = {**os.environ, "PYSPARK_PYTHON": wrong}
    done = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    (line,) = [x for x in done.stdout.splitlines() if x.startswith("USAGE ERROR:")]
    assert f"Spark's Python workers ({wrong}) cannot import pyarrow_ops" in line
    assert "No module named 'pyarrow'" in line
    assert "PYSPARK_PYTHON" in line and sys.executable in line
