"""python -m benchmarks.threading on a small input as a smoke test: every shape prints a row of
figures per cost after every contender's output was checked equal, and the verdicts follow. No
figure is judged here."""

import subprocess
import sys

from benchmarks import threading
from benchmarks.pipeline import number


def test_every_shape_prints_its_figures():
    out = subprocess.run([sys.executable, "-m", "benchmarks.threading", "--rows", "2000", "--depth", "12",
                          "--width", "3", "--costs", "0", "--threads", "1,2", "--repeat", "1"],
                         capture_output=True, text=True, check=True, timeout=600).stdout
    rows = [line.strip("|").split("|") for line in out.splitlines()
            if line.startswith("| ") and not line.startswith("| shape")]
    assert [r[0].strip() for r in rows] == ["pipeline", "parallel", "mix"]
    contenders = threading.contenders([1, 2])
    assert all(len(r) == 4 + len(contenders) and all(number(c) > 0 for c in r[3:]) for r in rows)
    assert "checked equal" in out
    assert out.count("auto / best fixed") == 6
