"""python -m benchmarks.graphs --quick as a smoke test: every table prints, with every contender, and every
output was checked equal to the engine's. No figure is judged here: timings belong to the benchmark."""

import pyarrow as pa
import pytest

from benchmarks import graphs as bench_graphs
from benchmarks.pipeline import number, quick_output, read_table

THREADS = [str(t) for t in bench_graphs.THREADS]


def _table(lines: list[str], heading_start: str) -> tuple[list[str], list[list[str]], list[str]]:
    header, rows, notes = read_table(lines, heading_start)
    return header, rows, [line for line in notes if not line.startswith("All outputs")]


@pytest.fixture(scope="module")
def output() -> list[str]:
    return quick_output("benchmarks.graphs")


def test_handoff_tables(output):
    header, rows, notes = _table(output, "1a. Hand-off cost")
    assert header == ["chain", "fuse", "best s", "ns/tuple/op net", "ns/tuple/op plain"]
    chains = ["10 x select(<all columns>)", "10 x with_columns(x_i=col('v') + 1)"]
    assert rows[0][0].startswith("po.merge([table]).to_arrow()")
    assert [(r[0], r[1]) for r in rows[1:]] == [(c, f) for c in chains for f in ("fused", "unfused")]
    assert all(number(r[2]) > 0 for r in rows)
    assert notes[0].startswith("Checked equal") and "(3 outputs)" in notes[0] and "(2 outputs)" in notes[0]
    assert any(n.startswith("Fused select chain (po.explain): `fused: 0+1+2+3+4+5+6+7+8+9 (select+") for n in notes)

    header, rows, _ = _table(output, "1b. Hand-off bar")
    assert header == ["bar", "measured", "verdict"]
    assert len(rows) == 1 and "<= 2 ns per tuple per operator at 1 thread" in rows[0][0]
    assert rows[0][2] in ("met", "missed")


def _contenders(rows: list[list[str]]) -> list[tuple[str, str]]:
    return [(r[0].split(":")[0].split(" (")[0], r[1]) for r in rows]


def test_clickstream_tables(output):
    header, rows, notes = _table(output, "2a. Query (a), clickstream")
    assert header == ["contender", "threads", "input tuples", "best s", "input tuples/s", "output rows"]
    pool = rows[2 * len(THREADS)][1]
    assert _contenders(rows) == ([("engine graph", t) for t in THREADS]
                                 + [("engine, separate branches", t) for t in THREADS]
                                 + [("Polars", pool)] + [("DuckDB", t) for t in THREADS])
    assert all(number(r[2]) == bench_graphs.QUICK_ROWS and number(r[4]) > 0 for r in rows)
    assert len({r[5] for r in rows}) == 1  # every contender: the same output rows
    contenders = len(rows)
    assert notes[0].startswith("Checked equal") and all(f"{o} ({contenders} outputs)" in notes[0]
                                                         for o in ("sessions", "top_items"))

    header, rows, _ = _table(output, "2b. Query (a), clickstream: ratios")
    assert header == ["threads", "graph t/s", "separate t/s", "graph / separate", "best peer", "best peer t/s",
                      "graph / best peer"]
    assert [r[0] for r in rows] == THREADS
    assert all(r[4].split(" @")[0] in ("Polars", "DuckDB") and number(r[6]) > 0 for r in rows)


def test_asof_tables(output):
    header, rows, notes = _table(output, "2c. Query (b), readings as-of joined")
    assert header == ["contender", "threads", "input tuples", "best s", "input tuples/s", "output rows"]
    pool = rows[2 * len(THREADS)][1]
    assert _contenders(rows) == ([("engine graph", t) for t in THREADS] + [("reference", t) for t in THREADS]
                                 + [("Polars", pool)] + [("DuckDB", t) for t in THREADS])
    readings, tariffs = bench_graphs.meter_readings(bench_graphs.QUICK_ROWS)
    both = readings.num_rows + tariffs.num_rows
    assert [number(r[2]) for r in rows] == [both] * len(THREADS) + [readings.num_rows] * len(THREADS) + [both] * (
        1 + len(THREADS))
    assert len({r[5] for r in rows}) == 1 and number(rows[0][5]) > 0
    assert notes[0].startswith("Checked equal") and f"costs ({len(rows)} outputs)" in notes[0]

    header, rows, _ = _table(output, "2d. Query (b), as-of join: ratios")
    assert header == ["threads", "graph t/s", "best peer", "best peer t/s", "graph / best peer"]
    assert [r[0] for r in rows] == THREADS
    assert output[-1].startswith("All outputs checked equal")


def test_rounds_refuse_a_differing_output():
    equal = {"x": bench_graphs.Equal("x")}
    contenders = {"a": lambda: {"x": pa.table({"v": [1, 2]})}, "b": lambda: {"x": pa.table({"v": [2, 1]})}}
    with pytest.raises(AssertionError, match="x: the output of b differs from that of a"):
        bench_graphs.rounds(contenders, 1, equal)


def test_peers_match_the_engine_on_a_tiny_input():
    """Ties in time, keys with one tuple, windows still open at the end: the peers' formulations give the
    engine's tables exactly (the benchmark checks the same at its sizes)."""
    source = bench_graphs.clickstream(3_000, seed=5)
    graph = bench_graphs.clickstream_graph(source)
    schemas = bench_graphs.output_schemas(graph)
    import pyarrow_ops as po

    engine = po.run(graph, threads=2).to_arrow()
    for peer in (bench_graphs.polars_clickstream(source, schemas), bench_graphs.duckdb_clickstream(source, schemas, 2)):
        assert all(peer[name].equals(engine[name]) for name in graph)
    readings, tariffs = bench_graphs.meter_readings(3_000, seed=5)
    graph = bench_graphs.cost_graph(readings, tariffs)
    schemas = bench_graphs.output_schemas(graph)
    engine = po.run(graph, threads=2).to_arrow()["costs"]
    assert bench_graphs.polars_costs(readings, tariffs, schemas)["costs"].equals(engine)
    assert bench_graphs.duckdb_costs(readings, tariffs, schemas, 2)["costs"].equals(engine)


def test_unknown_section_is_refused(capsys):
    with pytest.raises(SystemExit):
        bench_graphs.main(["--sections", "handoff,nope"])
    assert "unknown section nope" in capsys.readouterr().err
