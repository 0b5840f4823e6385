"""The merge against Polars (concat, then a stable sort by time), side by side on the same data in one process.

    python -m benchmarks.merge [--rows 2000000] [--inputs 4 20] [--threads 2] [--repeat 5] [--seed 0]

The machine is shared and noisy, so what counts is the ratio between tools measured together,
not absolute numbers: the contenders run in interleaved rounds (the engine on one thread, the
engine on --threads threads, Polars on its own pool), and each keeps its best round.
"""

from __future__ import annotations

import argparse
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
    threads: int
    engine_seconds: float  # best round, on `threads` threads
    engine_one_thread_seconds: float  # best round, on one thread
    polars_seconds: float
    identical: bool  # the results are equal, row for row, to Polars' and to each other

    @property
    def engine_tuples_per_s(self) -> float:
        return self.rows / self.engine_seconds

    @property
    def engine_one_thread_tuples_per_s(self) -> float:
        return self.rows / self.engine_one_thread_seconds

    @property
    def polars_tuples_per_s(self) -> float:
        return self.rows / self.polars_seconds

    @property
    def speedup(self) -> float:
        """Engine throughput (on `threads` threads) over Polars throughput (>1: the engine is faster)."""
        return self.polars_seconds / self.engine_seconds


def _seconds(fn: Callable[[], object]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def compare_merge(
    rows: int = 2_000_000, inputs: Sequence[int] = (4, 20), repeat: int = 5, seed: int = 0, threads: int = 2
) -> list[MergeComparison]:
    """pyarrow_ops.merge(...).to_arrow() against polars.concat(...).sort(time, maintain_order=True).

    A stable sort of the concatenation orders ties by input, then position: the same merged order,
    so the results are checked equal before timing. `repeat` interleaved rounds; best of each.
    """
    out = []
    for k in inputs:
        tables = smart_meter_readings(rows=rows, concentrators=k, seed=seed)
        frames = [pl.from_arrow(t) for t in tables]

        def run_engine(n: int) -> Callable[[], pa.Table]:
            return lambda: merge(tables, time="time", threads=n).to_arrow()

        def run_polars() -> pl.DataFrame:
            return pl.concat(frames).sort("time", maintain_order=True)

        want = run_polars()
        identical = all(pl.from_arrow(run_engine(n)()).equals(want) for n in {1, threads})  # type: ignore[union-attr]
        contenders = {"one": run_engine(1), "many": run_engine(threads), "polars": run_polars}
        best = {name: float("inf") for name in contenders}
        for _ in range(repeat):
            for name, fn in contenders.items():
                best[name] = min(best[name], _seconds(fn))
        out.append(
            MergeComparison(
                inputs=k, rows=rows, threads=threads, engine_seconds=best["many"],
                engine_one_thread_seconds=best["one"], polars_seconds=best["polars"], identical=identical,
            )
        )
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.merge", description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--inputs", type=int, nargs="+", default=[4, 20])
    parser.add_argument("--threads", type=int, default=2, help="the engine's threads (it also runs on one)")
    parser.add_argument("--repeat", type=int, default=5, help="interleaved rounds; each contender's best counts")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    print(f"merge throughput, {args.rows:,} tuples, best of {args.repeat} interleaved rounds; "
          f"pyarrow-ops on {args.threads} threads (and on 1), Polars on its pool of {pl.thread_pool_size()}")
    print(f"{'inputs':>6}  {'pyarrow-ops t/s':>16}  {'polars concat+sort t/s':>22}  {'ratio':>6}  identical"
          f"  {'1 thread t/s':>14}  {'ratio':>6}")
    for r in compare_merge(rows=args.rows, inputs=args.inputs, repeat=args.repeat, seed=args.seed,
                           threads=args.threads):
        print(
            f"{r.inputs:>6}  {r.engine_tuples_per_s:>16,.0f}  {r.polars_tuples_per_s:>22,.0f}  "
            f"{r.speedup:>6.2f}  {r.identical!s:>9}  {r.engine_one_thread_tuples_per_s:>14,.0f}  "
            f"{r.polars_seconds / r.engine_one_thread_seconds:>6.2f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
