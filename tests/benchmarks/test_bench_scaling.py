"""python -m benchmarks.scaling on a small input as a smoke test: every workload prints a row of
figures for each thread count, after its outputs were checked equal across thread counts. No
figure is judged here."""

import subprocess
import sys

from benchmarks import scaling
from benchmarks.pipeline import number


def test_every_workload_prints_its_figures():
    out = subprocess.run([sys.executable, "-m", "benchmarks.scaling", "--rows", "20000", "--threads", "1,2",
                          "--repeat", "1"], capture_output=True, text=True, check=True, timeout=600).stdout
    rows = [line.strip("|").split("|") for line in out.splitlines()
            if line.startswith("| ") and not line.startswith("| workload")]
    assert [r[0].strip() for r in rows] == list(scaling.workloads(10))
    assert all(len(r) == 4 and all(number(c) > 0 for c in r[1:]) for r in rows)
    assert "checked equal" in out
