"""The cost of ``lateness=`` on the multiway aggregation paper's six queries (benchmarks.aggregate's
``QUERIES``), printed as markdown.

    python -m benchmarks.lateness [--rows 2000000] [--inputs 4] [--lateness-ms 5000] [--repeat 3]
        [--queries k-OI,W-OI] [--design auto]

Per query, in interleaved rounds (each contender's best round counts), tuples per second of:
  sorted      ``po.aggregate`` on the sorted inputs, no lateness (what the paper measures)
  bound       the same inputs with ``lateness=`` (every row passes through the reorder buffer, none late)
  disordered  each input's rows shuffled within the bound (arrival order by time plus a jitter of up to the
              bound that depends on the time alone, so equal times keep their order), with ``lateness=``:
              the buffer sorts them back, none late
and the ratios of the last two to the first. Every table is checked equal to the sorted run's.
Only figures of one run compare: the machine's speed is its own.
"""

from __future__ import annotations

import argparse
import os
import time as clock

import numpy as np
import pyarrow as pa

import pyarrow_ops as po
from benchmarks.aggregate import QUERIES, _engine_aggs, workload


def arrival_within(times: np.ndarray, bound: int) -> np.ndarray:
    """An arrival order of rows with these (sorted) times: by time + jitter(time), jitter in
    [0, bound], so a row is never more than the bound behind a row that arrives before it, and
    equal times keep their order."""
    # A multiplicative hash's high bits (a plain product modulo the bound can be monotone in time).
    hashed = (times.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)) >> np.uint64(33)
    jitter = (hashed % np.uint64(bound + 1)).astype(np.int64)
    return np.argsort(times + jitter, kind="stable")


def shuffled_within(table: pa.Table, bound: int) -> pa.Table:
    """The table's rows in the arrival order of :func:`arrival_within`."""
    return table.take(pa.array(arrival_within(table.column("time").cast(pa.int64()).to_numpy(), bound)))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--inputs", type=int, default=4)
    parser.add_argument("--lateness-ms", type=int, default=5_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--queries", default=",".join(QUERIES))
    parser.add_argument("--design", default="auto")
    args = parser.parse_args(argv)
    bound = args.lateness_ms
    print(f"# The cost of lateness= ({bound} ms) on the paper's queries: {args.rows:,} tuples, {args.inputs} inputs, "
          f"design {args.design}, best of {args.repeat} interleaved rounds, {os.cpu_count()} cores\n")
    print("| query | sorted Mt/s | bound Mt/s | bound / sorted | disordered Mt/s | disordered / sorted | "
          "rows out of order |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for qid in args.queries.split(","):
        q = QUERIES[qid]
        tables = workload(q.dataset, args.rows, args.inputs)
        shuffled = [shuffled_within(t, bound) for t in tables]
        moved = sum(int((t.column("time").cast(pa.int64()).to_numpy()[1:] <
                         t.column("time").cast(pa.int64()).to_numpy()[:-1]).sum()) for t in shuffled)
        contenders = {"sorted": (tables, None), "bound": (tables, bound), "disordered": (shuffled, bound)}
        best = {c: float("inf") for c in contenders}
        reference = None
        for _ in range(args.repeat):
            for c, (inputs, lateness) in contenders.items():
                start = clock.perf_counter()
                run = po.aggregate(inputs, time="time", key=q.key, window=po.sliding(q.size_ms, q.advance_ms),
                                   aggs=_engine_aggs(q), design=args.design, lateness=lateness)
                out = run.to_arrow()
                best[c] = min(best[c], clock.perf_counter() - start)
                if reference is None:
                    reference = out
                else:
                    assert out.equals(reference), f"{qid}: {c} differs from the sorted run"
                    assert lateness is None or run.late_counts == [0] * args.inputs, f"{qid}: {c} had late rows"
        rate = {c: args.rows / best[c] / 1e6 for c in contenders}
        print(f"| {qid} | {rate['sorted']:.2f} | {rate['bound']:.2f} | {rate['bound'] / rate['sorted']:.2f} | "
              f"{rate['disordered']:.2f} | {rate['disordered'] / rate['sorted']:.2f} | {moved:,} |", flush=True)
    print("\nEvery table was checked equal to the sorted run's, with no late rows.")


if __name__ == "__main__":
    main()
