"""The multiway aggregation paper's measurements on this machine, printed as tables.

    python -m benchmarks.aggregate [--rows 2000000] [--inputs 1,4,20] [--repeat 2] [--threads auto]
        [--designs mq,tumlsc] [--queries k-OI,W-OI] [--peers polars,duckdb,spark] [--latency-designs tumlsc]
        [--push-designs sliced,wiml]

1. T-Gate against a concurrent skip list that checks readiness by scanning every input (Figure 7).
2. The queries of the paper's Table 2 (``QUERIES``): k-OI, k-OS on smart meters (243 keys), K-OI, K-OS on
   song comments (40,000 keys), window 30 s advancing by 3 s, and w-OI, W-OI (mean kWh per meter; 20 s
   and 40 s windows advancing by 2 s, so each tuple is in 10 and 20 windows). One row per (query, inputs,
   threads): tuples/s of every design of ``po.DESIGNS`` (read at run time; "n/a" where a design rejects the
   query with ValueError/TypeError) and of each peer of benchmarks.peers (Polars, DuckDB, optionally
   Spark) in its fastest formulation (every formulation is timed, the best is shown with its name; all are
   listed after the table), then the best design's rate over the best peer's, and (with ``auto`` among
   the designs) ``auto``'s rate over the best peer's and the design it chose ("chosen"). Every design's table must
   equal the first design's exactly (docs/semantics.md); every peer formulation's table must equal it
   too, floating-point columns within a relative 1e-9 (peers add floats in another order).
3. Emission latency, p50 and p99, of each ``--latency-designs`` design (default: the first of
   ``--designs``) on k-OS: from the moment a window set is complete (the last input to get past its end
   handed the engine a tuple, heartbeat or close there; ``MultiwayStats::latencies_ns``) to the hand-out
   of its rows. The inputs arrive as from live sources, in batches of ``LATENCY_BATCH`` rows, paced at
   half of the design's maximum throughput in that same configuration (measured first, unpaced; the
   table shows it beside the maximum with whole batches from table 2).
4. With ``--push-designs``: the push form's throughput on the ``--queries``, ``live_aggregate`` fed by one
   Python thread per input in ``PUSH_BATCH``-row batches, every table equal to the first design's, and
   the design ``auto`` picks for it.
Throughputs are the best of ``--repeat`` runs, interleaved across contenders (``query_table``); the
machine is shared, so compare within one run. Spark (local[2]) is started once; its start-up and a small
warm-up query are reported and not counted.
"""

from __future__ import annotations

import argparse
import threading
import time as clock
from typing import NamedTuple

import numpy as np
import pyarrow as pa

import pyarrow_ops as po
from benchmarks import peers
from pyarrow_ops import _engine, _testing
from pyarrow_ops.datasets import smart_meter_readings, song_comments


class Query(NamedTuple):
    dataset: str  # "meters" or "songs"
    key: str
    function: str
    column: str | None
    size_ms: int
    advance_ms: int


QUERIES = {
    "k-OI": Query("meters", "meter", "count", None, 30_000, 3_000),
    "K-OI": Query("songs", "song", "count", None, 30_000, 3_000),
    "k-OS": Query("meters", "meter", "first", "kwh", 30_000, 3_000),
    "K-OS": Query("songs", "song", "first", "length", 30_000, 3_000),
    "w-OI": Query("meters", "meter", "mean", "kwh", 20_000, 2_000),  # each tuple in 10 windows
    "W-OI": Query("meters", "meter", "mean", "kwh", 40_000, 2_000),  # each tuple in 20 windows
}
PEERS = {  # name: (function, formulations)
    "polars": (peers.polars_aggregate, peers.FORMULATIONS),
    "duckdb": (peers.duckdb_aggregate, peers.FORMULATIONS),
    "spark": (peers.spark_aggregate, peers.SPARK_FORMULATIONS),
}
LATENCY_QUERY = "k-OS"
LATENCY_BATCH = 64  # rows per batch of the paced inputs
PUSH_BATCH = 4096  # rows per pushed batch in the push-form table
RELATIVE_TOLERANCE = 1e-9
_workloads: dict[tuple[str, int, int], list[pa.Table]] = {}


def workload(kind: str, rows: int, inputs: int) -> list[pa.Table]:
    """The dataset's tables (generated once per run)."""
    if (kind, rows, inputs) not in _workloads:
        if kind == "meters":
            # 243 meters reporting every second through `inputs` concentrators: ~30 readings per meter
            # and window, so the cost is in the tuples, not in writing output rows.
            tables = smart_meter_readings(rows=rows, meters=243, concentrators=inputs, period_ms=1_000, seed=1)
        else:
            tables = song_comments(rows=rows, servers=inputs, seed=1)
        _workloads[(kind, rows, inputs)] = tables
    return _workloads[(kind, rows, inputs)]


def same_table(out: pa.Table, reference: pa.Table, rtol: float = RELATIVE_TOLERANCE) -> bool:
    """Equal, but floating-point columns within a relative tolerance (NaN equal to NaN, nulls in place)."""
    if out.num_rows != reference.num_rows or set(out.column_names) != set(reference.column_names):
        return False
    out = out.select(reference.column_names).cast(reference.schema)
    for name in reference.column_names:
        got, want = out.column(name), reference.column(name)
        if not pa.types.is_floating(want.type):
            if not got.equals(want):
                return False
            continue
        if not got.is_null().equals(want.is_null()):
            return False
        x = got.to_numpy(zero_copy_only=False).astype(np.float64)
        y = want.to_numpy(zero_copy_only=False).astype(np.float64)
        if not np.allclose(x, y, rtol=rtol, atol=0.0, equal_nan=True):
            return False
    return True


def gate_table(rows: int, inputs: list[int], repeat: int) -> None:
    print(f"\nT-Gate vs scanning skip list, {rows:,} tuples, 2 producer threads (Mt/s)")
    print(f"{'inputs':>6} {'T-Gate':>8} {'scan':>8} {'ratio':>6}")
    for k in inputs:
        rates = {}
        for scan in (False, True):
            secs = [_testing.benchmark_gate(k, rows, scan, 2, 1024)[0] for _ in range(repeat)]
            rates[scan] = rows / min(secs) / 1e6
        print(f"{k:>6} {rates[False]:>8.2f} {rates[True]:>8.2f} {rates[False] / rates[True]:>6.2f}")


def _engine_aggs(q: Query) -> dict:
    return {q.function: getattr(po, q.function)(q.column) if q.column else po.count()}


def run_engine(tables, q: Query, design: str, threads: int | None, chosen: dict | None = None) -> pa.Table:
    """The engine's table; ``chosen["design"]`` gets the design the run used (what ``auto`` picked)."""
    run = po.aggregate(tables, time="time", key=q.key, window=po.sliding(q.size_ms, q.advance_ms),
                       aggs=_engine_aggs(q), design=design, threads=threads)
    out = run.to_arrow()
    if chosen is not None:
        chosen["design"] = run.stats()["design"]
    return out


def run_peer(peer: str, tables, q: Query, formulation: str, spark=None) -> pa.Table:
    fn = PEERS[peer][0]
    extra = {"spark": spark} if peer == "spark" else {}
    return fn(tables, time="time", key=[q.key], size=q.size_ms, advance=q.advance_ms, offset=0,
              aggs={q.function: (q.function, q.column)}, formulation=formulation, **extra)


def start_spark(rows: int):
    """The shared local Spark session, started and warmed up (a small query per formulation): not timed."""
    try:
        import pyspark
    except ImportError:
        raise SystemExit("--peers spark needs PySpark: pip install 'pyarrow-ops[spark]' (and Java 17+)") from None
    start = clock.perf_counter()
    spark = peers.spark_session()
    started = clock.perf_counter() - start
    tables = workload("meters", min(rows, 50_000), 2)
    for formulation in peers.SPARK_FORMULATIONS:
        run_peer("spark", tables, QUERIES["k-OS"], formulation, spark)
    print(f"\nSpark {pyspark.__version__} local[2]: session started in {started:.1f} s, "
          f"warmed up in {clock.perf_counter() - start - started:.1f} s (neither counted)")
    return spark


def _cell(rate: float | None, width: int = 7) -> str:
    return f"{'n/a':>{width}}" if rate is None else f"{rate:>{width}.2f}"


def query_table(rows: int, inputs: list[int], repeat: int, *, designs: list[str], threads: list[int | None],
                queries: list[str], peer_names: list[str], spark=None) -> dict:
    """Prints the throughput table; returns {(query, inputs, threads): {design or peer: Mt/s or None}}.

    Per (query, inputs) every contender (design and thread count, peer formulation) runs once per round,
    in turn, for ``repeat`` rounds, and its best round counts: a burst of load from the machine's other
    tenants then slows one round of everyone rather than every run of one contender.
    """
    print(f"\nMultiway aggregation, {rows:,} tuples (Mt/s, best of {repeat} interleaved rounds; "
          "peers: best formulation)")
    header = f"{'query':>5} {'window':>7} {'inputs':>6} {'threads':>7} " + " ".join(f"{d:>7}" for d in designs)
    header += "".join(f" {p:>15}" for p in peer_names) + f" {'best/peer':>9}"
    if "auto" in designs:
        header += f" {'auto/peer':>9} {'chosen':>7}"
    print(header)
    results, formulations = {}, []
    for qid in queries:
        q = QUERIES[qid]
        for k in inputs:
            tables = workload(q.dataset, rows, k)
            n = sum(t.num_rows for t in tables)
            chosen = {t: {} for t in threads}  # threads -> {"design": what auto ran}
            runs = {("engine", t, d): (lambda t=t, d=d: run_engine(tables, q, d, t, chosen[t] if d == "auto" else None))
                    for t in threads for d in designs}
            runs.update({("peer", p, f): (lambda p=p, f=f: run_peer(p, tables, q, f, spark))
                         for p in peer_names for f in PEERS[p][1]})
            best: dict[tuple, float | None] = {}
            reference, first = None, None
            for _ in range(repeat):
                for name, fn in runs.items():
                    if name in best and best[name] is None:
                        continue  # a design that rejected the query
                    start = clock.perf_counter()
                    try:
                        out = fn()
                    except (ValueError, TypeError):
                        if name[0] != "engine":
                            raise
                        best[name] = None  # the design does not take this query
                        continue
                    secs = clock.perf_counter() - start
                    if name not in best:  # first round: check the table
                        if reference is None:
                            reference, first = out, name
                        elif name[0] == "engine" and first[0] == "engine":
                            if not out.equals(reference):
                                raise AssertionError(f"{qid}: design {name[2]} (threads {name[1]}) differs from "
                                                     f"{first[2]}")
                        elif not same_table(out, reference):
                            raise AssertionError(f"{qid}: {' '.join(map(str, name[1:]))} differs from "
                                                 f"{' '.join(map(str, first[1:]))}")
                    best[name] = min(secs, best.get(name) or secs)
            engine_rates = {t: {d: (None if best[("engine", t, d)] is None else n / best[("engine", t, d)] / 1e6)
                                for d in designs} for t in threads}
            peer_rates: dict[str, tuple[float, str]] = {}
            for peer in peer_names:
                for formulation in PEERS[peer][1]:
                    secs = best[("peer", peer, formulation)]
                    rate = n / secs / 1e6
                    formulations.append((qid, k, peer, formulation, secs, rate))
                    if peer not in peer_rates or rate > peer_rates[peer][0]:
                        peer_rates[peer] = (rate, formulation)
            best_peer = max((r for r, _ in peer_rates.values()), default=None)
            window = f"{q.size_ms // 1000}s/{q.advance_ms // 1000}s"
            for t in threads:
                row = dict(engine_rates[t])
                row.update({p: r for p, (r, _) in peer_rates.items()})
                results[(qid, k, t)] = row
                best_design = max((r for r in engine_rates[t].values() if r is not None), default=None)
                ratio = f"{best_design / best_peer:>9.2f}" if best_design and best_peer else f"{'-':>9}"
                line = f"{qid:>5} {window:>7} {k:>6} {t or 'auto':>7} "
                line += " ".join(_cell(engine_rates[t][d]) for d in designs)
                line += "".join(f" {_cell(peer_rates[p][0])} {peer_rates[p][1]:<7}" for p in peer_names)
                line += f" {ratio}"
                if "auto" in designs:
                    auto = engine_rates[t]["auto"]
                    line += f" {auto / best_peer:>9.2f}" if auto and best_peer else f" {'-':>9}"
                    line += f" {chosen[t].get('design', '-'):>7}"
                print(line, flush=True)
    if formulations:
        print("\nPeer formulations (every one checked against the engine's table)")
        print(f"{'query':>5} {'inputs':>6} {'peer':>7} {'formulation':>11} {'seconds':>8} {'Mt/s':>7}")
        for qid, k, peer, formulation, secs, rate in formulations:
            print(f"{qid:>5} {k:>6} {peer:>7} {formulation:>11} {secs:>8.3f} {rate:>7.2f}")
    return results


def _native_aggregate(streams, k: int, q: Query, design: str, threads: int | None, rate: float):
    """_engine.aggregate with per-window-set latencies recorded (what po.aggregate does not ask for)."""
    if hasattr(_engine, "AggregateOptions"):  # the typed boundary
        aggs = [_engine.AggSpec(q.function, _engine.AggFunction[q.function], q.column or "")]
        query = _engine.AggregateQuery("time", [q.key], _engine.WindowSpec(q.size_ms, q.advance_ms, 0), aggs)
        options = _engine.AggregateOptions(query, threads=threads or 0, flush_each_window=True, rate=rate)
        return _engine.aggregate(streams, options, None if design == "auto" else _engine.Design[design])
    head = [streams, None, k, "time", [q.key], q.size_ms, q.advance_ms, 0,
            [(q.function, q.function, q.column or "")], design, threads or 0]
    tail = [65536, True, rate]
    try:
        return _engine.aggregate(*head, *tail)
    except TypeError:  # an engine whose aggregate also takes update_threads (after threads)
        return _engine.aggregate(*head, 0, *tail)


def _live_streams(tables: list[pa.Table]):
    """The tables as streams of LATENCY_BATCH-row batches, as live sources would send them.

    Each is a table of such batches, read through Arrow's C++ reader: a reader over a Python list
    (``RecordBatchReader.from_batches``) takes the GIL for every batch, and its contention with the
    consuming thread, not the engine, then sets the tail (p99 of 5 to 500 ms at 20 inputs, against
    under 1 ms from tables).
    """
    return [po.io.as_stream(pa.Table.from_batches(t.to_batches(max_chunksize=LATENCY_BATCH), t.schema), i)
            for i, t in enumerate(tables)]


def _latency_run(tables, k: int, q: Query, design: str, threads: int | None, rate: float):
    """One run over live-like streams (rate: tuples/s, 0 = unpaced): (seconds, latencies in ms)."""
    start = clock.perf_counter()
    native, handle = _native_aggregate(_live_streams(tables), k, q, design, threads, rate)
    for _ in po.Result(native):
        pass
    return clock.perf_counter() - start, np.array(handle.stats()["latencies_ns"]) / 1e6


def latency_table(rows: int, inputs: list[int], designs: list[str], threads: int | None, results: dict,
                  query: str = LATENCY_QUERY) -> None:
    q = QUERIES[query]
    print(f"\nEmission latency at half the design's maximum throughput with {LATENCY_BATCH}-row batches "
          f"({query}, threads {threads or 'auto'}; Mt/s)")
    print(f"{'design':>7} {'inputs':>6} {'max whole':>9} {'max live':>8} {'rate':>6} {'p50 ms':>7} {'p99 ms':>7} "
          f"{'window sets':>11}")
    for design in designs:
        for k in inputs:
            tables = workload(q.dataset, rows, k)
            whole = results.get((query, k, threads), {}).get(design)
            try:
                # The maximum in the live configuration: the best of two unpaced runs.
                secs = min(_latency_run(tables, k, q, design, threads, 0.0)[0] for _ in range(2))
            except (ValueError, TypeError):  # the design rejects the query
                print(f"{design:>7} {k:>6} {'n/a':>9}")
                continue
            top = sum(t.num_rows for t in tables) / secs / 1e6
            rate = top / 2
            _, lat = _latency_run(tables, k, q, design, threads, rate * 1e6)
            print(f"{design:>7} {k:>6} {_cell(whole, 9)} {top:>8.2f} {rate:>6.2f} {np.percentile(lat, 50):>7.3f} "
                  f"{np.percentile(lat, 99):>7.3f} {lat.size:>11}", flush=True)


def _push_run(tables, q: Query, design: str) -> tuple[float, pa.Table]:
    """live_aggregate fed by one Python thread per input (PUSH_BATCH-row batches), read by this one."""
    live = po.live_aggregate(tables[0].schema, inputs=len(tables), time="time", key=q.key,
                             window=po.sliding(q.size_ms, q.advance_ms), aggs=_engine_aggs(q), design=design)
    batches = [t.to_batches(max_chunksize=PUSH_BATCH) for t in tables]

    def feed(i: int) -> None:
        for b in batches[i]:
            live.push(i, b)
        live.close(i)

    start = clock.perf_counter()
    feeders = [threading.Thread(target=feed, args=(i,)) for i in range(len(tables))]
    for f in feeders:
        f.start()
    out = list(live)
    for f in feeders:
        f.join()
    return clock.perf_counter() - start, pa.Table.from_batches(out)


def push_table(rows: int, inputs: list[int], designs: list[str], queries: list[str], repeat: int) -> None:
    """The push form's throughput (live_aggregate, a pushing thread per input), the designs interleaved."""
    print(f"\nlive_aggregate, a pushing thread per input, {PUSH_BATCH}-row batches (Mt/s, best of {repeat})")
    print(f"{'query':>5} {'inputs':>6} " + " ".join(f"{d:>7}" for d in designs) + "  chosen")
    for qid in queries:
        q = QUERIES[qid]
        for k in inputs:
            tables = workload(q.dataset, rows, k)
            best: dict[str, float] = {}
            first = None
            for _ in range(repeat):
                for d in designs:
                    secs, out = _push_run(tables, q, d)
                    if first is None:
                        first = out
                    elif not same_table(out, first):
                        raise AssertionError(f"{d} on {qid}, {k} inputs: the push form's table differs")
                    best[d] = max(best.get(d, 0.0), rows / secs / 1e6)
            chosen = po.live_aggregate(tables[0].schema, inputs=k, time="time", key=q.key,
                                       window=po.sliding(q.size_ms, q.advance_ms), aggs=_engine_aggs(q))
            name = chosen.stats()["design"]
            chosen.cancel()
            print(f"{qid:>5} {k:>6} " + " ".join(f"{best[d]:>7.2f}" for d in designs) + f"  {name}", flush=True)


def _names(text: str, allowed, what: str, parser: argparse.ArgumentParser) -> list[str]:
    names = [x.strip() for x in text.split(",") if x.strip()]
    unknown = [x for x in names if x not in allowed]
    if unknown:
        parser.error(f"unknown {what} {', '.join(unknown)}; choose from {', '.join(allowed)}")
    return names


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--inputs", default="1,4,20")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--threads", default="auto",
                        help="comma-separated aggregate(threads=...) values; auto: the engine's default")
    parser.add_argument("--designs", default=None, help="comma-separated designs (default: all of po.DESIGNS)")
    parser.add_argument("--queries", default=",".join(QUERIES), help=f"comma-separated, of {', '.join(QUERIES)}")
    parser.add_argument("--peers", default="polars,duckdb", help=f"comma-separated, of {', '.join(PEERS)}")
    parser.add_argument("--latency-query", default=LATENCY_QUERY, help="the query of the latency table")
    parser.add_argument("--latency-designs", default=None,
                        help="designs of the latency table (default: the first of --designs; '' for none)")
    parser.add_argument("--push-designs", default="",
                        help="designs of the push-form table (live_aggregate fed by threads; default '': none)")
    args = parser.parse_args(argv)
    inputs = [int(x) for x in args.inputs.split(",")]
    threads = [None if x.strip() == "auto" else int(x) for x in args.threads.split(",")]
    designs = _names(args.designs, po.DESIGNS, "design", parser) if args.designs else list(po.DESIGNS)
    queries = _names(args.queries, QUERIES, "query", parser)
    peer_names = _names(args.peers, PEERS, "peer", parser)
    latency = designs[:1] if args.latency_designs is None else _names(args.latency_designs, po.DESIGNS, "design",
                                                                      parser)
    spark = start_spark(args.rows) if "spark" in peer_names else None
    gate_table(args.rows, inputs, args.repeat)
    results = query_table(args.rows, inputs, args.repeat, designs=designs, threads=threads, queries=queries,
                          peer_names=peer_names, spark=spark)
    if latency:
        latency_table(args.rows, inputs, latency, threads[0], results, args.latency_query)
    push = _names(args.push_designs, po.DESIGNS, "design", parser) if args.push_designs else []
    if push:
        push_table(args.rows, inputs, push, queries, args.repeat)


if __name__ == "__main__":
    main()
