"""Benchmark two builds of pyarrow-ops side by side in one run: the project's own benchmark commands,
interleaved in rounds, then a table of their key figures next to each other.

    python asv_bench/compare_builds.py [--before PY] [--after PY] [--rounds 2]
        [--only merge,aggregate,pipeline] [--merge-args=ARGS] [--aggregate-args=ARGS]
        [--pipeline-args=ARGS] [--save DIR] [--timeout S] [--dry-run]

Each build is a Python interpreter with pyarrow-ops installed: by default the baseline worktree's venv
(/work/baseline/.venv, a non-editable install of the commit before the engine work), labelled "before",
and the development venv (/work/main/.venv, the editable install of the working tree), labelled "after".
Any two will do: ``--before /path/bin/python --after /other/bin/python`` (labels with ``--labels a,b``).

Why: the machine is shared and its load comes and goes, so an absolute figure from one session says
little about another session's. Only figures taken in the same run, close together, compare. So every
round runs each command for "before" and right after for "after" (before, after, before, after, ...), and
the summary shows each build's best round. The commands themselves print ratios against peers (Polars,
DuckDB) measured in the same process; those ratios are the sturdiest figures, and the peers' own rates
(the same library in both builds) show how much the machine's load moved between runs.

The commands (merge and aggregate with every setting spelled out, so that both builds run the same
workload even if a default changes in one of them; pipeline's sizes are its module's own):
  merge      python -m benchmarks.merge: merge against polars concat + stable sort, 2M rows, 4 and 20 inputs.
  aggregate  python -m benchmarks.aggregate: design auto on the six paper queries against Polars and
             DuckDB, 2M rows, 1/4/20 inputs, threads auto, one run per contender (--repeat 1: the rounds
             repeat it); no latency or push table (the T-Gate table always runs first).
  pipeline   python -m benchmarks.pipeline: every section (reordering, partitioning, heuristics,
             bars); their throughputs compare engine settings with each other (no external peer there).
The benchmarks live in the repository's ``benchmarks`` package, outside the installed package: a build's
repository is the folder holding its venv (``<repository>/.venv/bin/python``), put on PYTHONPATH for its
commands. A build from before the package existed (no ``benchmarks/`` there, as in the baseline) runs the
same benchmarks under their old names inside pyarrow_ops (``python -m pyarrow_ops bench``,
``pyarrow_ops.bench_aggregate``, ``pyarrow_ops.bench_pipeline``).
``--X-args`` appends arguments to command X; argparse keeps the last value of an option, so they override
the settings above, e.g. ``--merge-args="--rows 200000 --repeat 1"`` or
``--pipeline-args="--sections reorder,partitioning"`` (write ``--X-args=...`` with ``=``: argparse takes a
lone value starting with a dash for an option).

Time, per run on this 2-core machine when it is quiet (about twice under load; estimated from partial runs
and docs/pipeline.md): merge under a minute, aggregate about 4 minutes, pipeline about 4; the default
comparison (2 rounds x 2 builds x 3 commands) about 35 to 40 minutes. For a smoke test (seconds; the
figures mean nothing): ``--only merge --rounds 1 --merge-args="--rows 200000 --repeat 1"``, and for the
others ``--aggregate-args="--rows 20000 --inputs 4"``, ``--pipeline-args=--quick``.

Every command runs in a neutral, empty working directory (a fresh temporary one; ``--cwd`` to choose),
with PYTHONPATH removed and PYTHONSAFEPATH set: ``python -m`` puts the working directory first on
sys.path, and run from /work/main the "before" interpreter would import /work/main/pyarrow_ops, the
"after" code, instead of its own. Before each round a probe imports pyarrow_ops in each interpreter,
prints where it came from, and fingerprints its compiled engine: that also lets an editable install
rebuild its C++ part on import here, outside the timed runs, and shows when a build changed between rounds
(someone edited the sources meanwhile) or when both labels import the same code.

Every run's output is printed as it comes, under a header naming build, round and command (and saved
with ``--save DIR``). Tables that cannot be parsed are only missing from the summary; the raw outputs
are all there.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

DEFAULT_BEFORE = "/work/baseline/.venv/bin/python"
DEFAULT_AFTER = "/work/main/.venv/bin/python"
HIGHER, LOWER = "higher", "lower"  # which way a figure is better


@dataclass
class Figure:
    name: str
    value: float
    goal: str = HIGHER
    note: str = ""  # shown beside the value, e.g. the design auto chose


# --- parsers: each takes one run's output and returns the figures it recognises ----------------------


def _number(text: str) -> float:
    return float(text.replace(",", ""))


def _block(lines: list[str], title: str) -> list[str]:
    """The lines after the one starting with `title` (past its header line) up to the next blank line."""
    for i, line in enumerate(lines):
        if line.startswith(title):
            out = []
            for row in lines[i + 2:]:
                if not row.strip():
                    break
                out.append(row)
            return out
    return []


def parse_merge(text: str) -> list[Figure]:
    # inputs, pyarrow-ops t/s, polars t/s, ratio, identical[, 1-thread t/s, ratio] (benchmarks.merge.main)
    row = re.compile(r"^\s*(\d+)\s+([\d,]+)\s+([\d,]+)\s+([\d.]+)\s+(True|False)(\s+[\d,]+\s+[\d.]+)?\s*$")
    figures = []
    for line in text.splitlines():
        m = row.match(line)
        if not m:
            continue
        k, note = m[1], "" if m[5] == "True" else "NOT identical"
        figures += [
            Figure(f"{k} inputs: pyarrow-ops Mt/s", _number(m[2]) / 1e6, note=note),
            Figure(f"{k} inputs: polars Mt/s (peer)", _number(m[3]) / 1e6),
            Figure(f"{k} inputs: pyarrow-ops / polars", float(m[4]), note=note),
        ]
    return figures


PEER_NAMES = {"polars", "duckdb", "spark"}  # their cells are two words: rate and formulation


def parse_aggregate(text: str) -> list[Figure]:
    lines = text.splitlines()
    figures = []
    for line in _block(lines, "T-Gate vs scanning skip list"):
        cells = line.split()  # inputs, T-Gate, scan, ratio
        if len(cells) == 4:
            figures += [Figure(f"T-Gate {cells[0]} inputs: Mt/s", float(cells[1])),
                        Figure(f"T-Gate {cells[0]} inputs: T-Gate / scan", float(cells[3]))]
    # The throughput table's columns follow its header: query window inputs threads, one column per
    # design, two per peer (rate, formulation), best/peer, then auto/peer and chosen when auto ran.
    for i, line in enumerate(lines):
        if line.startswith("Multiway aggregation") and i + 1 < len(lines):
            header = lines[i + 1].split()
            break
    else:
        return figures
    if header[:4] != ["query", "window", "inputs", "threads"] or "best/peer" not in header:
        return figures
    names = header[4:header.index("best/peer")]
    has_auto = "auto/peer" in header
    for line in _block(lines, "Multiway aggregation"):
        cells = line.split()
        try:
            qid, _, k, threads = cells[:4]
            pos, rates = 4, {}
            for name in names:
                rates[name] = None if cells[pos] == "n/a" else float(cells[pos])
                pos += 2 if name in PEER_NAMES else 1
            best_ratio = None if cells[pos] == "-" else float(cells[pos])
            auto_ratio = chosen = None
            if has_auto:
                auto_ratio = None if cells[pos + 1] == "-" else float(cells[pos + 1])
                chosen = cells[pos + 2]
        except (ValueError, IndexError):
            continue  # not a row of this table
        where = f"{qid} {k} in" + ("" if threads == "auto" else f" {threads}t")
        for name in names:
            if name not in PEER_NAMES and rates[name] is not None:
                note = chosen if name == "auto" and chosen else ""
                figures.append(Figure(f"{where}: {name} Mt/s", rates[name], note=note))
        if has_auto and auto_ratio is not None:
            figures.append(Figure(f"{where}: auto / best peer", auto_ratio))
        elif best_ratio is not None:
            figures.append(Figure(f"{where}: best design / best peer", best_ratio))
    return figures


def _markdown_tables(text: str) -> list[tuple[str, list[str], list[list[str]]]]:
    """(title, header, rows) of every '### title' followed by a markdown table."""
    tables, title, rows = [], None, []
    for line in text.splitlines() + [""]:
        if line.startswith("### "):
            title, rows = line[4:].strip(), []
        elif title is not None and line.startswith("|"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if not all(set(c) <= set("-:") for c in cells):  # the alignment row
                rows.append(cells)
        elif title is not None and rows and not line.strip():
            tables.append((title, rows[0], rows[1:]))
            title, rows = None, []
    return tables


def parse_pipeline(text: str) -> list[Figure]:
    figures = []
    for title, header, rows in _markdown_tables(text):
        number = title.split(".")[0]
        for row in rows:
            try:
                if number == "1":  # pipeline, tuples, workers, non-blocking, locked, ...
                    for col in ("non-blocking", "locked"):
                        figures.append(Figure(f"reorder {row[0]}, {row[2]}w: {col} t/s",
                                              _number(row[header.index(col)])))
                elif number == "2a":  # sigma, heaviest key, then per scheme: 1w, 2w, 2/1
                    for col, cell in zip(header[2:], row[2:]):
                        if col.endswith(("1w", "2w")):
                            figures.append(Figure(f"partitioning sigma {row[0]}: {col} t/s", _number(cell)))
                elif number == "3a":  # query, shape, workers, one column per scheduler
                    for col, cell in zip(header[3:], row[3:]):
                        figures.append(Figure(f"heuristics {row[0]} {row[2]}w: {col} t/s", _number(cell)))
                elif number == "4":  # bar, measured, verdict, outputs
                    figures += _bar(row[0], row[1])
            except (ValueError, IndexError):
                continue
        # 2b and 3b are paced latencies: too noisy for a one-line summary; they are in the raw output.
    return figures


def _bar(bar: str, measured: str) -> list[Figure]:
    if m := re.match(r"([\d.]+)x", measured):  # "1.99x (98,296 -> 195,238 t/s; ...)"
        what = re.search(r"worker, (.+?) \(", bar)
        return [Figure(f"bar speedup 2w/1w, {what[1] if what else bar[:40]}", float(m[1]))]
    if m := re.match(r"([-\d.]+) ns net", measured):  # "3.0 ns net of the pipeline-free read (...)"
        what = re.search(r"\d+ x (\w+)", bar)
        return [Figure(f"bar overhead ns/tuple/op, {what[1] if what else bar[:40]}", float(m[1]), LOWER)]
    if m := re.match(r"p99 ([\d,.]+) us", measured):  # "p99 293 us, p50 235 us at ..."
        workers = re.search(r"(\d+) workers?", bar)
        return [Figure(f"bar p99 us, {workers[1] if workers else '?'}w", _number(m[1]), LOWER)]
    return []


# --- the commands ------------------------------------------------------------------------------------

COMMANDS: dict[str, tuple[list[str], Callable[[str], list[Figure]]]] = {
    "merge": (["-m", "benchmarks.merge", "--rows", "2000000", "--inputs", "4", "20", "--repeat", "5",
               "--seed", "0"], parse_merge),
    # --repeat 1, not the module's 2: the peers' runs are most of its time (both formulations of each; K-OS and
    # W-OI at 4 inputs took 3 to 12 s a run at 2M rows here, under load), and 2 would take it from about 4
    # minutes to about 8 on a quiet machine, 15 under load. This script's rounds give each figure its best-of-N.
    "aggregate": (["-m", "benchmarks.aggregate", "--rows", "2000000", "--inputs", "1,4,20", "--repeat", "1",
                   "--threads", "auto", "--designs", "auto", "--queries", "k-OI,K-OI,k-OS,K-OS,w-OI,W-OI",
                   "--peers", "polars,duckdb", "--latency-designs", "", "--push-designs", ""], parse_aggregate),
    # Its sizes and repeat count stay the module's defaults (3 runs; sizes it cannot take from the command
    # line anyway), so that --pipeline-args=--quick shrinks everything for a smoke test.
    "pipeline": (["-m", "benchmarks.pipeline", "--sections", "reorder,partitioning,heuristics,bars"],
                 parse_pipeline),
}

# Imports the package the way the benchmarks will, and says what it got: where from, a fingerprint of
# the compiled engine (changes when the build does), and the peers' versions (ratios against peers
# compare across builds only if the peers are the same).
PROBE = r"""
import hashlib, json, sys
from importlib import metadata
import pyarrow_ops, pyarrow_ops._engine as engine
with open(engine.__file__, "rb") as f:
    digest = hashlib.sha256(f.read()).hexdigest()[:12]
versions = {}
for dist in ("pyarrow-ops", "pyarrow", "polars", "duckdb", "numpy"):
    try:
        versions[dist] = metadata.version(dist)
    except metadata.PackageNotFoundError:
        versions[dist] = None
print(json.dumps({"package": pyarrow_ops.__file__, "engine": engine.__file__, "digest": digest,
                  "python": sys.version.split()[0], "versions": versions}))
"""


# The benchmarks' modules under the names a build from before the benchmarks package had for them.
OLD_MODULES = {"benchmarks.merge": ["pyarrow_ops", "bench"], "benchmarks.aggregate": ["pyarrow_ops.bench_aggregate"],
               "benchmarks.pipeline": ["pyarrow_ops.bench_pipeline"]}


def repository(python: str) -> Path | None:
    """The repository whose benchmarks package the build runs: the folder holding its venv, if it has one."""
    root = Path(python).absolute().parents[2]
    return root if (root / "benchmarks" / "__init__.py").is_file() else None


def build_argv(python: str, argv: list[str]) -> list[str]:
    """``argv`` (``-m benchmarks.<name> ...``) for this build: as is, or under the old module name."""
    if repository(python) is None and argv[:1] == ["-m"] and argv[1] in OLD_MODULES:
        return [python, "-m", *OLD_MODULES[argv[1]], *argv[2:]]
    return [python, *argv]


def child_env(python: str | None = None) -> dict[str, str]:
    env = dict(os.environ)
    # PYTHONPATH would put one tree's source in front of both builds; the user site could hold a third
    # copy of the package. Only the build's own repository goes on it, for its benchmarks package.
    for name in ("PYTHONPATH", "PYTHONHOME"):
        env.pop(name, None)
    root = repository(python) if python else None
    if root is not None:
        env["PYTHONPATH"] = str(root)
    env["PYTHONSAFEPATH"] = "1"  # 3.11+: no working directory on sys.path, the neutral cwd aside
    env["PYTHONNOUSERSITE"] = "1"
    env["PYTHONUNBUFFERED"] = "1"  # the output shows as it comes, not when a long command ends
    return env


@dataclass
class Run:
    build: str
    round: int
    command: str
    argv: list[str]
    seconds: float = 0.0
    returncode: int | None = None
    output: str = ""
    figures: list[Figure] = field(default_factory=list)


def run_streaming(argv: list[str], cwd: str, timeout: float | None) -> tuple[int, str, float]:
    """Runs argv, echoing its output (stderr merged) as it comes; returns (exit code, output, seconds)."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, cwd=cwd, env=child_env(argv[0]), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, bufsize=1)
    timer = threading.Timer(timeout, proc.kill) if timeout else None
    if timer:
        timer.start()
    lines = []
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            sys.stdout.write(line)
            sys.stdout.flush()
            lines.append(line)
        proc.wait()
    except KeyboardInterrupt:
        proc.kill()
        proc.wait()
        raise
    finally:
        if timer:
            timer.cancel()
    return proc.returncode, "".join(lines), time.perf_counter() - start


def probe(python: str, cwd: str) -> dict:
    proc = subprocess.run([python, "-c", PROBE], cwd=cwd, env=child_env(), capture_output=True, text=True)
    # The last line is the probe's; an editable install may print its rebuild before it.
    last = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else ""
    if proc.returncode != 0 or not last.startswith("{"):
        raise SystemExit(f"{python}: importing pyarrow_ops failed (an editable install whose rebuild fails "
                         f"while its sources are mid-edit? wait and retry):\n{proc.stdout}{proc.stderr}")
    return json.loads(last)


def check_builds(labels: list[str], pythons: dict[str, str], cwd: str, digests: dict[str, str]) -> None:
    """Probes each build; warns when one changed since the last round or both import the same code."""
    infos = {label: probe(pythons[label], cwd) for label in labels}
    for label, info in infos.items():
        print(f"  {label:>8}: {info['package']}  engine {info['digest']}  python {info['python']}  "
              + " ".join(f"{k} {v}" for k, v in info["versions"].items()))
        if label in digests and digests[label] != info["digest"]:
            print(f"  WARNING: {label}'s engine changed since the previous round ({digests[label]} -> "
                  f"{info['digest']}): the rounds do not measure the same code")
        digests[label] = info["digest"]
    first, second = (infos[label] for label in labels)
    if Path(first["package"]).parent == Path(second["package"]).parent:
        print(f"  WARNING: both builds import {Path(first['package']).parent}: this compares a build with itself")
    elif first["digest"] == second["digest"]:
        print("  note: both engines are byte-identical")
    peers = [d for d in ("pyarrow", "polars", "duckdb", "numpy") if first["versions"][d] != second["versions"][d]]
    if peers:
        print(f"  WARNING: the builds differ in {', '.join(peers)}: ratios against peers do not compare")


def _show(value: float) -> str:
    return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.2f}"


def summarize(runs: list[Run], labels: list[str], commands: list[str]) -> None:
    print("\n" + "=" * 100)
    print(f"Summary: the best round of each build ({' vs '.join(labels)}); spread: the widest gap between one "
          "build's rounds,\nthe noise the difference has to beat. Goal: which way is better.")
    for command in commands:
        values: dict[str, dict[str, list[Figure]]] = {}  # figure name -> build -> one per round
        for run in runs:
            if run.command == command:
                for fig in run.figures:
                    values.setdefault(fig.name, {}).setdefault(run.build, []).append(fig)
        failed = [r for r in runs if r.command == command and r.returncode != 0]
        print(f"\n## {command}" + (f"  ({len(failed)} run(s) failed: see their output)" if failed else ""))
        if not values:
            print("(nothing parsed: see the raw outputs above)")
            continue
        rows = [["figure", "goal", *labels, f"{labels[1]}/{labels[0]}", "spread"]]
        for name, per_build in values.items():
            goal = next(iter(per_build.values()))[0].goal
            best: dict[str, Figure | None] = {}
            spread = 0.0
            for label in labels:
                figs = per_build.get(label, [])
                pick = max if goal == HIGHER else min
                best[label] = pick(figs, key=lambda f: f.value) if figs else None
                vals = [f.value for f in figs]
                if len(vals) > 1 and max(vals) > 0:
                    spread = max(spread, (max(vals) - min(vals)) / max(vals))
            cells = []
            for label in labels:
                fig = best[label]
                cells.append("-" if fig is None else _show(fig.value) + (f" {fig.note}" if fig.note else ""))
            a, b = best[labels[0]], best[labels[1]]
            ratio = f"{b.value / a.value:.3f}" if a and b and a.value else "-"
            rows.append([name, goal, *cells, ratio, f"{spread:.1%}" if spread else "-"])
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        for j, row in enumerate(rows):
            print("  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths))))
            if j == 0:
                print("  ".join("-" * w for w in widths))
    print("\nRuns (seconds, exit code):")
    for run in runs:
        print(f"  round {run.round} {run.command:>9} {run.build:>8}: {run.seconds:7.1f} s, exit {run.returncode}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--before", default=DEFAULT_BEFORE, help=f"the first build's python (default {DEFAULT_BEFORE})")
    parser.add_argument("--after", default=DEFAULT_AFTER, help=f"the second build's python (default {DEFAULT_AFTER})")
    parser.add_argument("--labels", default="before,after", help="the two builds' names (default before,after)")
    parser.add_argument("--rounds", type=int, default=2, help="rounds of (before, after) per command (default 2)")
    parser.add_argument("--only", default=",".join(COMMANDS), help=f"comma-separated, of {', '.join(COMMANDS)}")
    for name in COMMANDS:
        parser.add_argument(f"--{name}-args", default="", metavar="ARGS",
                            help=f"arguments appended to the {name} command (shell-quoted; write --{name}-args=...)")
    parser.add_argument("--cwd", default=None, help="working directory of the runs (default: a fresh empty one)")
    parser.add_argument("--save", default=None, metavar="DIR", help="also write each run's output to DIR")
    parser.add_argument("--timeout", type=float, default=1800, help="seconds before a run is killed (default 1800)")
    parser.add_argument("--dry-run", action="store_true", help="print the probes and the commands; run nothing")
    args = parser.parse_args(argv)

    labels = [x.strip() for x in args.labels.split(",")]
    if len(labels) != 2 or len(set(labels)) != 2 or not all(labels):
        parser.error("--labels takes two distinct names")
    commands = [x.strip() for x in args.only.split(",") if x.strip()]
    unknown = [c for c in commands if c not in COMMANDS]
    if unknown or not commands:
        parser.error(f"--only: choose from {', '.join(COMMANDS)}")
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    pythons = dict(zip(labels, (args.before, args.after)))
    for label, python in pythons.items():
        if not os.access(python, os.X_OK):
            parser.error(f"{label}: {python} is not an executable")
    argvs = {c: COMMANDS[c][0] + shlex.split(getattr(args, f"{c}_args")) for c in commands}

    with tempfile.TemporaryDirectory(prefix="compare_builds-") as scratch:
        cwd = args.cwd or scratch
        save = Path(args.save) if args.save else None
        if save:
            save.mkdir(parents=True, exist_ok=True)
        runs: list[Run] = []
        digests: dict[str, str] = {}
        for rnd in range(1, args.rounds + 1):
            print(f"\n##### round {rnd}/{args.rounds}: builds (run from {cwd})", flush=True)
            check_builds(labels, pythons, cwd, digests)
            for command in commands:
                for label in labels:
                    run = Run(label, rnd, command, build_argv(pythons[label], argvs[command]))
                    print(f"\n===== [{label}] round {rnd}/{args.rounds}: {command}: {shlex.join(run.argv)}",
                          flush=True)
                    if args.dry_run:
                        continue
                    run.returncode, run.output, run.seconds = run_streaming(run.argv, cwd, args.timeout)
                    print(f"===== [{label}] round {rnd}/{args.rounds}: {command}: exit {run.returncode}, "
                          f"{run.seconds:.1f} s", flush=True)
                    try:
                        run.figures = COMMANDS[command][1](run.output)
                    except Exception as exc:  # noqa: BLE001 - a summary that fails must not lose the run
                        print(f"(could not parse the {command} output: {exc!r})")
                    if save:
                        (save / f"{command}-{label}-round{rnd}.txt").write_text(run.output)
                    runs.append(run)
        if args.dry_run:
            return 0
    summarize(runs, labels, commands)
    return 0 if all(r.returncode == 0 for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
