"""python -m benchmarks.pipeline --quick as a smoke test: every table prints, with every setting, and
every workload's outputs were checked equal. No figure is judged here: timings belong to the benchmark."""

import pytest

from benchmarks import pipeline as bench_pipeline
from benchmarks.pipeline import quick_output, read_table
from pyarrow_ops.pipeline import PARTITIONINGS, REORDERS, SCHEDULERS


@pytest.fixture(scope="module")
def output() -> list[str]:
    return quick_output("benchmarks.pipeline")


def test_reordering_table(output):
    header, rows, notes = read_table(output, "1. Reordering")
    assert header[3:6] == ["non-blocking", "locked", "nb / locked"]
    names = [name for name, _, _ in bench_pipeline.reorder_workloads(bench_pipeline.QUICK)]
    assert [(r[0], r[2]) for r in rows] == [(n, str(t)) for n in names for t in bench_pipeline.THREADS]
    assert all(float(r[3].replace(",", "")) > 0 and float(r[4].replace(",", "")) > 0 for r in rows)
    assert len(REORDERS) == 2
    assert notes[0].startswith("Checked equal") and all(f"{n} ({2 * len(REORDERS)} outputs)" in notes[0] for n in names)


def test_partitioning_tables(output):
    header, rows, notes = read_table(output, "2a. Partitioning under skew")
    assert header[:2] == ["sigma", "heaviest key"]
    assert header[2:] == [f"{s} {c}" for s in PARTITIONINGS for c in ("1w", "2w", "2/1")]
    assert [r[0] for r in rows] == ["uniform", "1", "0.3", "0.1"]
    assert "checked equal" in notes[0].lower() and notes[0].count("(6 outputs)") == len(bench_pipeline.SIGMAS)

    header, rows, notes = read_table(output, "2b. Partitioning: processing latency")
    assert header[:2] == ["cost us/tuple", "scheme"] and header[5:7] == ["p50 us", "p99 us"]
    assert [(r[0], r[1]) for r in rows] == [(c, s) for c in ("10", "100", "1000") for s in PARTITIONINGS]
    assert all(int(r[-1]) > 0 for r in rows)  # result batches measured
    assert notes[0].startswith("Checked equal")


def test_heuristics_tables(output):
    header, rows, notes = read_table(output, "3a. Scheduling heuristics")
    assert header == ["query", "shape", "workers", *SCHEDULERS]
    assert [(r[0], r[1], r[2]) for r in rows] == [
        (q, " -> ".join(shape), str(t)) for q, shape in bench_pipeline.QUERIES.items() for t in bench_pipeline.THREADS]
    assert notes[0].startswith("Checked equal") and "Per-tuple costs" in notes[1]

    header, rows, _ = read_table(output, "3b. Scheduling heuristics: latency")
    assert header == ["query", "workers", *SCHEDULERS]
    assert all(len(cell.split(" / ")) == 2 for r in rows for cell in r[2:])


def test_bars_table(output):
    header, rows, _ = read_table(output, "4. The issue's bars")
    assert header == ["bar", "measured", "verdict", "outputs"]
    assert len(rows) == 2 + 2 + 2  # speedup (stateless, hybrid), overhead (two chains), p99 (1 and 2 workers)
    assert all(r[2] in ("met", "missed") for r in rows)
    assert all("checked equal" in r[3] for r in rows)
    assert output[-1].startswith("All outputs checked equal")


def test_equal_refuses_a_differing_output():
    import pyarrow as pa

    equal = bench_pipeline.Equal("w")
    equal.check("a", pa.table({"x": [1, 2]}))
    equal.check("b", pa.table({"x": [1, 2]}))
    with pytest.raises(AssertionError, match="w: the output of c differs from that of a"):
        equal.check("c", pa.table({"x": [2, 1]}))


def test_unknown_section_is_refused(capsys):
    with pytest.raises(SystemExit):
        bench_pipeline.main(["--sections", "reorder,nope"])
    assert "unknown section nope" in capsys.readouterr().err
