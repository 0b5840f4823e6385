"""The cost of checkpoints on the multiway aggregation paper's six queries (benchmarks.aggregate's
``QUERIES``) through ``live_aggregate``, printed as markdown.

    python -m benchmarks.checkpoints [--rows 2000000] [--inputs 4] [--snapshots 10] [--repeat 3]
        [--queries k-OI,W-OI] [--design auto]

Per query, in interleaved rounds (each contender's best round counts), tuples per second of a
``live_aggregate`` fed by one producer thread per input (batches of 65,536 rows) and read by a
consumer:
  live          no checkpoints
  checkpointed  ``checkpoint_dir=`` and ``checkpoint_every=`` rows / ``--snapshots``: the rows of
                open windows kept as the run goes, and that many snapshots written (fsynced)
and the ratio, with the snapshots' mean size and the time they took. Every table is checked equal
to the first run's. Only figures of one run compare: the machine's speed is its own.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import threading
import time as clock
from pathlib import Path

import pyarrow as pa

import pyarrow_ops as po
from benchmarks.aggregate import QUERIES, _engine_aggs, workload


def run_live(tables: list[pa.Table], q, design: str, checkpoint_dir: Path | str | None, every: int | None,
             kept: bool = False) -> pa.Table:
    """The query through live_aggregate, a producer thread per input; ``kept``: checkpointable
    (the rows for snapshots kept) even without a checkpoint_dir."""
    live = po.live_aggregate(tables[0].schema, len(tables), time="time", key=q.key,
                             window=po.sliding(q.size_ms, q.advance_ms), aggs=_engine_aggs(q), design=design,
                             checkpoint_dir=checkpoint_dir, checkpoint_every=every, keep_checkpoints=2,
                             checkpointable=kept)

    def produce(i: int) -> None:
        for batch in tables[i].to_batches(max_chunksize=65_536):
            live.push(i, batch)
        live.close(i)

    producers = [threading.Thread(target=produce, args=(i,)) for i in range(len(tables))]
    for p in producers:
        p.start()
    out = pa.Table.from_batches(list(live), schema=live._result.schema)
    for p in producers:
        p.join()
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--inputs", type=int, default=4)
    parser.add_argument("--snapshots", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--queries", default=",".join(QUERIES))
    parser.add_argument("--design", default="auto")
    args = parser.parse_args(argv)
    every = args.rows // args.snapshots
    print(f"# The cost of checkpoints on the paper's queries through live_aggregate: {args.rows:,} tuples, "
          f"{args.inputs} inputs, a snapshot every {every:,} tuples, design {args.design}, best of {args.repeat} "
          f"interleaved rounds, {os.cpu_count()} cores\n")
    print("| query | live Mt/s | checkpointed Mt/s | checkpointed / live | snapshots | mean snapshot MiB |")
    print("|---|---:|---:|---:|---:|---:|")
    root = Path(tempfile.mkdtemp(prefix="pyarrow-ops-checkpoints-"))
    try:
        for qid in args.queries.split(","):
            q = QUERIES[qid]
            tables = workload(q.dataset, args.rows, args.inputs)
            best = {"live": float("inf"), "checkpointed": float("inf")}
            reference, sizes, count = None, [], 0
            for r in range(args.repeat):
                for c in best:
                    directory = root / f"{qid}-{r}" if c == "checkpointed" else None
                    start = clock.perf_counter()
                    out = run_live(tables, q, args.design, directory, every if directory else None)
                    best[c] = min(best[c], clock.perf_counter() - start)
                    if reference is None:
                        reference = out
                    else:
                        assert out.equals(reference), f"{qid}: {c} differs"
                    if directory is not None:
                        count = int(sorted(p.name for p in directory.iterdir() if p.name.isdigit())[-1])
                        sizes += [sum(f.stat().st_size for f in p.iterdir()) for p in directory.iterdir()
                                  if p.name.isdigit()]
                        shutil.rmtree(directory)
            rate = {c: args.rows / best[c] / 1e6 for c in best}
            mean = sum(sizes) / len(sizes) / 2**20 if sizes else 0.0
            print(f"| {qid} | {rate['live']:.2f} | {rate['checkpointed']:.2f} | "
                  f"{rate['checkpointed'] / rate['live']:.2f} | {count} | {mean:.1f} |", flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print("\nEvery table was checked equal to the first run's.")


if __name__ == "__main__":
    main()
