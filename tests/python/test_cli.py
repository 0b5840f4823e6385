import re
import subprocess
import sys

import polars as pl

from pyarrow_ops.datasets import smart_meter_readings


def test_demo_shows_aggregation_pipeline_and_ratio_against_polars():
    out = subprocess.run(
        [sys.executable, "-m", "pyarrow_ops", "demo", "--rows", "30000", "--meters", "500", "--inputs", "4",
         "--seed", "0", "--repeat", "2", "--preview", "5"],
        capture_output=True, text=True, check=True, timeout=300,
    ).stdout
    # 1. the merge
    assert "30,000 tuples in " in out
    assert "sorted by time: True" in out
    # 2. the aggregation: 500 meters, 60 readings each, one every 15 min; a 1 h window advancing 15 min holds
    # a meter's reading in 4 windows, so each meter has 60 + 3 windows (rows), the first of them with 1, 2, 3
    # and then 4 readings.
    assert "2. Sliding-window aggregation: po.aggregate(" in out
    assert f"{500 * 63:,} window rows" in out
    aggregation = out.split("2. Sliding-window aggregation")[1].split("3. The same aggregation in Polars")[0]
    assert "datetime[ms, UTC]" in aggregation  # the Polars preview
    cells = [[c.strip(" │") for c in line.split("┆")] for line in aggregation.splitlines() if "┆" in line]
    assert cells[0] == ["window_start", "window_end", "meter", "readings", "mean_kwh", "max_kwh"]
    assert [row[3] for row in cells[3:]] == ["1", "2", "3", "4", "4"]  # below the names, "---" and the types
    assert re.search(r"30,000 tuples in [0-9.]+ s, [0-9.]+ M tuples/s \(best of 2; design '\w+'\); "
                     r"the same table in every run: True", aggregation)
    # 3. Polars: every formulation's table equal to the engine's, and the ratio
    polars = out.split("3. The same aggregation in Polars")[1].split("4. Pipeline")[0]
    verdicts = re.findall(r"'(\w+)' \([^)]*\):\n +[0-9.]+ s, [0-9.]+ M tuples/s \(best of [12]\); table (\w+)", polars)
    assert {name for name, _ in verdicts} == {"group_by_dynamic", "explode"}
    assert all(verdict in ("identical", "equal") for _, verdict in verdicts), polars
    assert re.search(r"pyarrow-ops / Polars: [0-9.]+x the throughput of Polars' fastest formulation here "
                     r"\('(group_by_dynamic|explode)'\)", polars)
    # 4. the pipeline, its Polars preview and throughput
    pipeline = out.split("4. Pipeline")[1]
    spells = re.search(r"([0-9,]+) low readings in ([0-9,]+) spells over ([0-9,]+) meters", pipeline)
    assert spells, pipeline
    # The same spells from the generated readings in Polars: a meter's readings under 0.02 kWh in time order,
    # a new spell where more than 20 minutes passed since its previous low reading.
    tables = smart_meter_readings(rows=30_000, meters=500, concentrators=4, period_ms=900_000, seed=0)
    low = pl.concat([pl.from_arrow(t) for t in tables]).filter(pl.col("kwh") < 0.02).sort("meter", "time")
    gap = pl.col("time").diff().over("meter") > pl.duration(minutes=20)
    spell = low.with_columns(spell=gap.fill_null(True).cum_sum()).group_by("spell").len()
    assert 0 < spell.height < low.height  # some spells have several readings
    assert [int(g.replace(",", "")) for g in spells.groups()] == [low.height, spell.height, low["meter"].n_unique()]
    assert "│ time" in pipeline and "spell_kwh" in pipeline
    assert re.search(r"30,000 tuples in [0-9.]+ s, [0-9.]+ M tuples/s \(best of 2\); "
                     r"the same table in every run: True", pipeline)


def test_demo_without_the_benchmarks_package_runs_without_the_polars_comparison():
    # An installed package has no repository beside it, so the benchmarks package (the peers' formulations) is
    # not there; the development venv's editable install puts the repository on sys.path, hence the block.
    script = ("import sys; sys.modules['benchmarks'] = None; from pyarrow_ops.__main__ import main; "
              "sys.exit(main(['demo', '--rows', '30000', '--meters', '500', '--inputs', '4', '--repeat', '1']))")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "skipped: it uses the peers' formulations of the repository's benchmarks package" in done.stdout
    assert "4. Pipeline" in done.stdout and "the same table in every run: True" in done.stdout
