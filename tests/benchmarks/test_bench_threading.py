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


def test_chosen_contenders_trace_and_plot(tmp_path):
    """--only runs the contenders named; --trace writes the elastic ones' levels as JSON and --plot
    draws each as a PNG."""
    import json

    import pytest

    pytest.importorskip("matplotlib")
    trace, plots = tmp_path / "levels.json", tmp_path / "plots"
    out = subprocess.run([sys.executable, "-m", "benchmarks.threading", "--rows", "20000", "--depth", "4",
                          "--costs", "1", "--shapes", "pipeline", "--only", "ordered 1,dynamic auto", "--repeat", "1",
                          "--trace", str(trace), "--plot", str(plots)],
                         capture_output=True, text=True, check=True, timeout=600).stdout
    assert "| ordered 1 | dynamic auto |" in out
    levels = json.loads(trace.read_text())
    assert list(levels) == ["pipeline, cost 1, dynamic auto"]
    assert all({"at_ns", "threads", "tuples_per_s"} <= set(lv) for lv in levels["pipeline, cost 1, dynamic auto"])
    assert [p.name for p in plots.iterdir()] == ["pipeline_cost-1_dynamic-auto.png"]
    bad = subprocess.run([sys.executable, "-m", "benchmarks.threading", "--only", "nobody"], capture_output=True, text=True)
    assert bad.returncode == 2 and "unknown contenders ['nobody']" in bad.stderr
