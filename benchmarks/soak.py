"""A long live run: many tuples through ``live_aggregate`` with ``lateness=`` and an idle input, its
resident memory sampled as it goes, printed as markdown.

    python -m benchmarks.soak [--tuples 100000000] [--inputs 4] [--batch 65536] [--lateness-ms 2000]
        [--idle-timeout 0.5] [--checkpoint-every-s 10]

``--inputs - 1`` producer threads push readings (243 meters, one reading per meter and millisecond
step, times shuffled within the bound: arrival order by time plus a jitter of up to the bound, so
nothing is late) in batches; the last input pushes one row and then stays silent, so only
``idle_timeout`` lets windows close. A consumer counts the window rows (10 s tumbling windows per
meter: count and sum). A sampler reads VmRSS from /proc every 0.2 s. Printed: throughput, RSS at
the start (after the first batch), at 50 % and 100 % of the tuples, and its peak; the windows and
late rows seen; the idle periods; the snapshots (``checkpoint_every`` a timedelta of that many
seconds, into a temporary ``checkpoint_dir``, the last 3 kept): how many, their mean size.
"""

from __future__ import annotations

import argparse
import datetime as dt
import shutil
import tempfile
import threading
import time as clock
from pathlib import Path

import numpy as np
import pyarrow as pa

import pyarrow_ops as po
from benchmarks.lateness import arrival_within
from benchmarks.memory import rss_mib

METERS = 243


def batch_at(first_step: int, rows: int, bound: int, rng: np.random.Generator) -> pa.RecordBatch:
    """`rows` readings from step `first_step` on (METERS per millisecond step), arriving shuffled
    within `bound` ms (benchmarks.lateness.arrival_within)."""
    index = np.arange(rows, dtype=np.int64)
    times = first_step + index // METERS
    order = arrival_within(times, bound)
    return pa.record_batch({"time": times[order], "meter": (index % METERS)[order],
                            "kwh": rng.random(rows)})


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tuples", type=int, default=100_000_000)
    parser.add_argument("--inputs", type=int, default=4)
    parser.add_argument("--batch", type=int, default=65_536)
    parser.add_argument("--lateness-ms", type=int, default=2_000)
    parser.add_argument("--idle-timeout", type=float, default=0.5)
    parser.add_argument("--checkpoint-every-s", type=float, default=10.0, help="0: no checkpoints")
    args = parser.parse_args(argv)
    directory = tempfile.mkdtemp(prefix="pyarrow-ops-soak-") if args.checkpoint_every_s > 0 else None
    try:
        soak(args, directory)
    finally:
        if directory is not None:
            shutil.rmtree(directory, ignore_errors=True)


def soak(args: argparse.Namespace, directory: str | None) -> None:
    producers = args.inputs - 1
    batches_each = max(1, args.tuples // (producers * args.batch))
    total = batches_each * producers * args.batch
    schema = pa.schema([("time", pa.int64()), ("meter", pa.int64()), ("kwh", pa.float64())])
    live = po.live_aggregate(schema, args.inputs, time="time", key="meter", window=po.tumbling(10_000),
                             aggs={"n": po.count(), "kwh": po.sum("kwh")}, lateness=args.lateness_ms, late="drop",
                             idle_timeout=args.idle_timeout, checkpoint_dir=directory,
                             checkpoint_every=dt.timedelta(seconds=args.checkpoint_every_s) if directory else None)
    pushed = [0] * producers
    samples: list[tuple[float, int, float]] = []  # (seconds, tuples pushed, RSS MiB)
    done = threading.Event()
    windows = [0]

    def consume():
        for b in live:
            windows[0] += b.num_rows

    def produce(i):
        rng = np.random.default_rng(i)
        steps_per_batch = args.batch // METERS
        for k in range(batches_each):
            live.push(i, batch_at(k * steps_per_batch, args.batch, args.lateness_ms, rng))
            pushed[i] += args.batch
        live.close(i)

    def sample():
        while not done.wait(0.2):
            samples.append((clock.perf_counter() - start, sum(pushed), rss_mib()))

    live.push(args.inputs - 1, pa.record_batch({"time": [0], "meter": [0], "kwh": [0.0]}, schema=schema))
    threads = [threading.Thread(target=consume)] + [threading.Thread(target=produce, args=(i,)) for i in range(producers)]
    start = clock.perf_counter()
    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    for t in threads[1:]:
        t.start()
    threads[0].start()
    for t in threads[1:]:
        t.join()
    live.close(args.inputs - 1)
    threads[0].join()
    elapsed = clock.perf_counter() - start
    done.set()
    samples.append((elapsed, total, rss_mib()))

    def at(share: float) -> float:
        return next(r for s, n, r in samples if n >= share * total)

    stats = live.stats()
    print(f"# Soak: {total:,} tuples, {producers} producers + 1 idle input, batches of {args.batch:,}, "
          f"lateness {args.lateness_ms} ms, idle_timeout {args.idle_timeout} s\n")
    print("| tuples | seconds | M tuples/s | RSS start MiB | RSS 50% | RSS 100% | RSS peak | window rows | late rows |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    first = next((r for s, n, r in samples if n > 0), samples[0][2])
    print(f"| {total:,} | {elapsed:.1f} | {total / elapsed / 1e6:.2f} | {first:.0f} | {at(0.5):.0f} | {at(1.0):.0f} | "
          f"{max(r for _, _, r in samples):.0f} | {windows[0]:,} | {sum(stats['late'][0]['rows']):,} |")
    print(f"\nIdle periods: {stats['idle']}")
    if directory is not None:
        kept = [p for p in Path(directory).iterdir() if p.name.isdigit()]
        taken = max((int(p.name) for p in kept), default=0)
        mean = sum(f.stat().st_size for p in kept for f in p.iterdir()) / max(len(kept), 1) / 2**20
        print(f"\nCheckpoints every {args.checkpoint_every_s:g} s: {taken} taken, the last {len(kept)} kept, "
              f"mean size {mean:.1f} MiB")


if __name__ == "__main__":
    main()
