"""lateness= and late= on real PySpark (local[2], pyarrow_ops/spark/lateness.py): a pipeline or graph
over inputs out of order within and beyond their bounds gives on Spark the table the in-process run
gives, row for row; the late rows are the in-process ``result.late``; a late row under
``late="error"`` is named as in-process."""

from __future__ import annotations

import random

import numpy as np
import pyarrow as pa
import pytest

import pyarrow_ops as po
from benchmarks.lateness import arrival_within

pyspark = pytest.importorskip("pyspark")
ps = pytest.importorskip("pyarrow_ops.spark")


@pytest.fixture(scope="module")
def spark():
    return ps.session()


def disordered(seed: int, inputs: int, bound: int) -> list[pa.Table]:
    """Inputs out of order within `bound`, a few rows beyond it; times with ties."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(inputs):
        rows = int(rng.integers(0, 300))
        times = np.cumsum(rng.integers(0, 3, rows)).astype(np.int64)
        times = times[arrival_within(times, bound)] if rows else times
        times[rng.random(rows) < 0.03] -= bound + 1 + rng.integers(0, 20)
        out.append(pa.table({"t": times, "k": rng.integers(0, 5, rows), "v": rng.normal(0, 5, rows).round(2)}))
    return out


def frames(spark, tables: list[pa.Table]):
    from benchmarks.peers import _to_spark

    return [_to_spark(spark, t) for t in tables]


def chain(inputs, lateness, late: str) -> po.Pipeline:
    return (po.Pipeline(inputs, time="t", lateness=lateness, late=late).filter(po.col("v") > -6)
            .sessionize("k", gap=3).running("k", {"n": po.count(), "s": po.sum("v")}))


@pytest.mark.parametrize("seed", range(4))
def test_a_pipeline_drops_the_late_rows_as_in_process(spark, seed: int) -> None:
    rng = random.Random(seed)
    inputs = 1 + seed % 3
    bound = rng.randrange(0, 12)
    lateness = bound if seed % 2 == 0 else [rng.randrange(0, 12) for _ in range(inputs)]
    tables = disordered(seed, inputs, bound)
    expected = chain(tables, lateness, "drop").run()
    want = expected.to_arrow()
    got = ps.run(chain(tables, lateness, "drop"), frames(spark, tables), partitions=3).toArrow()
    assert got.select(want.column_names).to_pylist() == want.to_pylist()
    late = ps.late_rows(frames(spark, tables), time="t", lateness=lateness).toArrow()
    assert [late["input"].to_pylist().count(i) for i in range(inputs)] == expected.late_counts


def test_the_late_rows_are_those_of_the_in_process_run(spark) -> None:
    tables = disordered(11, 3, 5)
    expected = chain(tables, 5, "side").run()
    expected.to_arrow()
    late = ps.late_rows(frames(spark, tables), time="t", lateness=5).toArrow()
    want = expected.late
    assert late.num_rows > 0
    assert late.select(want.column_names).to_pylist() == want.to_pylist()


def test_a_graph_source_with_lateness_equals_in_process(spark) -> None:
    tables = disordered(4, 2, 6)
    source = po.Pipeline(tables, time="t", lateness=6, late="drop")
    outputs = {"sessions": source.sessionize("k", gap=3),
               "windows": source.window_aggregate(po.tumbling(20), {"s": po.sum("v")}, key="k")}
    want = {name: r.to_arrow() for name, r in po.run(outputs).items()}
    got = ps.run(outputs, {source: frames(spark, tables)}, partitions=2)
    for name, table in want.items():
        assert got[name].toArrow().select(table.column_names).to_pylist() == table.to_pylist(), name


def test_a_late_row_under_error_is_named_as_in_process(spark) -> None:
    table = pa.table({"t": [0, 5, 12, 3, 13], "k": [1, 1, 2, 2, 1], "v": [1.0, 2.0, 3.0, 4.0, 5.0]})
    with pytest.raises(po.UnsortedInputError, match=r"input 0 .*within its lateness: row 3 has 3"):
        chain(table, 4, "error").run().to_arrow()
    with pytest.raises(po.UnsortedInputError, match=r"input 0 .*within its lateness: row 3 has 3"):
        ps.run(chain(table, 4, "error"), frames(spark, [table]))
    within = table.slice(0, 3)  # out of order by less than the bound: nothing late, the order restored
    assert ps.run(chain(within, 4, "error"), frames(spark, [within])).toArrow().to_pylist() == \
        chain(within, 4, "error").run().to_arrow().to_pylist()


def test_side_is_refused_with_the_way_out(spark) -> None:
    table = disordered(2, 1, 3)[0]
    with pytest.raises(po.UsageError, match="late_rows"):
        ps.run(chain(table, 3, "side"), frames(spark, [table]))


@pytest.mark.parametrize("pinned", [False, True])
def test_an_aggregate_drops_the_late_rows_as_in_process(spark, pinned: bool) -> None:
    """Positions from Spark's row ids packed with the input index, or pinned by a column (the index
    and the position as two)."""
    tables = disordered(8, 3, 7)
    aggs = {"n": po.count(), "s": po.sum("v"), "first": po.first("v"), "last": po.last("v")}
    window = po.sliding(size=12, advance=4)
    want = po.aggregate(tables, time="t", key="k", window=window, aggs=aggs, lateness=7, late="drop").to_arrow()
    if pinned:
        combined = pa.concat_tables([
            t.append_column("src", pa.array([i] * t.num_rows, pa.int32()))
             .append_column("seq", pa.array(range(t.num_rows), pa.int64())) for i, t in enumerate(tables)])
        inputs, extra = frames(spark, [combined])[0], {"input_column": "src", "order_by": "seq"}
    else:
        inputs, extra = frames(spark, tables), {}
    got = ps.aggregate(inputs, time="t", key="k", window=window, aggs=aggs, lateness=7, late="drop", partitions=3,
                       **extra).toArrow()
    assert got.select(want.column_names).to_pylist() == want.to_pylist()
