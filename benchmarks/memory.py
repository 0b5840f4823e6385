"""Memory of a long multiway aggregation: inputs generated lazily, results dropped as they come.

    python -m benchmarks.memory --tuples 100000000 --inputs 4 --design tumlsc

Smart-meter readings: ``--meters`` meters (243 by default, the k-OI query of bench_aggregate)
report once a second each, at their own phase, through ``--inputs`` concentrators (meter m through
concentrator m % inputs). Each input is a generator that builds one batch at a time when the
engine pulls it, so the input data never exists in memory all at once; the result batches are
counted and dropped. Query: count and sum of kWh per meter over windows of ``--window`` seconds
advancing by ``--advance``.

Printed: tuples, seconds, Mt/s; resident memory (VmRSS of /proc/self/status) before the run and
when 10 %, 50 % and 100 % of the tuples have been aggregated; the process's peak RSS
(getrusage ru_maxrss, which includes the imports); and for ``tumlsc`` the most T-Gate arenas
alive at once. Flat sampled RSS over the run means no unbounded growth. The machine may be
shared: the throughput is indicative only.
"""

from __future__ import annotations

import argparse
import resource
import time as clock
from collections.abc import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

import pyarrow_ops as po

START_MS = int(np.datetime64("2026-01-01T00:00:00", "ms").astype(np.int64))
TIME_TYPES = {"timestamp": pa.timestamp("ms", tz="UTC"), "int64": pa.int64()}


def rss_mib() -> float:
    """The current resident set size (VmRSS) in MiB."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


def peak_rss_mib() -> float:
    """The process's peak resident set size so far (ru_maxrss, KiB on Linux) in MiB."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def schema(time_type: pa.DataType) -> pa.Schema:
    return pa.schema([("time", time_type), ("meter", pa.uint32()), ("kwh", pa.float64())])


def meter_input(
    index: int, inputs: int, rows: int, *, meters: int, batch_rows: int, time_type: pa.DataType, seed: int
) -> Iterator[pa.RecordBatch]:
    """Input ``index``: ``rows`` readings of the meters m with m % inputs == index, sorted by time
    (ms), made ``batch_rows`` at a time as they are pulled."""
    rng = np.random.default_rng([seed, index])
    mine = np.arange(index, meters, inputs, dtype=np.uint32)
    phase = np.random.default_rng(seed).integers(0, 1000, meters)[mine]  # a meter's phase is global
    order = np.argsort(phase, kind="stable")
    mine, phase = mine[order], phase[order]  # within a second, the meters in phase order
    sch = schema(time_type)
    for first in range(0, rows, batch_rows):
        r = np.arange(first, min(first + batch_rows, rows), dtype=np.int64)
        second, j = np.divmod(r, len(mine))
        yield pa.record_batch(
            [
                pa.array(START_MS + second * 1000 + phase[j]).cast(time_type),
                pa.array(mine[j]),
                pa.array(rng.gamma(2.0, 0.05, len(r))),
            ],
            schema=sch,
        )


def run(
    *, tuples: int, inputs: int, design: str, threads: int | None = None, meters: int = 243,
    batch_rows: int = 65536, time_type: str = "timestamp", window_s: int = 30, advance_s: int = 3, seed: int = 0,
) -> dict[str, object]:
    """Runs the aggregation once; returns what main() prints."""
    if inputs < 1 or inputs > meters or tuples < 0 or window_s % advance_s:
        raise ValueError("need 1 <= inputs <= meters, tuples >= 0 and window a multiple of advance")
    ttype = TIME_TYPES[time_type]
    sources = [
        meter_input(i, inputs, tuples // inputs + (i < tuples % inputs), meters=meters, batch_rows=batch_rows,
                    time_type=ttype, seed=seed)
        for i in range(inputs)
    ]
    rss = {"start": rss_mib()}
    marks = [(0.1, "10%"), (0.5, "50%")]
    start = clock.perf_counter()
    result = po.aggregate(
        sources, time="time", key="meter", window=po.sliding(window_s * 1000, advance_s * 1000),
        aggs={"n": po.count(), "kwh": po.sum("kwh")}, design=design, threads=threads,
    )
    out_rows = counted = 0
    for batch in result:  # each result batch is dropped once counted
        out_rows += batch.num_rows
        counted += pc.sum(batch.column("n")).as_py() or 0
        done = result.stats()["tuples"]
        while marks and done >= marks[0][0] * tuples:
            rss[marks.pop(0)[1]] = rss_mib()
    seconds = clock.perf_counter() - start
    rss["100%"] = rss_mib()
    stats = result.stats()
    if stats["tuples"] != tuples or counted != tuples * (window_s // advance_s):
        raise AssertionError(f"aggregated {stats['tuples']} tuples, counted {counted}; expected {tuples}")
    return {
        "design": design, "inputs": inputs, "threads": threads, "tuples": tuples, "seconds": seconds,
        "output_rows": out_rows, "rss_mib": rss, "peak_rss_mib": peak_rss_mib(),
        "peak_live_arenas": stats["peak_live_arenas"],
    }


def report(r: dict[str, object]) -> list[str]:
    rss = r["rss_mib"]
    assert isinstance(rss, dict)
    lines = [
        f"design {r['design']}, inputs {r['inputs']}, threads {r['threads'] or 'default'}",
        f"tuples {r['tuples']}  seconds {r['seconds']:.2f}  Mt/s {r['tuples'] / r['seconds'] / 1e6:.2f}  "
        f"output rows {r['output_rows']}",
        "RSS MiB: " + "  ".join(f"{k} {rss.get(k, float('nan')):.1f}" for k in ("start", "10%", "50%", "100%"))
        + f"  peak (ru_maxrss) {r['peak_rss_mib']:.1f}",
    ]
    if r["peak_live_arenas"] is not None:
        lines.append(f"T-Gate peak_live_arenas {r['peak_live_arenas']} (at most 4096 rows each)")
    return lines


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tuples", type=int, default=100_000_000)
    parser.add_argument("--inputs", type=int, default=4)
    parser.add_argument("--design", choices=po.DESIGNS, default="tumlsc")
    parser.add_argument("--threads", type=int, default=None, help="engine producer threads (default: min(inputs, cores))")
    parser.add_argument("--meters", type=int, default=243)
    parser.add_argument("--batch-rows", type=int, default=65536, help="rows per generated input batch")
    parser.add_argument("--time-type", choices=sorted(TIME_TYPES), default="timestamp")
    parser.add_argument("--window", type=int, default=30, help="window length in seconds")
    parser.add_argument("--advance", type=int, default=3, help="window advance in seconds")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    r = run(tuples=args.tuples, inputs=args.inputs, design=args.design, threads=args.threads, meters=args.meters,
            batch_rows=args.batch_rows, time_type=args.time_type, window_s=args.window, advance_s=args.advance,
            seed=args.seed)
    for line in report(r):
        print(line, flush=True)


if __name__ == "__main__":
    main()
