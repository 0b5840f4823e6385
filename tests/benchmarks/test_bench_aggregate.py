"""python -m benchmarks.aggregate as a smoke test (small sizes, no Spark), and its table check."""

import subprocess
import sys

import pyarrow as pa
import pytest

from benchmarks import aggregate as bench_aggregate


def _section(lines: list[str], header: str) -> list[list[str]]:
    """The rows of the table under header (up to the next empty line), split into cells."""
    start = lines.index(header) + 1
    end = next((i for i in range(start, len(lines)) if not lines[i].strip()), len(lines))
    return [line.split() for line in lines[start:end]]


def test_smoke_run_prints_every_query_design_and_peer():
    out = subprocess.run(
        [sys.executable, "-m", "benchmarks.aggregate", "--rows", "20000", "--inputs", "1,4", "--repeat", "1"],
        capture_output=True, text=True, check=True, timeout=600,
    ).stdout
    lines = out.splitlines()
    header = next(line for line in lines if line.split()[:4] == ["query", "window", "inputs", "threads"])
    import pyarrow_ops as po

    assert header.split()[4:] == [*po.DESIGNS, "polars", "duckdb", "best/peer", "auto/peer", "chosen"]
    rows = _section(lines, header)
    assert [(r[0], r[1], r[2]) for r in rows] == [
        (q, f"{spec.size_ms // 1000}s/{spec.advance_ms // 1000}s", k)
        for q, spec in bench_aggregate.QUERIES.items() for k in ("1", "4")
    ]
    assert all(r[3] == "auto" for r in rows)
    assert all(float(r[-3]) > 0 and float(r[-2]) > 0 for r in rows)  # best design, auto / best peer
    assert all(r[-1] in po.DESIGNS and r[-1] != "auto" for r in rows)  # the design auto ran
    formulations = _section(lines, next(line for line in lines if line.split()[:3] == ["query", "inputs", "peer"]))
    assert len(formulations) == len(rows) * 4  # two peers, two formulations each
    latency = lines[lines.index(next(line for line in lines if line.startswith("Emission latency"))) + 2:]
    assert [line.split()[:2] for line in latency] == [[po.DESIGNS[0], "1"], [po.DESIGNS[0], "4"]]


def test_threads_designs_and_a_design_rejecting_the_query(capsys):
    results = bench_aggregate.query_table(
        3000, [2], 1, designs=["tumlsc", "no-such-design"], threads=[1, 2], queries=["w-OI"],
        peer_names=["polars"],
    )
    assert set(results) == {("w-OI", 2, 1), ("w-OI", 2, 2)}
    assert results[("w-OI", 2, 1)]["no-such-design"] is None  # aggregate() raised ValueError
    lines = capsys.readouterr().out.splitlines()
    rows = _section(lines, next(line for line in lines if line.lstrip().startswith("query  window")))
    assert [r[3] for r in rows] == ["1", "2"]
    assert all(r[5] == "n/a" and r[7] in ("panes", "explode") for r in rows)


def test_same_table_allows_only_small_float_differences():
    ref = pa.table({"k": [1, 2, 3], "m": [1.0, None, float("nan")]})
    assert bench_aggregate.same_table(ref, ref)
    assert bench_aggregate.same_table(ref.set_column(1, "m", pa.array([1.0 + 1e-12, None, float("nan")])), ref)
    assert not bench_aggregate.same_table(ref.set_column(1, "m", pa.array([1.0 + 1e-6, None, float("nan")])), ref)
    assert not bench_aggregate.same_table(ref.set_column(1, "m", pa.array([1.0, 0.0, float("nan")])), ref)
    assert not bench_aggregate.same_table(ref.set_column(0, "k", pa.array([1, 2, 4])), ref)
    assert not bench_aggregate.same_table(ref.slice(1), ref)


def test_unknown_names_are_rejected():
    with pytest.raises(SystemExit):
        bench_aggregate.main(["--queries", "k-OI,x-OI"])
    with pytest.raises(SystemExit):
        bench_aggregate.main(["--peers", "pandas"])


@pytest.mark.parametrize("design", ["tumlsc", "wiml"])
def test_latency_runs_record_one_latency_per_window_set(design):
    q = bench_aggregate.QUERIES["k-OI"]
    tables = bench_aggregate.workload(q.dataset, 20_000, 3)
    window_sets = bench_aggregate.run_engine(tables, q, design, None).column("window_start").unique()
    for rate in (0.0, 200_000.0):  # unpaced, and paced at 0.2 Mt/s
        _, lat = bench_aggregate._latency_run(tables, 3, q, design, None, rate)
        assert lat.size == len(window_sets) and (lat >= 0).all()


def test_push_table_prints_each_design_and_the_one_auto_picks(capsys):
    bench_aggregate.push_table(5000, [1, 3], ["sliced", "wiml", "tumlsc"], ["k-OI", "W-OI"], 1)
    lines = capsys.readouterr().out.splitlines()
    rows = _section(lines, next(line for line in lines if line.split()[:2] == ["query", "inputs"]))
    assert [(r[0], r[1]) for r in rows] == [("k-OI", "1"), ("k-OI", "3"), ("W-OI", "1"), ("W-OI", "3")]
    assert all(float(x) > 0 for r in rows for x in r[2:5])
    assert all(r[5] == "wiml" for r in rows)  # docs/aggregate.md: auto's rule for these windows
