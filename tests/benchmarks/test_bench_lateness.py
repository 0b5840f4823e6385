"""python -m benchmarks.lateness on a small input as a smoke test: a row per query, every table
checked equal to the sorted run's inside the benchmark; no figure is judged here."""

import subprocess
import sys

import numpy as np
import pyarrow as pa

from benchmarks.lateness import shuffled_within
from benchmarks.pipeline import number


def test_every_query_prints_its_ratios():
    out = subprocess.run([sys.executable, "-m", "benchmarks.lateness", "--rows", "20000", "--repeat", "1",
                          "--queries", "k-OI,K-OS"], capture_output=True, text=True, check=True, timeout=300).stdout
    rows = [line.strip("|").split("|") for line in out.splitlines() if line.startswith("| k") or line.startswith("| K")]
    assert [r[0].strip() for r in rows] == ["k-OI", "K-OS"]
    assert all(number(c) > 0 for r in rows for c in r[1:6])
    assert "checked equal to the sorted run's" in out


def test_shuffled_within_stays_within_the_bound_and_keeps_ties():
    times = np.repeat(np.arange(0, 1000, 3), 3)
    table = pa.table({"time": times, "i": np.arange(times.size)})
    out = shuffled_within(table, 10)
    t, i = out["time"].to_numpy(), out["i"].to_numpy()
    assert sorted(i) == list(range(times.size)) and not np.array_equal(i, np.arange(times.size))
    assert all(t[r] >= t[:r].max() - 10 for r in range(1, t.size))  # never more than the bound behind
    for value in np.unique(t):  # equal times keep their order
        assert np.all(np.diff(i[t == value]) > 0)
