"""The memory benchmark (benchmarks.memory) at a tiny size: it runs from the command line,
aggregates every generated tuple (the script checks count totals itself) and reports memory."""

import subprocess
import sys

import pytest

import pyarrow_ops as po
from benchmarks import memory as bench_memory


def test_command_line_prints_tuples_time_and_memory():
    out = subprocess.run(
        [sys.executable, "-m", "benchmarks.memory", "--tuples", "200000", "--inputs", "4",
         "--design", "tumlsc"],
        capture_output=True, text=True, check=True, timeout=300,
    ).stdout.splitlines()
    assert out[0] == "design tumlsc, inputs 4, threads default"
    assert out[1].startswith("tuples 200000  seconds ") and "Mt/s" in out[1]
    assert out[2].startswith("RSS MiB: start ") and "10% " in out[2] and "50% " in out[2]
    assert "100% " in out[2] and "peak (ru_maxrss) " in out[2]
    assert out[3].startswith("T-Gate peak_live_arenas ")


@pytest.mark.parametrize("design", po.DESIGNS)
@pytest.mark.parametrize("time_type", ["int64", "timestamp"])
def test_every_design_aggregates_every_tuple(design, time_type):
    r = bench_memory.run(tuples=200_001, inputs=3, design=design, batch_rows=5000, time_type=time_type)
    assert r["tuples"] == 200_001
    assert set(r["rss_mib"]) == {"start", "10%", "50%", "100%"}
    if design in ("mq", "mqlf", "wiml"):  # no T-Gate
        assert r["peak_live_arenas"] is None
    elif design != "auto":
        assert r["peak_live_arenas"] is not None
    # 243 meters, one reading a second each: ~823 s of readings; 30 s windows every 3 s.
    assert r["output_rows"] > 243 * 800 // 3


def test_inputs_are_generated_lazily_and_sorted():
    gen = bench_memory.meter_input(1, 4, 1000, meters=243, batch_rows=300, time_type=bench_memory.TIME_TYPES["int64"],
                                   seed=0)
    batches = list(gen)
    assert [b.num_rows for b in batches] == [300, 300, 300, 100]
    times = [t for b in batches for t in b.column("time").to_pylist()]
    assert times == sorted(times)
    assert {m % 4 for b in batches for m in b.column("meter").to_pylist()} == {1}
