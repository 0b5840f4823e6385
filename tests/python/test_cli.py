import subprocess
import sys


def test_demo_runs_and_reports_throughput():
    out = subprocess.run(
        [sys.executable, "-m", "pyarrow_ops", "demo", "--rows", "30000", "--meters", "500", "--inputs", "4"],
        capture_output=True, text=True, check=True, timeout=300,
    ).stdout
    assert "merged 30,000 tuples from 4 inputs" in out
    assert "tuples/s" in out
    assert "output sorted by time: True; rows in = rows out: True" in out
    assert "datetime[ms, UTC]" in out  # the Polars preview


def test_bench_compares_with_polars():
    out = subprocess.run(
        [sys.executable, "-m", "pyarrow_ops", "bench", "--rows", "20000", "--inputs", "2", "--repeat", "1"],
        capture_output=True, text=True, check=True, timeout=300,
    ).stdout
    lines = out.strip().splitlines()
    assert lines[-1].split()[0] == "2"
    assert lines[-1].split()[-1] == "True"  # identical results to polars concat + sort
