"""python -m benchmarks.soak on a small input as a smoke test: the table and the idle period are
printed; no figure is judged here."""

import subprocess
import sys

from benchmarks.pipeline import number


def test_soak_prints_throughput_memory_and_the_idle_input():
    out = subprocess.run([sys.executable, "-m", "benchmarks.soak", "--tuples", "2000000", "--batch", "16384",
                          "--idle-timeout", "0.05", "--checkpoint-every-s", "0.2"], capture_output=True, text=True, check=True, timeout=300).stdout
    row = next(line for line in out.splitlines() if line.startswith("| ") and line[2].isdigit())
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert number(cells[0]) > 0 and number(cells[2]) > 0 and number(cells[6]) > 0
    assert cells[8] == "0"  # shuffled within the bound: nothing late
    assert "'input': 3" in out
    assert "Checkpoints every 0.2 s:" in out
