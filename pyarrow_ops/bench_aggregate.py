"""The multiway aggregation paper's measurements on this machine, printed as tables.

    python -m pyarrow_ops.bench_aggregate [--rows 2000000] [--inputs 1,4,20] [--repeat 2]

1. T-Gate against a concurrent skip list that checks readiness by scanning every input (Figure 7).
2. Queries k-OI, k-OS (smart meters, 243 keys) and K-OI, K-OS (song comments, 40,000 keys), window
   30 s advancing by 3 s (Table 2): tuples/s of MQ, MQLF, TuMLSC and of the fastest exact Polars and
   DuckDB formulations (pyarrow_ops.peers), each checked equal to TuMLSC's table.
3. Emission latency of TuMLSC (arrival of the tuple completing a window set to the hand-out of its
   rows), p50 and p99, with the inputs paced at half of its measured maximum throughput.
Throughputs are medians of ``--repeat`` runs; the machine is shared, so compare within one run.
"""

from __future__ import annotations

import argparse
import time as clock

import numpy as np
import pyarrow as pa

import pyarrow_ops as po
from pyarrow_ops import _engine, peers
from pyarrow_ops.datasets import smart_meter_readings, song_comments

SIZE_MS, ADVANCE_MS = 30_000, 3_000
QUERIES = {  # id: (dataset, key column, output name, function, column)
    "k-OI": ("meters", "meter", "count", None),
    "k-OS": ("meters", "meter", "first", "kwh"),
    "K-OI": ("songs", "song", "count", None),
    "K-OS": ("songs", "song", "first", "length"),
}


def workload(kind: str, rows: int, inputs: int) -> list[pa.Table]:
    if kind == "meters":
        # 243 meters reporting every second through `inputs` concentrators: ~30 readings per meter
        # and window, so the cost is in the tuples, not in writing output rows.
        return smart_meter_readings(rows=rows, meters=243, concentrators=inputs, period_ms=1_000, seed=1)
    return song_comments(rows=rows, servers=inputs, seed=1)


def _median(values: list[float]) -> float:
    return float(np.median(values))


def timed(fn, repeat: int) -> tuple[float, object]:
    times, out = [], None
    for _ in range(repeat):
        start = clock.perf_counter()
        out = fn()
        times.append(clock.perf_counter() - start)
    return _median(times), out


def gate_table(rows: int, inputs: list[int], repeat: int) -> None:
    print(f"\nT-Gate vs scanning skip list, {rows:,} tuples, 2 producer threads (Mt/s)")
    print(f"{'inputs':>6} {'T-Gate':>8} {'scan':>8} {'ratio':>6}")
    for k in inputs:
        rates = {}
        for scan in (False, True):
            secs = [_engine.benchmark_gate(k, rows, scan, 2, 1024)[0] for _ in range(repeat)]
            rates[scan] = rows / _median(secs) / 1e6
        print(f"{k:>6} {rates[False]:>8.2f} {rates[True]:>8.2f} {rates[False] / rates[True]:>6.2f}")


def run_engine(tables, key, agg, design):
    name, fn, col = agg
    return po.aggregate(tables, time="time", key=key, window=po.sliding(SIZE_MS, ADVANCE_MS),
                        aggs={name: getattr(po, fn)(col) if col else po.count()}, design=design).to_arrow()


def query_table(rows: int, inputs: list[int], repeat: int) -> dict:
    print(f"\nMultiway aggregation, {rows:,} tuples, window {SIZE_MS} ms / {ADVANCE_MS} ms (Mt/s)")
    header = f"{'query':>5} {'inputs':>6} {'mq':>7} {'mqlf':>7} {'tumlsc':>7} {'polars':>7} {'duckdb':>7} {'tumlsc/best':>11}"
    print(header)
    results = {}
    for qid, (kind, key, fn, col) in QUERIES.items():
        for k in inputs:
            tables = workload(kind, rows, k)
            n = sum(t.num_rows for t in tables)
            agg = (fn, fn, col)
            row = {}
            reference = None
            for design in po.DESIGNS:
                secs, out = timed(lambda: run_engine(tables, key, agg, design), repeat)
                row[design] = n / secs / 1e6
                if reference is None:
                    reference = out
                elif not out.equals(reference):
                    raise AssertionError(f"{qid}: design {design} differs from {po.DESIGNS[0]}")
            for peer, fn_ in (("polars", peers.polars_aggregate), ("duckdb", peers.duckdb_aggregate)):
                secs, out = timed(lambda: fn_(tables, time="time", key=[key], size=SIZE_MS, advance=ADVANCE_MS,
                                              offset=0, aggs={fn: (fn, col)}), repeat)
                row[peer] = n / secs / 1e6
                if not out.select(reference.column_names).cast(reference.schema).equals(reference):
                    raise AssertionError(f"{qid}: {peer} differs from the engine")
            best = max(row["polars"], row["duckdb"])
            results[(qid, k)] = row
            print(f"{qid:>5} {k:>6} {row['mq']:>7.2f} {row['mqlf']:>7.2f} {row['tumlsc']:>7.2f} "
                  f"{row['polars']:>7.2f} {row['duckdb']:>7.2f} {row['tumlsc'] / best:>11.2f}", flush=True)
    return results


def latency_table(rows: int, inputs: list[int], results: dict) -> None:
    print("\nTuMLSC emission latency at half its maximum throughput (k-OS)")
    print(f"{'inputs':>6} {'rate Mt/s':>9} {'p50 ms':>7} {'p99 ms':>7} {'window sets':>11}")
    for k in inputs:
        tables = workload("meters", rows, k)
        rate = results[("k-OS", k)]["tumlsc"] * 1e6 / 2
        # Small batches, paced: tuples arrive spread over time as from a live source.
        streams = [po.io.as_stream(pa.RecordBatchReader.from_batches(t.schema, t.to_batches(max_chunksize=64)), i)
                   for i, t in enumerate(tables)]
        native, handle = _engine.aggregate(streams, None, k, "time", ["meter"], SIZE_MS, ADVANCE_MS, 0,
                                           [("first", "first", "kwh")], "tumlsc", 0, 65536, True, rate)
        for _ in po.Result(native):
            pass
        lat = np.array(handle.stats()["latencies_ns"]) / 1e6
        print(f"{k:>6} {rate / 1e6:>9.2f} {np.percentile(lat, 50):>7.3f} {np.percentile(lat, 99):>7.3f} {lat.size:>11}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--inputs", default="1,4,20")
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args(argv)
    inputs = [int(x) for x in args.inputs.split(",")]
    gate_table(args.rows, inputs, args.repeat)
    results = query_table(args.rows, inputs, args.repeat)
    latency_table(args.rows, inputs, results)


if __name__ == "__main__":
    main()
