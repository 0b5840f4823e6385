"""Kill and restore: runs a query in a subprocess that checkpoints as it writes its output file,
kills it with SIGKILL at random moments (and, in some runs, from inside a checkpoint's or the
sink's fsync, so kills land while a snapshot or the output is being written), restarts it from
its newest checkpoint each time until it finishes, and compares the output file byte for byte
with an uninterrupted run's.

    python -m benchmarks.kill_restore --kills 200          # every scenario, 200 kills in all
    python -m benchmarks.kill_restore --kills 20 --only live-mq,pipeline

Prints, per scenario, the kills (by the driver / from inside a write), the restarts, and whether
the output matched; exits 1 on any divergence. tests/python/test_kill_restore.py runs a few.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

SCENARIOS = ("live-mq", "live-mqlf", "live-tumlsc", "live-sliced", "live-tumlmc", "live-wiml", "live-lateness",
             "live-sessions", "pipeline", "pipeline-parquet", "graph", "live-pipeline")
SCHEMA = pa.schema([("t", pa.int64()), ("k", pa.string()), ("v", pa.float64())])


def _inputs(scenario: str, rows: int) -> list[pa.Table]:
    """The scenario's inputs, the same in every process."""
    rng = np.random.default_rng(7)
    out = []
    for _ in range(3):
        times = np.cumsum(rng.integers(0, 3, rows)).astype(np.int64)
        if scenario in ("live-lateness", "live-pipeline"):  # out of order within 40, a few rows beyond it
            from benchmarks.lateness import arrival_within

            times = times[arrival_within(times, 40)]
            times[rng.random(rows) < 0.002] -= 500
        keys = pa.array(np.array([f"user{i}" for i in range(40)])[rng.integers(0, 40, rows)])
        out.append(pa.table({"t": times, "k": keys, "v": rng.normal(0, 10, rows)}, schema=SCHEMA))
    return out


def child(scenario: str, directory: Path, rows: int, every: int, fsync_kill: int | None) -> None:
    """One process of the run: resumes from the newest checkpoint if there is one."""
    import pyarrow_ops as po
    from pyarrow_ops import col

    print("ready", flush=True)  # imported: the driver times its kill from here, not during the import
    if fsync_kill is not None:  # die inside the n-th fsync: a snapshot or the output half written
        real, calls = os.fsync, [0]

        def fsync(fd: int) -> None:
            calls[0] += 1
            if calls[0] == fsync_kill:
                os.kill(os.getpid(), signal.SIGKILL)
            real(fd)

        os.fsync = fsync  # type: ignore[assignment]
    checkpoints = directory / "checkpoints"
    resume = checkpoints.is_dir() and any(p.name.isdigit() for p in checkpoints.iterdir())
    inputs = _inputs(scenario, rows)
    out = directory / ("out.parquet" if scenario.endswith("parquet") else "out.arrow")
    if scenario == "live-pipeline":
        _live_pipeline(inputs, directory, out, checkpoints, every, resume)
        return
    if scenario.startswith("live"):
        if resume:
            live = po.restore(checkpoints)
        else:
            design = {"live-lateness": "auto", "live-sessions": "tumlsc"}.get(scenario, scenario.split("-")[1])
            window = po.session(15) if scenario == "live-sessions" else po.sliding(200, 50)
            lateness = {"lateness": 40, "late": "drop"} if scenario == "live-lateness" else {}
            # With lateness, no first: every row is folded into window states at once; the others
            # fold only the rows every input's promise has passed.
            aggs = {"n": po.count(), "s": po.sum("v")} | ({} if lateness else {"first": po.first("v")})
            live = po.live_aggregate(SCHEMA, 3, time="t", key="k", window=window, aggs=aggs,
                                     design=design, checkpoint_dir=checkpoints, checkpoint_every=every, **lateness)
        live._compact_rows = 1000  # fold often, so that snapshots hold window states
        positions = live.positions

        def produce(i: int) -> None:
            table = inputs[i].slice(positions[i])
            for batch in table.to_batches(max_chunksize=499):
                live.push(i, batch)
            if not live.closed[i]:
                live.close(i)

        producers = [threading.Thread(target=produce, args=(i,)) for i in range(3)]
        for p in producers:
            p.start()
        live.write_ipc(out, rows_per_batch=1000)  # a restored run resumes the same file
        for p in producers:
            p.join()
        return
    if resume:
        result = po.restore(checkpoints, inputs=[inputs] if scenario != "graph" else [inputs, inputs[:2]])
        result.write_ipc() if not scenario.endswith("parquet") else result.write_parquet()
        return
    p = po.Pipeline(inputs, time="t").filter(col("v") > -5).sessionize("k", gap=20).running("k", {"n": po.count()})
    kw = dict(rows_per_batch=1000, checkpoint_dir=checkpoints, checkpoint_every=every)
    if scenario == "graph":
        other = po.Pipeline(inputs[:2], time="t").window_aggregate(po.tumbling(100), {"s": po.sum("v")}, key="k")
        po.run({"a": p, "b": other}, threads=2).write_ipc({"a": out, "b": directory / "out-b.arrow"}, **kw)
    elif scenario == "pipeline":
        p.run(threads=2).write_ipc(out, **kw)
    else:
        p.run(threads=2).write_parquet(out, **kw)


def _live_pipeline(inputs: list[pa.Table], directory: Path, out: Path, checkpoints: Path, every: int,
                   resume: bool) -> None:
    """A pipeline over three journaled live inputs, out of order within a bound (rows later than it
    dropped): its producers push on from where the restored journals end."""
    import pyarrow_ops as po
    from pyarrow_ops import col

    lives = [po.LiveInput(SCHEMA, journal=directory / f"journal-{i}") for i in range(3)]
    p = (po.Pipeline(lives, time="t", lateness=40, late="drop").filter(col("v") > -5)
         .sessionize("k", gap=20).running("k", {"n": po.count(), "s": po.sum("v")}))
    result = po.restore(checkpoints, inputs=[lives]) if resume else p.run(threads=2)

    def produce(i: int) -> None:
        for batch in inputs[i].slice(lives[i].position).to_batches(max_chunksize=499):
            lives[i].push(batch)
        if not lives[i].closed:
            lives[i].close()

    producers = [threading.Thread(target=produce, args=(i,)) for i in range(3)]
    for t in producers:
        t.start()
    if resume:
        result.write_ipc()
    else:
        result.write_ipc(out, rows_per_batch=1000, checkpoint_dir=checkpoints, checkpoint_every=every)
    for t in producers:
        t.join()


def _command(scenario: str, directory: Path, rows: int, every: int, fsync_kill: int | None) -> list[str]:
    return [sys.executable, "-m", "benchmarks.kill_restore", "--child", scenario, "--dir", str(directory),
            "--rows", str(rows), "--every", str(every)] + ([] if fsync_kill is None else ["--fsync-kill", str(fsync_kill)])


def _outputs(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir()) if p.name.startswith("out")
            and not p.name.endswith((".spool", ".tmp"))}


def _start(command: list[str], env: dict[str, str]) -> subprocess.Popen[str]:
    proc = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    proc.stdout.readline()  # "ready" (or "" if it died first)
    return proc


def scenario_run(scenario: str, kills: int, rows: int, every: int, seed: int, root: Path) -> dict[str, int]:
    """The uninterrupted run, then runs killed until `kills` kills (each run restarted from its
    newest checkpoint until it finishes); every run's output compared with the uninterrupted one."""
    rng = random.Random(seed)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).resolve().parent.parent),
                                                        os.environ.get("PYTHONPATH", "")])}
    whole = root / f"{scenario}-whole"
    whole.mkdir()
    proc = _start(_command(scenario, whole, rows, every, None), env)
    started = time.perf_counter()
    if proc.wait() != 0:
        raise RuntimeError(f"{scenario}: the uninterrupted run failed")
    duration = time.perf_counter() - started
    expected = _outputs(whole)
    by_driver = from_inside = starts = runs = divergences = 0
    while runs == 0 or by_driver + from_inside < kills:
        runs += 1
        killed = root / f"{scenario}-killed-{runs}"
        killed.mkdir()
        while True:
            starts += 1
            inside = rng.randrange(1, 40) if by_driver + from_inside < kills and rng.random() < 0.3 else None
            proc = _start(_command(scenario, killed, rows, every, inside), env)
            if by_driver + from_inside < kills and inside is None:
                try:
                    proc.wait(timeout=rng.uniform(0.0, duration))
                except subprocess.TimeoutExpired:
                    proc.send_signal(signal.SIGKILL)
            code = proc.wait()
            if code == -signal.SIGKILL:
                by_driver += inside is None
                from_inside += inside is not None
                continue
            if code != 0:
                raise RuntimeError(f"{scenario}: the run failed with exit code {code} (start {starts})")
            break
        if _outputs(killed) != expected:
            divergences += 1
            print(f"{scenario}: run {runs} diverged; kept in {killed}", flush=True)
        else:
            shutil.rmtree(killed, ignore_errors=True)
    return {"kills": by_driver + from_inside, "by_driver": by_driver, "inside_fsync": from_inside, "starts": starts,
            "runs": runs, "divergences": divergences, "bytes": sum(len(b) for b in expected.values())}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kills", type=int, default=200, help="kills in all, spread over the scenarios")
    parser.add_argument("--only", default=",".join(SCENARIOS))
    parser.add_argument("--rows", type=int, default=150_000, help="rows per input")
    parser.add_argument("--every", type=int, default=20_000, help="checkpoint every so many tuples (rows out for pipelines)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--dir", help=argparse.SUPPRESS)
    parser.add_argument("--fsync-kill", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(args.child, Path(args.dir), args.rows, args.every, args.fsync_kill)
        return 0
    scenarios = args.only.split(",")
    root = Path(tempfile.mkdtemp(prefix="pyarrow-ops-kills-"))
    total = divergences = 0
    try:
        for k, scenario in enumerate(scenarios):
            share = args.kills // len(scenarios) + (1 if k < args.kills % len(scenarios) else 0)
            r = scenario_run(scenario, share, args.rows, args.every, args.seed + k, root)
            total += r["kills"]
            divergences += r["divergences"]
            print(f"{scenario:17s} kills {r['kills']:4d} (by the driver {r['by_driver']}, inside an fsync "
                  f"{r['inside_fsync']}), starts {r['starts']}, runs {r['runs']}, output {r['bytes']} bytes, "
                  f"divergences {r['divergences']}", flush=True)
    finally:
        if not divergences:
            shutil.rmtree(root, ignore_errors=True)
    print(f"total kills {total}, divergences {divergences}")
    return 1 if divergences else 0


if __name__ == "__main__":
    sys.exit(main())
