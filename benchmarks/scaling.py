"""Multicore scaling of pipelines and graphs: input tuples per second at 1, 2, 4, ... workers, printed
as markdown. For machines with more cores than the development one (the 16-core device machine).

    python -m benchmarks.scaling [--rows 10000000] [--threads 1,2,4,8,16] [--repeat 2]

Workloads (one sorted input unless said; every run's output is checked equal to the 1-worker run's):
  stateless   10 x with_columns(x_i = v + i) (fused into one task)
  sessions    sessionize(user, 30 min) -> running([user, session], count, sum(price))
  graph (a)   one clickstream feeding two outputs: the sessions above, and per item the hourly view
              count with the top 3 items per hour (window_aggregate -> top_k)
  graph (b)   readings priced by the tariff in force (join_asof with a tariff stream, rows/100),
              then cost = kwh * price and a 15-minute sum per meter
  filter (4 inputs)            benchmarks.pipelines' stateless pipeline (filter(price not null & event !=
                               "view"), two computed columns) over benchmarks.graphs' clickstream dealt to 4
                               inputs: the filter runs on each input before the merge (push_down)
  filter (4 inputs; merged first)   the same with push_down=False
  merge (4 inputs)  po.merge(threads=t) of 4 smart-meter tables (pyarrow_ops.datasets), to a table: the
                    regions of ready rows cut into parts merged side by side
Throughput is rows of input (both inputs for graph (b)) over the best run's wall time. Only figures
of one run compare: the machine's speed is its own.
"""

from __future__ import annotations

import argparse
import os
import time as clock

import numpy as np
import pyarrow as pa

import pyarrow_ops as po
from pyarrow_ops import col

MINUTE = 60_000  # the time columns are in milliseconds


def clickstream(rows: int, seed: int = 1) -> pa.Table:
    rng = np.random.default_rng(seed)
    users = max(1, rows // 10)
    return pa.table({
        "ts": np.cumsum(rng.integers(0, 3, rows)).astype(np.int64) * 50,
        "user": (rng.zipf(1.3, rows) % users).astype(np.int64),
        "item": (rng.zipf(1.5, rows) % 50_000).astype(np.int64),
        "price": rng.random(rows) * 100,
    })


def readings(rows: int, seed: int = 2) -> tuple[pa.Table, pa.Table]:
    rng = np.random.default_rng(seed)
    meters = max(1, rows // 100)
    reads = pa.table({"ts": np.sort(rng.integers(0, rows * 10, rows)).astype(np.int64),
                      "meter": rng.integers(0, meters, rows).astype(np.int64), "kwh": rng.random(rows)})
    n = max(1, rows // 100)
    tariffs = pa.table({"ts": np.sort(rng.integers(0, rows * 10, n)).astype(np.int64),
                        "meter": rng.integers(0, meters, n).astype(np.int64), "price": rng.random(n)})
    return reads, tariffs


def workloads(rows: int):
    clicks = clickstream(rows)
    reads, tariffs = readings(rows)

    def stateless():
        p = po.Pipeline(clicks, time="ts")
        for i in range(10):
            p = p.with_columns(**{f"x{i}": col("price") + i})
        return {"out": p}, rows

    def sessions_of(p):
        return p.sessionize("user", gap=30 * MINUTE).running(["user", "session"], {"n": po.count(),
                                                                                    "spend": po.sum("price")})

    def sessions():
        return {"sessions": sessions_of(po.Pipeline(clicks, time="ts"))}, rows

    def graph_a():
        c = po.Pipeline(clicks, time="ts")
        top = c.window_aggregate(po.tumbling(60 * MINUTE), {"n": po.count()}, key="item").top_k(3, "n", per="window_start")
        return {"sessions": sessions_of(c), "top_items": top}, rows

    def graph_b():
        q = (po.Pipeline(reads, time="ts").join_asof(po.Pipeline(tariffs, time="ts"), by="meter")
             .with_columns(cost=col("kwh") * col("price"))
             .window_aggregate(po.tumbling(15 * MINUTE), {"cost": po.sum("cost"), "n": po.count()}, key="meter"))
        return {"cost": q}, reads.num_rows + tariffs.num_rows

    def filtered(push_down: bool):
        def build():
            from benchmarks.graphs import clickstream as events
            from benchmarks.pipelines import split
            if "parts" not in cache:
                cache["parts"] = split(events(rows), 4)
            p = (po.Pipeline(cache["parts"], time="ts").filter(col("price").is_not_null() & (col("event") != "view"))
                 .with_columns(gross=col("price") * 1.2, minute=col("ts") // MINUTE))
            return {"out": p}, rows, {"push_down": push_down}
        return build

    def merged():
        from pyarrow_ops.datasets import smart_meter_readings
        if "meters" not in cache:
            cache["meters"] = smart_meter_readings(rows=rows, concentrators=4, seed=0)
        tables = cache["meters"]
        # Not a graph: a function of the thread count giving the outputs.
        return (lambda t: {"merged": po.merge(tables, time="time", threads=t).to_arrow()}), rows

    cache: dict[str, list[pa.Table]] = {}
    return {"stateless": stateless, "sessions": sessions, "graph (a)": graph_a, "graph (b)": graph_b,
            "filter (4 inputs)": filtered(True), "filter (4 inputs; merged first)": filtered(False),
            "merge (4 inputs)": merged}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--threads", default=None, help="comma-separated (default 1, 2, 4, ... up to the cores)")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--only", default=None, help="comma-separated workload names")
    args = parser.parse_args(argv)
    cores = os.cpu_count() or 1
    threads = [int(t) for t in args.threads.split(",")] if args.threads else [t for t in (1, 2, 4, 8, 16, 32) if t <= cores]
    chosen = workloads(args.rows)
    if args.only:
        chosen = {k: v for k, v in chosen.items() if k in args.only.split(",")}
    print(f"# Scaling, {args.rows:,} rows, best of {args.repeat}, {cores} cores, pyarrow-ops threads {threads}\n")
    print("| workload | " + " | ".join(f"{t} w Mt/s" for t in threads) + " | " +
          " | ".join(f"x{t}" for t in threads[1:]) + " |")
    print("|---|" + "---:|" * (2 * len(threads) - 1))
    for name, build in chosen.items():
        figures, reference = [], None
        for t in threads:
            best = float("inf")
            for _ in range(args.repeat):
                outputs, tuples, *options = build()
                start = clock.perf_counter()
                if callable(outputs):
                    tables = outputs(t)
                else:
                    tables = po.run(outputs, threads=t, **(options[0] if options else {})).to_arrow()
                best = min(best, clock.perf_counter() - start)
                if reference is None:
                    reference = tables
                else:
                    for k, table in tables.items():
                        assert table.equals(reference[k]), f"{name}: {t} workers differ from 1 on {k}"
                del tables
            figures.append(tuples / best / 1e6)
        speedups = [f / figures[0] for f in figures[1:]]
        print(f"| {name} | " + " | ".join(f"{f:.2f}" for f in figures) + " | " +
              " | ".join(f"{s:.2f}" for s in speedups) + " |", flush=True)
    print("\nEvery output of every thread count was checked equal to the 1-worker run's.")


if __name__ == "__main__":
    main()
