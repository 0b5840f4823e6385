"""python -m benchmarks.merge from the repository root, as a smoke test."""

import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_merge_benchmark_compares_with_polars():
    out = subprocess.run(
        [sys.executable, "-m", "benchmarks.merge", "--rows", "20000", "--inputs", "2", "--repeat", "1"],
        capture_output=True, text=True, check=True, timeout=300, cwd=ROOT,
    ).stdout
    lines = out.strip().splitlines()
    assert lines[-1].split()[0] == "2"
    assert lines[-1].split()[4] == "True"  # identical results to polars concat + sort

