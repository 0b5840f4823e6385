"""What checkpoints cost a pipeline run, and what a restore costs, printed as markdown.

    python -m benchmarks.restore [--rows 10000000] [--inputs 1,4] [--pipelines sessions,windows]
        [--snapshots 5] [--threads 2] [--repeat 3]

Per pipeline of benchmarks.pipelines (its clickstream, dealt to 1 or 4 inputs, in batches of 65,536
rows) written to an Arrow IPC
file by ``write_ipc``, in interleaved rounds (each contender's best round counts):
  plain         no checkpoints
  checkpointed  ``checkpoint_dir=``, ``checkpoint_every=`` output rows / ``--snapshots`` (each a cut:
                the operators' state, docs/checkpoints.md)
  restore       ``po.restore`` from the last snapshot of a checkpointed run, written to the end
  replay        the same from that snapshot without its cut (rewritten as a snapshot that restores by
                replay, as every snapshot of a run did before cuts): the run again from the start
Every restored file is checked byte for byte against the plain run's. The restores' seconds are
wall time from the call to the file's end; the input rows the cut had not read yet are in the table.
Only figures of one run compare: the machine's speed is its own.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time as clock
from pathlib import Path

import pyarrow as pa

import pyarrow_ops as po
from benchmarks.graphs import clickstream
from benchmarks.pipelines import engine_pipeline, split
from pyarrow_ops.checkpoint import Snapshot
from pyarrow_ops.checkpoint import write as write_snapshot


def without_cut(snapshot: Path, to: Path) -> Path:
    """A copy of `snapshot` without its cut: a snapshot that restores by replay."""
    snap = Snapshot(snapshot)
    state = {k: v for k, v in snap.state.items() if k != "cut"}
    tables = {name[:-len(".arrow")]: snap.table(name[:-len(".arrow")]) for name in snap._data
              if name.endswith(".arrow") and not name.startswith("cut-")}
    return write_snapshot(to, snap.kind, snap.query, state, tables, {"query.pickle": snap.blob("query.pickle")})


def snapshot_mib(path: Path) -> float:
    return sum(f.stat().st_size for f in path.iterdir()) / 2**20


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--inputs", default="1,4")
    parser.add_argument("--pipelines", default="sessions,windows")
    parser.add_argument("--snapshots", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    print(f"# Checkpoints and restores of pipeline runs: {args.rows:,} tuples, {args.snapshots} snapshots per "
          f"run (a snapshot every 1/{args.snapshots} of the output's rows), {args.threads} threads, best of {args.repeat} interleaved rounds, {os.cpu_count()} cores\n")
    print("| pipeline | inputs | plain s | checkpointed s | plain / checkpointed | snapshots | last snapshot MiB | "
          "input rows after it | restore s | replay s | replay / restore |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    source = clickstream(args.rows)
    root = Path(tempfile.mkdtemp(prefix="pyarrow-ops-restore-"))
    try:
        for name in args.pipelines.split(","):
            for n in (int(x) for x in args.inputs.split(",")):
                # In batches of 65,536 rows, as files and readers give them: a run reads a batch at
                # a time, so its snapshots fall inside the input (a table of one chunk is read whole).
                inputs = [pa.Table.from_batches(t.to_batches(max_chunksize=65_536))
                          for t in (split(source, n) if n > 1 else [source])]
                best = dict.fromkeys(("plain", "checkpointed", "restore", "replay"), float("inf"))
                whole = root / "whole.arrow"
                count, size, after = 0, 0.0, 0
                for r in range(args.repeat):
                    start = clock.perf_counter()
                    engine_pipeline(name, inputs).run(threads=args.threads).write_ipc(whole)
                    best["plain"] = min(best["plain"], clock.perf_counter() - start)
                    if r == 0:  # checkpoint_every counts rows written: the output's
                        with pa.ipc.open_stream(whole) as reader:
                            every = max(1, sum(b.num_rows for b in reader) // args.snapshots)
                    out, ck = root / "out.arrow", root / f"ck-{r}"
                    start = clock.perf_counter()
                    engine_pipeline(name, inputs).run(threads=args.threads).write_ipc(
                        out, checkpoint_dir=ck, checkpoint_every=every, keep_checkpoints=1)
                    best["checkpointed"] = min(best["checkpointed"], clock.perf_counter() - start)
                    last = sorted(p for p in ck.iterdir() if p.name.isdigit())[-1]
                    count, size = int(last.name), snapshot_mib(last)
                    after = args.rows - sum(map(sum, Snapshot(last).state["cut"]["rows"]))  # input rows still to read
                    replay = without_cut(last, root / f"replay-{r}")
                    for contender, snapshot in (("restore", last), ("replay", replay)):
                        start = clock.perf_counter()
                        po.restore(snapshot, inputs=inputs).write_ipc()
                        best[contender] = min(best[contender], clock.perf_counter() - start)
                        assert out.read_bytes() == whole.read_bytes(), f"{name}, {n} inputs: {contender} differs"
                    shutil.rmtree(ck)
                    shutil.rmtree(replay)
                print(f"| {name} | {n} | {best['plain']:.2f} | {best['checkpointed']:.2f} | "
                      f"{best['plain'] / best['checkpointed']:.2f} | {count} | {size:.1f} | {after:,} | "
                      f"{best['restore']:.2f} | {best['replay']:.2f} | {best['replay'] / best['restore']:.2f} |",
                      flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print("\nEvery restored file was checked equal, byte for byte, to the plain run's.")


if __name__ == "__main__":
    main()
