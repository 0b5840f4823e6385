"""python -m benchmarks.pipelines --quick as a smoke test: every table prints, with every contender, and every
output was checked equal to the engine's. No figure is judged here: timings belong to the benchmark."""

import pytest

from benchmarks import pipelines as bench
from benchmarks.pipeline import number, quick_output, read_table

THREADS = [str(t) for t in bench.THREADS]
INPUTS = [str(k) for k in bench.INPUTS]
CASES = [(name, k) for name in bench.PIPELINES for k in INPUTS]


@pytest.fixture(scope="module")
def output() -> list[str]:
    return quick_output("benchmarks.pipelines")


def _contenders(rows: list[list[str]]) -> list[tuple[str, str]]:
    return [(r[0].split(":")[0].split(" (")[0], r[1]) for r in rows]


def test_header_names_the_versions(output):
    assert output[0].startswith("# Pipeline benchmarks")
    versions = output[2]
    assert all(f"{lib} " in versions for lib in ("pyarrow-ops", "Polars", "DuckDB", "pyarrow"))
    assert "Machine:" in versions


@pytest.mark.parametrize("index, name", list(enumerate(bench.PIPELINES, 1)))
def test_pipeline_tables(output, index, name):
    pools = set()
    for letter, k in zip("ab", INPUTS):
        inputs = "1 input" if k == "1" else f"{k} inputs"
        header, rows, notes = read_table(output, f"{index}{letter}. {name}, {inputs}:")
        assert header == ["contender", "threads", "input tuples", "best s", "input tuples/s", "output rows"]
        pool = rows[len(THREADS)][1]
        pools.add(pool)
        assert _contenders(rows) == ([("engine", t) for t in THREADS] + [("Polars", pool)]
                                     + [("DuckDB", t) for t in THREADS])
        assert all(number(r[2]) == bench.QUICK_ROWS and number(r[3]) > 0 and number(r[4]) > 0 for r in rows)
        assert len({r[5] for r in rows}) == 1 and number(rows[0][5]) > 0  # every contender: the same output rows
        assert notes[0].startswith("Checked equal") and f"{name} ({len(rows)} outputs)" in notes[0]
        assert any(n.startswith("Peers:") for n in notes)
    assert len(pools) == 1


def test_ratio_table(output):
    header, rows, _ = read_table(output, "4. Engine / best peer")
    assert header == ["pipeline", "inputs", "threads", "engine t/s", "best peer", "best peer t/s",
                      "engine / best peer"]
    assert [(r[0], r[1], r[2]) for r in rows] == [(n, k, t) for n, k in CASES for t in THREADS]
    assert all(r[4].split(" @")[0] in ("Polars", "DuckDB") for r in rows)
    assert all(number(r[3]) > 0 and number(r[5]) > 0 and number(r[6]) > 0 for r in rows)


def test_operator_table(output):
    top = max(bench.THREADS)
    header, rows, notes = read_table(output, f"5. Worker time per tuple and operator: the engine at {top} threads")
    assert header == ["pipeline", "inputs", "operator", "kind", "fused", "tuples in", "busy ms", "ns/tuple in",
                      "ns/input tuple", "cpu ms", "cpu ns/tuple in"]
    operators = {"stateless": ["filter", "with_columns"], "sessions": ["sessionize", "running"],
                 "windows": ["window_aggregate"]}
    below = {"stateless": ["filter (x4, below the merge)", "with_columns", "union (the merge, after operators below it)"]}
    assert [(r[0], r[1], r[2]) for r in rows] == [
        (n, k, op) for n, k in CASES for op in [*(below[n] if k == "4" and n in below else operators[n]),
                                                "(all operators)"]]
    assert all(number(r[5]) > 0 and number(r[6]) > 0 and number(r[8]) > 0 for r in rows)
    assert all(number(r[7]) > 0 for r in rows if r[2] != "(all operators)")
    # CPU time: some, and within the clock's time (rounded to 0.1 ms, so compared with its slack).
    assert all(number(r[9]) <= number(r[6]) + 0.1 for r in rows)
    assert all(0 < number(r[10]) <= number(r[7]) + 0.1 for r in rows if r[2] != "(all operators)")
    assert "stats()" in notes[0]


def test_bar_table(output):
    header, rows, _ = read_table(output, "6. Bars (issue 29)")
    assert header == ["bar", "measured", "verdict"]
    assert [r[0].split(":")[0] for r in rows[:-1]] == [f"{n}, {'1 input' if k == '1' else k + ' inputs'}"
                                                       for n, k in CASES]
    assert all(r[1].endswith("t/s)") and number(r[1].split("x ")[0]) > 0 for r in rows[:-1])
    assert rows[-1][0] == ("At 2 threads, each pipeline at least 1.5x the best of Polars and DuckDB, at 1 and at 4 "
                           "inputs")
    assert all(r[2] in ("met", "missed") for r in rows)
    assert rows[-1][2] == ("met" if all(r[2] == "met" for r in rows[:-1]) else "missed")
    assert output[-1].startswith("All outputs checked equal") and "Machine:" in output[-1]


def test_peers_match_the_engine_on_a_tiny_input():
    """Ties in time within and across inputs, keys with one tuple, windows still open at the end: the peers'
    formulations give the engine's tables exactly, at 1 and at 4 inputs (the benchmark checks the same at its
    sizes)."""
    source = bench.clickstream(3_000, seed=5)
    for k in (1, 4):
        inputs = bench.split(source, k, seed=3)
        for name in bench.PIPELINES:
            pipeline = bench.engine_pipeline(name, inputs)
            schema = bench.output_schemas({name: pipeline})[name]
            engine = pipeline.run(threads=2).to_arrow()
            assert engine.num_rows > 0
            assert bench.polars_run(name, inputs, schema)[name].equals(engine), (name, k)
            assert bench.duckdb_run(name, inputs, schema, 2)[name].equals(engine), (name, k)


def test_bad_options_are_refused(capsys):
    with pytest.raises(SystemExit):
        bench.main(["--pipelines", "stateless,nope"])
    assert "unknown pipeline nope" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        bench.main(["--inputs", "0"])
    assert "--inputs takes" in capsys.readouterr().err
