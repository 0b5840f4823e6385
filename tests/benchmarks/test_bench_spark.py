"""python -m benchmarks.spark at a tiny size on real PySpark (local[2]) as a smoke test: every query is
checked equal across the engine and Spark's formulations, every figure is printed and written, and the figures
are sane. No figure is judged against another: timings belong to the benchmark. Skipped without PySpark or Java
(the project's ``spark`` extra)."""

import json
import shutil

import pytest

pytest.importorskip("pyspark")
if shutil.which("java") is None:
    pytest.skip("Spark needs Java", allow_module_level=True)

from benchmarks import spark as bench_spark  # noqa: E402

QUERIES = ["k-OI", "W-OI"]


def test_a_tiny_run_checks_equal_and_reports_every_figure(capsys, tmp_path):
    path = tmp_path / "spark.json"
    figures = bench_spark.main(["--rows", "20000", "--repeat", "1", "--json", str(path)])
    out = capsys.readouterr().out.splitlines()

    for q in QUERIES:
        assert any(line.startswith(f"{q}: checked equal ({', '.join(bench_spark.ENGINES)};") for line in out)
    assert json.loads(path.read_text()) == figures

    (table,) = figures["tables"]
    assert table["rows"] == 20_000
    results = table["results"]
    assert [(r["query"], r["engine"]) for r in results] == [(q, e) for q in QUERIES for e in bench_spark.ENGINES]
    for r in results:
        (run,) = r["runs"]
        assert run["wall_s"] > 0 and r["best_wall_s"] == run["wall_s"] and r["mtuples_per_s"] > 0
        assert r["output_rows"] > 0
        assert run["task_s"] is None or run["task_s"] > 0
        # Only the engine runs in the Python workers.
        assert (run["python_s"] is not None) == (r["engine"] == bench_spark.ENGINE)
        assert run["python_s"] is None or run["python_s"] > 0
    assert set(table["speedup_vs_best_spark"]) == set(QUERIES)
    assert all(ratio > 0 for ratio in table["speedup_vs_best_spark"].values())

    # The printed table: a row per (query, engine) with positive wall seconds, then one speedup line per query.
    start = next(i for i, line in enumerate(out) if line.startswith("query engine"))
    rows = [line.split() for line in out[start + 1:start + 1 + len(results)]]
    assert [(r[0], r[1]) for r in rows] == [(q, e) for q in QUERIES for e in bench_spark.ENGINES]
    assert all(float(r[2]) > 0 for r in rows)
    for q in QUERIES:
        assert any(line.startswith(f"{q}: pyarrow_ops.spark vs best Spark (spark-") for line in out)


def test_a_query_outside_the_smart_meter_workload_is_refused(capsys):
    with pytest.raises(SystemExit):
        bench_spark.main(["--queries", "K-OI"])  # song comments: not this benchmark's workload
    assert "unknown or no query K-OI" in capsys.readouterr().err
