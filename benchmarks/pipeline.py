"""The ordered-processing paper's section 7 measurements of pipelines on this machine, printed as markdown.

    python -m benchmarks.pipeline [--quick] [--repeat 3] [--sections reorder,partitioning,heuristics,bars]

Every pipeline is made of the parametric operator (docs/pipeline.md) over
``parametric_events`` (below); throughput is input tuples per second of
``Pipeline.run(...).to_arrow()`` timed with ``time.perf_counter``, the best of ``--repeat`` runs.
Latency is ``PipelineResult.stats()["latencies_ns"]`` (per result batch: from the first operator
starting on its input to its arrival at the output) of one run whose input is cut into batches of
``LATENCY_BATCH`` rows and paced (``run(experiment=po.Experiment(rate=...))``) at half of the maximum throughput measured on
that same small-batch input; the first 10 % of the batches are dropped as warm-up, as the paper does.

1. Reordering (Figures 12, 13): non-blocking against locked reordering, 1 and 2 workers, for one light
   stateless operator, a chain of three, a stateless operator of selectivity 0.5 feeding a partitioned one,
   and the paper's own high-selectivity case (selectivity 50).
2. Partitioning (Figures 9, 10): hybrid, partitioned and shared queues for one partitioned operator over
   keys of growing skew (sigma), 1 and 2 workers, with the speedup; then p50/p99 latency for per-tuple
   costs of 10, 100 and 1000 us.
3. Heuristics (Figure 8): the schedulers of ``pyarrow_ops.pipeline.SCHEDULERS`` on parametric pipelines
   shaped like the paper's Table 1 queries (``QUERIES``, costs ``COSTS``): throughput and p50/p99 latency.
4. The issue's bars, each printed with its figure and "met" or "missed".

Every setting's output is checked equal to the other settings' of the same workload (any setting gives
the identical result, docs/pipeline.md); a difference raises AssertionError. The machine is shared, so
compare figures within one run. ``--quick`` shrinks every workload (for a smoke test: its figures mean
nothing).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time as clock
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

import pyarrow_ops as po
from pyarrow_ops import col
from pyarrow_ops.pipeline import PARTITIONINGS, REORDERS, SCHEDULERS


def parametric_events(*, rows: int = 1_000_000, keys: int = 1000, sigma: float | None = None, inputs: int = 1,
                      seed: int = 0) -> list[pa.Table]:
    """Tuples for the parametric operator's experiments (ordered-processing paper, section 7).

    Columns ``ts`` (int64, microseconds, strictly increasing over all inputs), ``key`` (int64 in
    ``[0, keys)``) and ``value`` (float64). Keys are uniform, or with ``sigma`` drawn from a
    Gaussian N(0, sigma) over [-1, 1] scaled onto the key range (smaller sigma: more skew, as in
    the paper's Figure 9). Tuple ``i`` goes to input ``i % inputs``.

    >>> t = parametric_events(rows=4, keys=10, seed=1)[0]
    >>> t.column_names, t.num_rows
    (['ts', 'key', 'value'], 4)
    """
    rng = np.random.default_rng(seed)
    if sigma is None:
        key = rng.integers(0, keys, rows)
    else:
        draws = np.clip(rng.normal(0.0, sigma, rows), -1.0, 1.0)
        key = np.minimum(((draws + 1.0) / 2.0 * keys).astype(np.int64), keys - 1)
    ts = np.arange(rows, dtype=np.int64)
    value = rng.random(rows)
    return [pa.table({"ts": ts[i::inputs], "key": key[i::inputs], "value": value[i::inputs]}) for i in range(inputs)]


THREADS = (1, 2)
KEYS = 100  # distinct keys: few enough that a small sigma piles the tuples on a handful of them
SIGMAS = (None, 1.0, 0.3, 0.1)
LATENCY_BATCH = 16  # rows per input batch of the paced runs: latency is per small batch
WARMUP_SHARE = 0.1  # the first 10 % of the result batches are dropped from the latency percentiles

# Table 1's shapes (the source, store sales or web clickstreams, is the input): SL stateless,
# PS partitioned stateful, SF stateful.
QUERIES = {
    "Q1": ("SL", "PS", "PS", "SF"),
    "Q2": ("SL", "PS", "SL", "PS", "SF"),
    "Q3": ("SL", "PS", "PS"),
    "Q4": ("SL", "PS", "SL", "SF"),
    "Q15": ("SL", "SL", "PS"),
}
COSTS = {"SL": 2.0, "PS": 4.0, "SF": 1.0}  # microseconds per tuple
KINDS = {"SL": "stateless", "PS": "partitioned", "SF": "stateful"}

# The bars of the issue.
SPEEDUP_BAR = 1.7  # 2 workers over 1, operators of at least BAR_COST_US per tuple
BAR_COST_US = 10.0
OVERHEAD_BAR_NS = 50.0  # per tuple and operator, 5 trivial stateless operators, 1 worker
OVERHEAD_OPS = 5
LATENCY_BAR_US = 1000.0  # p99 on the Q2 shape at half of the maximum throughput
LATENCY_BAR_QUERY = "Q2"


@dataclass(frozen=True)
class Sizes:
    """Input tuples per workload (chosen so that one 1-worker run takes about a second)."""

    reorder_light: int = 40_000  # one 20 us operator
    reorder_chain: int = 15_000  # three of them
    reorder_selective: int = 30_000  # 20 us, selectivity 0.5, then 20 us partitioned
    reorder_fanout: int = 4_000  # 100 us, selectivity 50, then 2 us partitioned
    partitioning: int = 40_000  # one 20 us partitioned operator
    latency_budget_us: float = 2_000_000.0  # tuples x cost of one latency workload (2 s of work)
    heuristics: int = 30_000
    bar_speedup: int = 100_000  # 10 us operators
    bar_overhead: int = 10_000_000


FULL = Sizes()
QUICK = Sizes(reorder_light=2_000, reorder_chain=1_000, reorder_selective=1_500, reorder_fanout=200,
              partitioning=2_000, latency_budget_us=100_000.0, heuristics=2_000, bar_speedup=3_000,
              bar_overhead=100_000)

Build = Callable[[po.Pipeline], po.Pipeline]
_events: dict[tuple[int, float | None], pa.Table] = {}


def events(rows: int, sigma: float | None = None) -> pa.Table:
    """parametric_events' one table (ts, key, value), generated once per run."""
    if (rows, sigma) not in _events:
        _events[(rows, sigma)] = parametric_events(rows=rows, keys=KEYS, sigma=sigma, seed=7)[0]
    return _events[(rows, sigma)]


def small_batches(table: pa.Table, rows: int = LATENCY_BATCH) -> pa.Table:
    """The same rows as a table of `rows`-row record batches (the pipeline reads them batch by batch)."""
    return pa.Table.from_batches(table.to_batches(max_chunksize=rows), schema=table.schema)


class Equal:
    """The output of every setting of one workload must equal the first setting's."""

    def __init__(self, workload: str) -> None:
        self.workload, self.reference, self.first, self.settings = workload, None, "", 0

    def check(self, setting: str, out: pa.Table) -> None:
        self.settings += 1
        if self.reference is None:
            self.reference, self.first = out, setting
        elif not out.equals(self.reference):
            raise AssertionError(f"{self.workload}: the output of {setting} differs from that of {self.first} "
                                 f"({out.num_rows} rows against {self.reference.num_rows})")

    def line(self) -> str:
        return f"{self.workload}: {self.settings} outputs checked equal"


def checked(equals: list[Equal]) -> str:
    """One note for a table: which workloads' outputs were checked equal, and how many of each."""
    return "Checked equal (every run's output against the first setting's): " + "; ".join(
        f"{e.workload} ({e.settings} outputs)" for e in equals) + "."


def timed_runs(source: pa.Table, build: Build, repeat: int, equal: Equal, setting: str,
               **options) -> tuple[float, float]:
    """The best of `repeat` runs: its seconds and the cores the process got meanwhile (its CPU time, every
    thread's, over the wall time: a spinning worker that the machine's other work keeps off a core shows
    there). Every run's output is checked by `equal`."""
    pipeline = build(po.Pipeline(source, time="ts"))
    best, cores = float("inf"), 0.0
    for _ in range(repeat):
        cpu, start = clock.process_time(), clock.perf_counter()
        out = pipeline.run(**options).to_arrow()
        seconds = clock.perf_counter() - start
        if seconds < best:
            best, cores = seconds, (clock.process_time() - cpu) / seconds
        equal.check(setting, out)
    return best, cores


def throughput(source: pa.Table, build: Build, repeat: int, equal: Equal, setting: str, **options) -> float:
    """Input tuples per second, the best of `repeat` runs; every run's output checked by `equal`."""
    return source.num_rows / timed_runs(source, build, repeat, equal, setting, **options)[0]


@dataclass(frozen=True)
class Latency:
    max_rate: float  # input tuples/s of the small-batch input, best of the repeats
    rate: float  # the pace: half of max_rate
    p50_us: float
    p99_us: float
    batches: int  # result batches counted (after the warm-up)


def paced_latency(source: pa.Table, build: Build, repeat: int, equal: Equal, setting: str, **options) -> Latency:
    """Maximum throughput of the small-batch input, then one run paced at half of it: p50 and p99."""
    small = small_batches(source)
    top = throughput(small, build, repeat, equal, setting, **options)
    result = build(po.Pipeline(small, time="ts")).run(experiment=po.Experiment(rate=top / 2), **options)
    equal.check(f"{setting} paced", result.to_arrow())
    lat = np.asarray(result.stats()["latencies_ns"], dtype=np.float64)
    lat = lat[int(len(lat) * WARMUP_SHARE):] / 1e3
    if lat.size == 0:
        raise AssertionError(f"{equal.workload} {setting}: no result batch to measure latency on")
    return Latency(top, top / 2, float(np.percentile(lat, 50)), float(np.percentile(lat, 99)), int(lat.size))


def table(title: str, header: list[str], rows: list[list[str]], notes: list[str] = ()) -> None:
    """Prints a markdown table under a heading, then its notes."""
    print(f"\n### {title}\n")
    print("| " + " | ".join(header) + " |")
    print("|" + "|".join("---:" if i else "---" for i in range(len(header))) + "|")
    for row in rows:
        print("| " + " | ".join(row) + " |")
    for note in notes:
        print(f"\n{note}")
    print(flush=True)


def quick_output(module: str) -> list[str]:
    """The lines ``python -m <module> --quick`` prints (the benchmarks' smoke tests read its tables)."""
    return subprocess.run([sys.executable, "-m", module, "--quick"], capture_output=True, text=True, check=True,
                          timeout=600).stdout.splitlines()


def number(cell: str) -> float:
    """A table cell's number, thousands separators and all."""
    return float(cell.replace(",", ""))


def read_table(lines: list[str], heading_start: str) -> tuple[list[str], list[list[str]], list[str]]:
    """What table() printed, read back (the benchmarks' smoke tests check it): the header cells, the
    rows' cells and the non-empty notes (up to the next heading) under the heading starting with
    `heading_start`."""
    start = next(i for i, line in enumerate(lines) if line.startswith(f"### {heading_start}"))
    assert lines[start + 1] == ""
    end = next(i for i in range(start + 2, len(lines)) if not lines[i].startswith("|"))
    header, rule, *rows = [[c.strip() for c in line.strip().strip("|").split("|")] for line in lines[start + 2:end]]
    assert all(set(c) <= set("-:") for c in rule) and len(rule) == len(header)
    assert all(len(r) == len(header) for r in rows)
    stop = next((i for i in range(end, len(lines)) if lines[i].startswith("###")), len(lines))
    return header, rows, [line for line in lines[end:stop] if line.strip()]


def rate(value: float) -> str:
    return f"{value:,.0f}"


def ratio(value: float) -> str:
    return f"{value:.2f}"


def micros(value: float) -> str:
    return f"{value:,.0f}" if value >= 100 else f"{value:.1f}"


def verdict(ok: bool) -> str:
    return "met" if ok else "missed"


# 1. Reordering.
def reorder_workloads(sizes: Sizes) -> list[tuple[str, int, Build]]:
    def light(p: po.Pipeline) -> po.Pipeline:
        return p.experimental_parametric("stateless", cost_us=20)

    def chain(p: po.Pipeline) -> po.Pipeline:
        for _ in range(3):
            p = p.experimental_parametric("stateless", cost_us=20)
        return p

    def selective(p: po.Pipeline) -> po.Pipeline:
        return p.experimental_parametric("stateless", cost_us=20, selectivity=0.5).experimental_parametric("partitioned", cost_us=20, key="key")

    def fanout(p: po.Pipeline) -> po.Pipeline:
        return p.experimental_parametric("stateless", cost_us=100, selectivity=50).experimental_parametric("partitioned", cost_us=2, key="key")

    return [
        ("SL 20us", sizes.reorder_light, light),
        ("SL 20us -> SL 20us -> SL 20us", sizes.reorder_chain, chain),
        ("SL 20us sel 0.5 -> PS 20us", sizes.reorder_selective, selective),
        ("SL 100us sel 50 -> PS 2us (paper's 7.3.2)", sizes.reorder_fanout, fanout),
    ]


def reorder_section(sizes: Sizes, repeat: int) -> dict:
    results: dict[tuple[str, str, int], float] = {}
    rows, equals = [], []
    for name, n, build in reorder_workloads(sizes):
        source, equal = events(n), Equal(name)
        for scheme in REORDERS:
            for threads in THREADS:
                results[(name, scheme, threads)] = throughput(source, build, repeat, equal, f"{scheme} {threads}w",
                                                              threads=threads, reorder=scheme)
        equals.append(equal)
        for threads in THREADS:
            nb, lk = results[(name, "nonblocking", threads)], results[(name, "locked", threads)]
            row = [name, f"{n:,}", str(threads), rate(nb), rate(lk), ratio(nb / lk)]
            if threads == 1:
                row += ["", ""]
            else:
                row += [ratio(nb / results[(name, "nonblocking", 1)]), ratio(lk / results[(name, "locked", 1)])]
            rows.append(row)
    table("1. Reordering: non-blocking vs locked (input tuples/s, best of %d)" % repeat,
          ["pipeline", "tuples", "workers", "non-blocking", "locked", "nb / locked", "nb speedup 2/1",
           "locked speedup 2/1"], rows, [checked(equals)])
    return results


# 2. Partitioning.
def partitioned_op(cost_us: float) -> Build:
    return lambda p: p.experimental_parametric("partitioned", cost_us=cost_us, key="key")


def heaviest_key_share(source: pa.Table) -> float:
    counts = np.bincount(source.column("key").to_numpy(), minlength=KEYS)
    return float(counts.max() / counts.sum())


def partitioning_section(sizes: Sizes, repeat: int) -> dict:
    results: dict[tuple[float | None, str, int], float] = {}
    rows, equals = [], []
    build = partitioned_op(20.0)
    for sigma in SIGMAS:
        source = events(sizes.partitioning, sigma)
        equal = Equal(f"sigma {sigma or 'uniform'}")
        row = ["uniform" if sigma is None else f"{sigma:g}", f"{heaviest_key_share(source):.1%}"]
        for scheme in PARTITIONINGS:
            for threads in THREADS:
                results[(sigma, scheme, threads)] = throughput(source, build, repeat, equal, f"{scheme} {threads}w",
                                                               threads=threads, partitioning=scheme)
            one, two = results[(sigma, scheme, 1)], results[(sigma, scheme, 2)]
            row += [rate(one), rate(two), ratio(two / one)]
        rows.append(row)
        equals.append(equal)
    header = ["sigma", "heaviest key"]
    for scheme in PARTITIONINGS:
        header += [f"{scheme} 1w", f"{scheme} 2w", f"{scheme} 2/1"]
    table(f"2a. Partitioning under skew: one partitioned operator, 20 us per tuple, {KEYS} keys, "
          f"{sizes.partitioning:,} tuples (input tuples/s, best of {repeat})", header, rows,
          [checked(equals),
           "Partitions: the engine's defaults (64 for hybrid, one per worker for partitioned and shared)."])

    rows, equals = [], []
    for cost in (10.0, 100.0, 1000.0):
        n = max(200, int(sizes.latency_budget_us / cost))
        source, equal = events(n), Equal(f"{cost:g} us")
        for scheme in PARTITIONINGS:
            lat = paced_latency(source, partitioned_op(cost), repeat, equal, scheme, threads=2, partitioning=scheme)
            rows.append([f"{cost:g}", scheme, f"{n:,}", rate(lat.max_rate), rate(lat.rate), micros(lat.p50_us),
                         micros(lat.p99_us), str(lat.batches)])
        equals.append(equal)
    table(f"2b. Partitioning: processing latency per {LATENCY_BATCH}-tuple batch, 2 workers, uniform keys, paced at "
          f"half of the maximum throughput", ["cost us/tuple", "scheme", "tuples", "max t/s", "paced t/s", "p50 us",
                                              "p99 us", "batches"], rows,
          [checked(equals), f"A batch of {LATENCY_BATCH} tuples holds {LATENCY_BATCH} x cost of work; the first "
                   f"{WARMUP_SHARE:.0%} of the batches are dropped."])
    return results


# 3. Heuristics.
def query_build(shape: tuple[str, ...]) -> Build:
    def build(p: po.Pipeline) -> po.Pipeline:
        for op in shape:
            key = "key" if op == "PS" else None
            p = p.experimental_parametric(KINDS[op], cost_us=COSTS[op], key=key)
        return p

    return build


def heuristics_section(sizes: Sizes, repeat: int) -> dict:
    source = events(sizes.heuristics)
    tput: dict[tuple[str, int, str], float] = {}
    lats: dict[tuple[str, int, str], Latency] = {}
    rows, lat_rows, equals = [], [], []
    for q, shape in QUERIES.items():
        equal = Equal(q)
        build = query_build(shape)
        for threads in THREADS:
            for s in SCHEDULERS:
                tput[(q, threads, s)] = throughput(source, build, repeat, equal, f"{s} {threads}w", threads=threads,
                                                   scheduler=s)
                lats[(q, threads, s)] = paced_latency(source, build, repeat, equal, f"{s} {threads}w small batches",
                                                      threads=threads, scheduler=s)
            label = " -> ".join(shape)
            rows.append([q, label, str(threads)] + [rate(tput[(q, threads, s)]) for s in SCHEDULERS])
            lat_rows.append([q, str(threads)] + [f"{micros(lats[(q, threads, s)].p50_us)} / "
                                                 f"{micros(lats[(q, threads, s)].p99_us)}" for s in SCHEDULERS])
        equals.append(equal)
    costs = ", ".join(f"{op} ({KINDS[op]}) {COSTS[op]:g} us" for op in COSTS)
    table(f"3a. Scheduling heuristics on Table 1's shapes: input tuples/s, best of {repeat}, {sizes.heuristics:,} "
          f"tuples, {KEYS} keys", ["query", "shape", "workers", *SCHEDULERS], rows,
          [checked(equals), f"Per-tuple costs: {costs}; selectivity 1; partitioned operators keyed on `key`."])
    table(f"3b. Scheduling heuristics: latency p50 / p99 (us) per {LATENCY_BATCH}-tuple batch at half of the maximum "
          f"throughput of the small-batch input", ["query", "workers", *SCHEDULERS], lat_rows,
          ["The small-batch and paced runs' outputs are among those checked equal under 3a."])
    return {"throughput": tput, "latency": lats}


# 4. The bars.
def speedup_bars(sizes: Sizes, repeat: int) -> list[list[str]]:
    source = events(sizes.bar_speedup)
    rows = []
    for name, build, options in (
        (f"stateless {BAR_COST_US:g} us", lambda p: p.experimental_parametric("stateless", cost_us=BAR_COST_US), {}),
        (f"hybrid partitioned {BAR_COST_US:g} us", partitioned_op(BAR_COST_US), {"partitioning": "hybrid"}),
    ):
        equal = Equal(name)
        secs1, _ = timed_runs(source, build, repeat, equal, "1w", threads=1, **options)
        secs2, cores = timed_runs(source, build, repeat, equal, "2w", threads=2, **options)
        one, two = source.num_rows / secs1, source.num_rows / secs2
        rows.append([f"2 workers >= {SPEEDUP_BAR}x 1 worker, {name} ({sizes.bar_speedup:,} tuples)",
                     f"{two / one:.2f}x ({rate(one)} -> {rate(two)} t/s; the 2-worker run got {cores:.2f} cores)",
                     verdict(two / one >= SPEEDUP_BAR), equal.line()])
    return rows


def overhead_bars(sizes: Sizes, repeat: int) -> list[list[str]]:
    n = sizes.bar_overhead
    source = events(n)
    base_equal = Equal("pipeline-free read")
    baseline = float("inf")
    for _ in range(repeat):
        start = clock.perf_counter()
        out = po.merge([source], time="ts").to_arrow()
        baseline = min(baseline, clock.perf_counter() - start)
        base_equal.check("po.merge", out)
    base_equal.check("input", source)

    plus_one = pc.add(source.column("value"), 1.0)
    chains = {
        "with_columns(x_i=col('value') + 1)": (
            lambda p: _chain(p, lambda q, i: q.with_columns(**{f"x{i}": col("value") + 1})),
            _append(source, [(f"x{i}", plus_one) for i in range(OVERHEAD_OPS)]),
        ),
        "filter(col('value') >= 0)": (lambda p: _chain(p, lambda q, i: q.filter(col("value") >= 0)), source),
    }
    rows = []
    for name, (build, expected) in chains.items():
        equal = Equal(name)
        equal.check("expected (pyarrow)", expected)
        pipeline = build(po.Pipeline(source, time="ts"))
        best = float("inf")
        for _ in range(repeat):
            start = clock.perf_counter()
            out = pipeline.run(threads=1).to_arrow()
            best = min(best, clock.perf_counter() - start)
            equal.check("pipeline", out)
            del out
        net = (best - baseline) / (n * OVERHEAD_OPS) * 1e9
        plain = best / (n * OVERHEAD_OPS) * 1e9
        rows.append([f"<= {OVERHEAD_BAR_NS:g} ns per tuple and operator: {OVERHEAD_OPS} x {name}, 1 worker, "
                     f"{n:,} tuples",
                     f"{net:.1f} ns net of the pipeline-free read ({best:.3f} s - {baseline:.3f} s); plain "
                     f"{plain:.1f} ns", verdict(net <= OVERHEAD_BAR_NS), equal.line()])
    return rows


def _chain(p: po.Pipeline, add: Callable[[po.Pipeline, int], po.Pipeline]) -> po.Pipeline:
    for i in range(OVERHEAD_OPS):
        p = add(p, i)
    return p


def _append(source: pa.Table, columns: list[tuple[str, pa.ChunkedArray]]) -> pa.Table:
    for name, values in columns:
        source = source.append_column(name, values)
    return source


def latency_bar(sizes: Sizes, repeat: int, heuristics: dict | None) -> list[list[str]]:
    rows = []
    for threads in THREADS:
        key = (LATENCY_BAR_QUERY, threads, "ct")
        if heuristics is None:
            equal = Equal(LATENCY_BAR_QUERY)
            lat = paced_latency(events(sizes.heuristics), query_build(QUERIES[LATENCY_BAR_QUERY]), repeat, equal,
                                "ct", threads=threads, scheduler="ct")
            checked = equal.line()
        else:
            lat, checked = heuristics["latency"][key], "checked equal in table 3"
        rows.append([f"p99 < {LATENCY_BAR_US / 1000:g} ms at half of the maximum throughput, {LATENCY_BAR_QUERY} "
                     f"shape, ct, {threads} worker{'s' if threads > 1 else ''}",
                     f"p99 {micros(lat.p99_us)} us, p50 {micros(lat.p50_us)} us at {rate(lat.rate)} t/s "
                     f"({LATENCY_BATCH}-tuple batches)", verdict(lat.p99_us < LATENCY_BAR_US), checked])
    return rows


def bars_section(sizes: Sizes, repeat: int, heuristics: dict | None) -> None:
    rows = speedup_bars(sizes, repeat) + overhead_bars(sizes, repeat) + latency_bar(sizes, repeat, heuristics)
    table(f"4. The issue's bars (best of {repeat})", ["bar", "measured", "verdict", "outputs"], rows,
          ["The overhead's pipeline-free read is po.merge([table]).to_arrow() of the same input. Cores: the "
           "process's CPU time over the wall time of the best 2-worker run; below 2, other work on the machine "
           "kept the workers off the cores."])


SECTIONS = ("reorder", "partitioning", "heuristics", "bars")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="tiny workloads, for a smoke test (under a minute)")
    parser.add_argument("--repeat", type=int, default=None, help="runs per throughput figure (default 3; 1 quick)")
    parser.add_argument("--sections", default=",".join(SECTIONS), help=f"comma-separated, of {', '.join(SECTIONS)}")
    parser.add_argument("--overhead-tuples", type=int, default=None,
                        help="tuples of the overhead bar (default 10,000,000; 100,000 quick)")
    args = parser.parse_args(argv)
    sections = [s.strip() for s in args.sections.split(",") if s.strip()]
    unknown = [s for s in sections if s not in SECTIONS]
    if unknown:
        parser.error(f"unknown section {', '.join(unknown)}; choose from {', '.join(SECTIONS)}")
    sizes = QUICK if args.quick else FULL
    if args.overhead_tuples is not None:
        sizes = replace(sizes, bar_overhead=args.overhead_tuples)
    repeat = args.repeat or (1 if args.quick else 3)
    if repeat < 1:
        parser.error("--repeat must be at least 1")
    start = clock.perf_counter()
    print(f"# Pipeline benchmarks{' (--quick: tiny workloads, the figures mean nothing)' if args.quick else ''}")
    print(f"\nThroughput: input tuples/s of run(...).to_arrow(), best of {repeat}. Latency: one run paced at half of "
          f"the maximum throughput, input in {LATENCY_BATCH}-row batches, first {WARMUP_SHARE:.0%} of the result "
          f"batches dropped. Workers: {', '.join(map(str, THREADS))}. {_machine()}", flush=True)
    heuristics = None
    if "reorder" in sections:
        reorder_section(sizes, repeat)
    if "partitioning" in sections:
        partitioning_section(sizes, repeat)
    if "heuristics" in sections:
        heuristics = heuristics_section(sizes, repeat)
    if "bars" in sections:
        bars_section(sizes, repeat, heuristics)
    print(f"All outputs checked equal across the compared settings. Total {clock.perf_counter() - start:.0f} s. "
          f"{_machine()}")


def _machine() -> str:
    """The cores and the load: the machine is shared, and other work shows in every figure."""
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    return f"Machine: {os.cpu_count()} cores, load average {load} (1, 5, 15 min)."


if __name__ == "__main__":
    main()
