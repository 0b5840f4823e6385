"""The IBM Streams paper's graph shapes (its Figures 9 and 10, scaled to a small machine) under every
threading model, in interleaved rounds, printed as markdown.

    python -m benchmarks.threading [--rows 20000] [--depth 100] [--width 10] [--costs 0,1] [--threads 1,2]
        [--work-s 2]
        [--repeat 2] [--shapes pipeline,parallel,mix] [--only "dynamic auto,ordered auto"]
        [--trace levels.json] [--plot DIR]

Operators are stateless parametric ones (``experimental_parametric``: a hash of the tuple plus
``cost`` microseconds of spinning per tuple), and nothing is fused (``fuse=False``), so each is a
stage of its own, as each is a port of its own in the paper:

  pipeline   ``depth`` operators in a chain (the paper: 1,000)
  parallel   one operator that every worker runs at once: our data parallelism is inside an operator
             (the paper: a region of width 1,000, each replica a port; docs/architecture.md says how
             the two schedulers divide the work), over ``depth`` times the rows (at most
             ``--most-parallel-rows``, 5M), so
             that it does about the pipeline's work
  mix        ``width`` branches of the source, each a chain of ``depth / width`` operators, then a
             union (the paper: width 10 x depth 100)

``--costs`` are microseconds of spinning per tuple and operator (about 1,000 flops per microsecond:
the paper's costs of 1, 100, 1,000, 10,000 and 100,000 flops are about 0, 0.1, 1, 10 and 100).
``--work-s`` sizes each cost's inputs to about that many seconds of operator work at one worker
(the pipeline and the mix over ``work / (cost x depth)`` tuples, the parallel shape over ``depth``
times that; at most ``--rows`` and ``--most-parallel-rows``), so that dear operators do not run for
minutes and cheap ones do not end before an elastic level has measured anything.

Contenders: ``threading="manual"``, ``"dedicated"`` (a thread per stage), the ordered runtime
(``"ordered"``, CT) and ``"dynamic"`` (the free list) at each of ``--threads`` and with
``threads="auto"``. Throughput is input tuples per second of the best round; every output is
checked equal to the first contender's. Then, per shape and cost: auto against the best fixed
thread count of its model, dynamic against manual and dedicated, and the wall time per tuple per
operator at one worker (ordered and dynamic: the scheduler's overhead next to the operators' work).
``--trace`` writes the elastic contenders' levels over time (their best round's ``thread_levels``)
as JSON, keyed "shape, cost, contender"; ``--plot DIR`` draws each as a PNG (``po.plot_thread_levels``,
the paper's Figure 11). Only figures of one run compare: the machine's speed is its own.
"""

from __future__ import annotations

import argparse
import json
import os
import time as clock
from collections.abc import Callable

import numpy as np
import pyarrow as pa

import pyarrow_ops as po


def source(rows: int, seed: int = 3) -> pa.Table:
    rng = np.random.default_rng(seed)
    return pa.table({"ts": np.arange(rows, dtype=np.int64), "k": rng.integers(0, 1000, rows),
                     "v": rng.random(rows)})


def shapes(rows: int, depth: int, width: int, cost: float, most_wide: int = 5_000_000
           ) -> dict[str, tuple[Callable[[], dict[str, po.Pipeline]], int, int]]:
    """Per shape: a function making its outputs, how many operators it runs, and its input rows."""
    table = source(rows)
    wide = source(min(rows * depth, most_wide))

    def op(p: po.Pipeline) -> po.Pipeline:
        return p.experimental_parametric("stateless", cost_us=cost)

    def pipeline():
        p = po.Pipeline(table, time="ts")
        for _ in range(depth):
            p = op(p)
        return {"out": p}

    def parallel():
        return {"out": op(po.Pipeline(wide, time="ts"))}

    def mix():
        src = po.Pipeline(table, time="ts")
        branches = []
        for _ in range(width):
            p = src
            for _ in range(max(1, depth // width)):
                p = op(p)
            branches.append(p)
        return {"out": po.union(*branches)}

    return {"pipeline": (pipeline, depth, rows), "parallel": (parallel, 1, wide.num_rows),
            "mix": (mix, width * max(1, depth // width) + 1, rows)}


def contenders(threads: list[int]) -> dict[str, dict]:
    out: dict[str, dict] = {"manual": {"threading": "manual"}, "dedicated": {"threading": "dedicated"}}
    for model in ("ordered", "dynamic"):
        for t in threads:
            out[f"{model} {t}"] = {"threading": model, "threads": t}
        out[f"{model} auto"] = {"threading": model, "threads": "auto"}
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--depth", type=int, default=100)
    parser.add_argument("--width", type=int, default=10)
    parser.add_argument("--costs", default="0,1", help="comma-separated microseconds per tuple and operator")
    parser.add_argument("--threads", default="1,2", help="comma-separated fixed thread counts")
    parser.add_argument("--repeat", type=int, default=2, help="interleaved rounds; each contender's best counts")
    parser.add_argument("--shapes", default="pipeline,parallel,mix")
    parser.add_argument("--work-s", type=float, default=None,
                        help="size each cost's inputs to about this many seconds of work at one worker")
    parser.add_argument("--most-parallel-rows", type=int, default=5_000_000,
                        help="the parallel shape's rows: depth times --rows, at most this many")
    parser.add_argument("--only", default=None, help="comma-separated contenders (default all)")
    parser.add_argument("--trace", default=None, help="a JSON file for the elastic contenders' levels over time")
    parser.add_argument("--plot", default=None, help="a folder for a PNG per elastic contender, shape and cost")
    args = parser.parse_args(argv)
    threads = [int(t) for t in args.threads.split(",")]
    costs = [float(c) for c in args.costs.split(",")]
    chosen = [s.strip() for s in args.shapes.split(",") if s.strip()]
    runs = contenders(threads)
    if args.only:
        wanted = [c.strip() for c in args.only.split(",")]
        unknown = [c for c in wanted if c not in runs]
        if unknown:
            parser.error(f"unknown contenders {unknown}; there are {list(runs)}")
        runs = {c: runs[c] for c in wanted}
    traces: dict[str, list[dict]] = {}
    print(f"# Threading models on the paper's shapes: {args.rows:,} tuples, depth {args.depth}, width {args.width}, "
          f"best of {args.repeat} interleaved rounds, {os.cpu_count()} cores\n")
    print("Input tuples per second (M):\n")
    print("| shape | cost us | operators | rows | " + " | ".join(runs) + " |")
    print("|---|---:|---:|---:|" + "---:|" * len(runs))
    verdicts = []
    for cost in costs:
        rows = args.rows
        if args.work_s and cost > 0:
            rows = max(200, min(args.rows, int(args.work_s / (cost * 1e-6 * args.depth))))
        made = shapes(rows, args.depth, args.width, cost, args.most_parallel_rows)
        for name in chosen:
            build, operators, rows = made[name]
            best = {c: float("inf") for c in runs}
            levels: dict[str, list[dict]] = {}
            reference = None
            for _ in range(args.repeat):
                for c, options in runs.items():
                    outputs = build()
                    start = clock.perf_counter()
                    result = po.run(outputs, fuse=False, **options)
                    tables = result.to_arrow()
                    elapsed = clock.perf_counter() - start
                    if options.get("threads") == "auto" and elapsed < best[c]:
                        levels[c] = result.stats()["thread_levels"]
                    best[c] = min(best[c], elapsed)
                    if reference is None:
                        reference = tables
                    else:
                        assert all(t.equals(reference[k]) for k, t in tables.items()), f"{name}: {c} differs"
            rate = {c: rows / best[c] for c in runs}
            print(f"| {name} | {cost:g} | {operators} | {rows:,} | " +
                  " | ".join(f"{rate[c] / 1e6:.3f}" for c in runs) + " |", flush=True)
            for c, trace in levels.items():
                traces[f"{name}, cost {cost:g}, {c}"] = trace
            for model in ("ordered", "dynamic"):
                fixed = [rate[f"{model} {t}"] for t in threads if f"{model} {t}" in rate]
                if fixed and f"{model} auto" in rate:
                    verdicts.append(f"- {name}, cost {cost:g}: {model} auto / best fixed {model} = "
                                    f"{rate[f'{model} auto'] / max(fixed):.2f} (levels, best round: "
                                    f"{[lv['threads'] for lv in levels.get(f'{model} auto', [])]})")
            dynamic = [rate[f"dynamic {t}"] for t in threads if f"dynamic {t}" in rate]
            if dynamic and "manual" in rate and "dedicated" in rate:
                verdicts.append(f"- {name}, cost {cost:g}: best dynamic / manual = {max(dynamic) / rate['manual']:.2f}, "
                                f"/ dedicated = {max(dynamic) / rate['dedicated']:.2f}")
            for model in ("ordered", "dynamic"):
                if f"{model} 1" in rate:
                    ns = best[f"{model} 1"] * 1e9 / (rows * operators)
                    verdicts.append(f"- {name}, cost {cost:g}: {model} at 1 worker, wall ns per tuple per operator "
                                    f"{ns:.1f}")
    print("\nEvery output was checked equal to the first contender's.\n")
    print("\n".join(verdicts))
    if args.trace:
        with open(args.trace, "w") as f:
            json.dump(traces, f, indent=1)
    if args.plot:
        os.makedirs(args.plot, exist_ok=True)
        for key, trace in traces.items():
            name = key.replace(", ", "_").replace(" ", "-")
            po.plot_thread_levels(trace, os.path.join(args.plot, f"{name}.png"), title=key)


if __name__ == "__main__":
    main()
