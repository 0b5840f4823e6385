"""The merge against Polars (concat, then a stable sort by time), side by side on the same data in one process.

    python -m benchmarks.merge [--rows 2000000] [--inputs 4 20] [--repeat 5] [--seed 0]

The machine is shared and noisy, so what counts is the ratio between tools measured together,
not absolute numbers.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import polars as pl
import pyarrow as pa

from pyarrow_ops.datasets import smart_meter_readings
from pyarrow_ops.merge import merge


@dataclass(frozen=True)
class MergeComparison:
    inputs: int
    rows: int
    engine_seconds: float  # median over repeats
    polars_seconds: float
    identical: bool  # the two results are equal, row for row

    @property
    def engine_tuples_per_s(self) -> float:
        return self.rows / self.engine_seconds

    @property
    def polars_tuples_per_s(self) -> float:
        return self.rows / self.polars_seconds

    @property
    def speedup(self) -> float:
        """Engine throughput over Polars throughput (>1: the engine is faster)."""
        return self.polars_seconds / self.engine_seconds


def _median_seconds(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def compare_merge(
    rows: int = 2_000_000, inputs: Sequence[int] = (4, 20), repeat: int = 5, seed: int = 0
) -> list[MergeComparison]:
    """pyarrow_ops.merge(...).to_arrow() against polars.concat(...).sort(time, maintain_order=True).

    A stable sort of the concatenation orders ties by input, then position: the same merged order,
    so the results are checked equal before timing.
    """
    out = []
    for k in inputs:
        tables = smart_meter_readings(rows=rows, concentrators=k, seed=seed)
        frames = [pl.from_arrow(t) for t in tables]

        def run_engine() -> pa.Table:
            return merge(tables, time="time").to_arrow()

        def run_polars() -> pl.DataFrame:
            return pl.concat(frames).sort("time", maintain_order=True)

        identical = pl.from_arrow(run_engine()).equals(run_polars())  # type: ignore[union-attr]
        out.append(
            MergeComparison(
                inputs=k,
                rows=rows,
                engine_seconds=_median_seconds(run_engine, repeat),
                polars_seconds=_median_seconds(run_polars, repeat),
                identical=identical,
            )
        )
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.merge", description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--inputs", type=int, nargs="+", default=[4, 20])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    print(f"merge throughput, {args.rows:,} tuples, median of {args.repeat} runs each")
    print(f"{'inputs':>6}  {'pyarrow-ops t/s':>16}  {'polars concat+sort t/s':>22}  {'ratio':>6}  identical")
    for r in compare_merge(rows=args.rows, inputs=args.inputs, repeat=args.repeat, seed=args.seed):
        print(
            f"{r.inputs:>6}  {r.engine_tuples_per_s:>16,.0f}  {r.polars_tuples_per_s:>22,.0f}  "
            f"{r.speedup:>6.2f}  {r.identical}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
