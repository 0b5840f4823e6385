"""Three clickstream pipelines, each run by the engine and by Polars and DuckDB, at 1 and at several inputs,
printed as markdown.

    python -m benchmarks.pipelines [--rows N] [--repeat R] [--threads 1,2] [--inputs 1,4]
                                   [--pipelines stateless,sessions,windows] [--quick]

The input is benchmarks.graphs' TPCx-BB-shaped clickstream (``clickstream``: ts, user, item, price, event;
``--rows`` tuples, sorted by ts). With k > 1 inputs its rows are dealt to k inputs by a random input index
(``split``), each input keeping the time order, and the engine reads them as ``po.Pipeline([t0, ...],
time="ts")``: it merges them in the merged order (time, input index, position in the input), so ties in time
across inputs come out by input index, not as in the undealt table. The pipelines:

1. ``stateless``: ``filter(price is not null & event != "view")`` then ``with_columns(gross=price * 1.2,
   minute=ts // 60,000)``;
2. ``sessions``: ``sessionize("user", gap=30 min)`` then ``running(["user", "session"], {"n": count(),
   "spend": sum("price")})``: the sessions branch of benchmarks.graphs' query (a);
3. ``windows``: ``window_aggregate(tumbling(1 h), {"n": count(), "spend": sum("price")}, key="item")``: per
   item, an hour's views and spend, in the keyed window_aggregate's emission order (docs/pipeline.md).

Contenders: the engine (``Pipeline.run(threads=t).to_arrow()``), Polars (lazy; its own thread pool, fixed at
import) and DuckDB (``SET threads=t``), each in its fastest exact formulation we know. With several inputs a
peer merges them itself, inside its timed work as the engine's merge is inside the engine's: Polars concatenates
them in input order and sorts stably by ts; DuckDB orders by (ts, input, position), or for the windows takes each
window's first tuple as the least (ts, input, position). Throughput is input tuples per second.

Timing and checking as in benchmarks.graphs: contenders interleaved in rounds (``rounds``), each keeping its
best round; everything from the Arrow inputs to the Arrow output is timed, the peers' output cast to the
engine's output schema; every output must equal the engine's at the first thread count exactly
(``pa.Table.equals``, row order included), or AssertionError. Prices are multiples of 1/128, so every sum is
exact in any order and the peers' sums agree with the engine's to the bit; ``price * 1.2`` is one correctly
rounded product in all three. Then: the engine's throughput over the best peer's at each thread count, the
engine's worker time per tuple and operator (``PipelineResult.stats()`` of its best round) at the highest
thread count, and the bar of issue 29 (``BAR_*``). The machine is shared: compare figures within one run.
``--quick`` runs 200,000 tuples once (a smoke test: its figures mean nothing).
"""

from __future__ import annotations

import argparse
import time as clock
from collections.abc import Mapping, Sequence

import duckdb
import numpy as np
import polars as pl
import pyarrow as pa

import pyarrow_ops as po
from benchmarks.graphs import (PRICE_NULLS, SESSION_GAP_MS, Outputs, _Contenders, _duckdb,
                               _duckdb_windows_in_engine_order, _label, _polars_windows_in_engine_order, _positioned,
                               best_peer, checked_note, clickstream, clickstream_sizes, output_schemas, query_rows,
                               rounds)
from benchmarks.pipeline import Equal, _machine, rate, ratio, table, verdict
from pyarrow_ops import col

ROWS = 10_000_000
QUICK_ROWS = 200_000
THREADS = (1, 2)
INPUTS = (1, 4)
PIPELINES = ("stateless", "sessions", "windows")  # numbered 1, 2, 3 in the tables
SPLIT_SEED = 29

GROSS = 1.2  # stateless: gross = price * GROSS
MINUTE_MS = 60_000  # stateless: minute = ts // MINUTE_MS
WINDOW_MS = 3_600_000  # windows: tumbling, per item

# Issue 29's bar: at BAR_THREADS, every pipeline at least BAR_RATIO x the best peer, at each of BAR_INPUTS.
BAR_THREADS = 2
BAR_RATIO = 1.5
BAR_INPUTS = (1, 4)

PEERS = {
    "stateless": "Polars filter, with_columns (its filter runs below the merge's sort); DuckDB WHERE and the "
                 "projection, ORDER BY the merged order (one input: none, DuckDB keeps the scan's order: "
                 "preserve_insertion_order).",
    "sessions": "benchmarks.graphs' query (a) sessions: Polars diff() > gap, cum_sum over user, then int_range and "
                "cum_sum over (user, session); DuckDB lag and running sums over windows ordered by the merged "
                "order.",
    "windows": "group by (item, ts - ts % size) with each window's first tuple in the merged order (Polars: row "
               "index after the merge, min; DuckDB: min of the struct (ts, input, position)), then the keyed "
               "window_aggregate's emission order: by the position of the item's next window's first tuple, "
               "windows without one last by (window_start, item). Polars needs when(count > 0) for a null sum.",
}

DESCRIBE = {
    "stateless": f'filter(price is not null & event != "view"), with_columns(gross=price * {GROSS}, '
                 f"minute=ts // {MINUTE_MS:,})",
    "sessions": f'sessionize("user", gap={SESSION_GAP_MS:,}), running(["user", "session"], n=count(), '
                'spend=sum(price))',
    "windows": f'window_aggregate(tumbling({WINDOW_MS:,}), n=count(), spend=sum(price), key="item")',
}


# --- data --------------------------------------------------------------------------------------------


def split(source: pa.Table, inputs: int, seed: int = SPLIT_SEED) -> list[pa.Table]:
    """`source`'s rows dealt to `inputs` tables by a random input index per row (uniform), each in the
    source's order, so each is sorted by ts when the source is. One input: the source itself.

    >>> parts = split(clickstream(1000), 4)
    >>> len(parts), sum(p.num_rows for p in parts)
    (4, 1000)
    """
    if inputs == 1:
        return [source]
    index = np.random.default_rng(seed).integers(0, inputs, source.num_rows)
    return [source.filter(pa.array(index == i)) for i in range(inputs)]


# --- the engine --------------------------------------------------------------------------------------


def engine_pipeline(name: str, inputs: Sequence[pa.Table]) -> po.Pipeline:
    clicks = po.Pipeline(list(inputs), time="ts")
    if name == "stateless":
        return (clicks.filter(col("price").is_not_null() & (col("event") != "view"))
                .with_columns(gross=col("price") * GROSS, minute=col("ts") // MINUTE_MS))
    if name == "sessions":
        return (clicks.sessionize("user", gap=SESSION_GAP_MS)
                .running(["user", "session"], {"n": po.count(), "spend": po.sum("price")}))
    if name == "windows":
        return clicks.window_aggregate(po.tumbling(WINDOW_MS), {"n": po.count(), "spend": po.sum("price")},
                                       key="item")
    raise ValueError(f"unknown pipeline {name!r}")


# --- Polars ------------------------------------------------------------------------------------------


def polars_merged(inputs: Sequence[pa.Table]) -> pl.LazyFrame:
    """The inputs in the engine's merged order: concatenated in input order, then sorted stably by ts."""
    if len(inputs) == 1:
        return pl.from_arrow(inputs[0]).lazy()
    return pl.concat([pl.from_arrow(t).lazy() for t in inputs]).sort("ts", maintain_order=True)


def polars_stateless(frame: pl.LazyFrame) -> pl.LazyFrame:
    # Polars pushes the filter below the merge's sort (each input is filtered, fewer rows sorted).
    return (frame.filter(pl.col("price").is_not_null() & (pl.col("event") != "view"))
            .with_columns((pl.col("price") * GROSS).alias("gross"), (pl.col("ts") // MINUTE_MS).alias("minute")))


def polars_sessions(frame: pl.LazyFrame) -> pl.LazyFrame:
    """benchmarks.graphs.polars_clickstream's sessions, over any frame in the merged order."""
    in_user = pl.col("ts").diff() > SESSION_GAP_MS  # the key's first tuple: null, session 0
    return (frame
            .with_columns(in_user.fill_null(False).cum_sum().over("user").cast(pl.Int64).alias("session"))
            .with_columns(pl.int_range(1, pl.len() + 1, dtype=pl.Int64).over(["user", "session"]).alias("n"),
                          # cum_sum leaves a null price null: carry the sum so far over it (null until the
                          # key's first non-null price, as the engine's running sum)
                          pl.col("price").cum_sum().forward_fill().over(["user", "session"]).alias("spend")))


def polars_windows(frame: pl.LazyFrame) -> pl.LazyFrame:
    windows = (frame.with_row_index("__pos")  # the position in the merged order
               .group_by("item", (pl.col("ts") - pl.col("ts") % WINDOW_MS).alias("__ws"))
               # sum() of only nulls is 0 in Polars, null in the engine
               .agg(pl.len().cast(pl.Int64).alias("n"),
                    pl.when(pl.col("price").count() > 0).then(pl.col("price").sum()).alias("spend"),
                    pl.col("__pos").min().alias("__first")))
    return (_polars_windows_in_engine_order(windows, "item")
            .select(pl.col("__ws").alias("window_start"), (pl.col("__ws") + WINDOW_MS).alias("window_end"), "item",
                    "n", "spend"))


POLARS = {"stateless": polars_stateless, "sessions": polars_sessions, "windows": polars_windows}


def polars_run(name: str, inputs: Sequence[pa.Table], schema: pa.Schema) -> Outputs:
    return {name: POLARS[name](polars_merged(inputs)).collect().to_arrow().cast(schema)}


# --- DuckDB ------------------------------------------------------------------------------------------


def duckdb_sql(name: str, columns: Sequence[str], inputs: int) -> str:
    """The query over the table `clicks` (one input, with __pos: the position in the input) or the inputs
    `input0`, `input1`, ... (each with __pos), which `clicks` then unites with __input, the input index. The
    merged order is `ORDER BY ts, __input, __pos` (one input: `__pos`)."""
    order = "__pos" if inputs == 1 else "ts, __input, __pos"
    names = ", ".join(f'"{c}"' for c in columns)
    ctes = [] if inputs == 1 else [
        "clicks AS (" + " UNION ALL ".join(f"SELECT *, {i} AS __input FROM input{i}" for i in range(inputs)) + ")"]
    if name == "stateless":
        # One input: a filter and projection keep the scan's order (DuckDB's preserve_insertion_order, on
        # by default), so no ORDER BY is needed.
        query = (f"SELECT {names}, price * {GROSS}::DOUBLE AS gross, ts // {MINUTE_MS} AS minute FROM clicks "
                 "WHERE price IS NOT NULL AND event <> 'view'" + ("" if inputs == 1 else f" ORDER BY {order}"))
    elif name == "sessions":  # benchmarks.graphs.duckdb_clickstream's sessions, in the merged order
        upto = "ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW"
        ctes += [f"""marked AS (
                SELECT *, CASE WHEN ts - lag(ts) OVER (PARTITION BY "user" ORDER BY {order}) > {SESSION_GAP_MS}
                               THEN 1 ELSE 0 END AS __new
                FROM clicks)""",
                 f"""numbered AS (
                SELECT *, sum(__new) OVER (PARTITION BY "user" ORDER BY {order} {upto}) AS session FROM marked)"""]
        query = f"""
            SELECT {names}, CAST(session AS BIGINT) AS session, count(*) OVER w AS n, sum(price) OVER w AS spend
            FROM numbered
            WINDOW w AS (PARTITION BY "user", session ORDER BY {order} {upto})
            ORDER BY {order}"""
    elif name == "windows":
        # A window's first tuple in the merged order: the least (ts, input, position), a struct (structs
        # compare field by field; lead() and ORDER BY take them as they are).
        first = "min(__pos)" if inputs == 1 else "min({'t': ts, 'i': __input, 'p': __pos})"
        windows = f"""
            SELECT item, ts - ts % {WINDOW_MS} AS __ws, count(*) AS n, sum(price) AS spend, {first} AS __first
            FROM clicks GROUP BY item, __ws"""
        query = f"""
            SELECT __ws AS window_start, __ws + {WINDOW_MS} AS window_end, item, n, spend
            FROM ({_duckdb_windows_in_engine_order(windows, "item")})
            ORDER BY __close NULLS LAST, __ws, item"""
    else:
        raise ValueError(f"unknown pipeline {name!r}")
    return ("WITH " + ",\n".join(ctes) + "\n" if ctes else "") + query


def duckdb_run(name: str, inputs: Sequence[pa.Table], schema: pa.Schema, threads: int) -> Outputs:
    if len(inputs) == 1:  # the stateless query needs no positions
        tables = {"clicks": inputs[0] if name == "stateless" else _positioned(inputs[0])}
    else:
        tables = {f"input{i}": _positioned(t) for i, t in enumerate(inputs)}
    return _duckdb(threads, tables, {name: duckdb_sql(name, inputs[0].column_names, len(inputs))}, {name: schema})


# --- the run -----------------------------------------------------------------------------------------


def heading(name: str, inputs: int, inputs_list: Sequence[int]) -> str:
    """"1a. stateless, 1 input": the pipeline's number, a letter per input count."""
    number = PIPELINES.index(name) + 1
    letter = "abcdefghijklmnopqrstuvwxyz"[list(inputs_list).index(inputs)]
    return f"{number}{letter}. {name}, {inputs} input{'' if inputs == 1 else 's'}"


class Measured:
    """One pipeline at one input count: best seconds per contender, the Polars label, the engine's stats
    (of its fastest run at the highest thread count: the best round, as for the throughputs) and its output
    rows."""

    def __init__(self, best: dict[str, float], polars_label: str, stats: dict, out_rows: int) -> None:
        self.best, self.polars_label, self.stats, self.out_rows = best, polars_label, stats, out_rows


def measure(name: str, source: pa.Table, inputs_count: int, inputs_list: Sequence[int], repeat: int,
            threads: list[int]) -> Measured:
    rows = source.num_rows
    inputs = split(source, inputs_count)
    pipeline = engine_pipeline(name, inputs)
    schema = output_schemas({name: pipeline})[name]
    pool = pl.thread_pool_size()
    polars_label = _label("Polars", pool)
    # Per thread count, the stats of the engine's fastest run (the round its throughput comes from). Only the
    # stats are kept: a held result keeps its run's operator state alive through the runs after it.
    fastest: dict[int, tuple[float, dict]] = {}

    def engine(t: int) -> Outputs:
        start = clock.perf_counter()
        result = pipeline.run(threads=t)
        out = result.to_arrow()
        seconds = clock.perf_counter() - start
        if seconds < fastest.get(t, (float("inf"), {}))[0]:
            fastest[t] = (seconds, result.stats())
        return {name: out}

    c = _Contenders()
    for t in threads:
        c.add("engine", "engine: Pipeline.run", t, rows, lambda t=t: engine(t))
    merge = "" if inputs_count == 1 else "concat, stable sort by ts; "
    c.add("Polars", f"Polars (lazy: {merge}its thread pool)", pool, rows, lambda: polars_run(name, inputs, schema))
    order = ("" if inputs_count == 1 else "windows' first tuples by min (ts, input, position); "
             if name == "windows" else "ORDER BY ts, input, position; ")
    for t in threads:
        c.add("DuckDB", f"DuckDB ({order}SET threads)", t, rows, lambda t=t: duckdb_run(name, inputs, schema, t))
    equals = {name: Equal(name)}
    best = rounds(c.runs, repeat, equals)
    out_rows = equals[name].reference.num_rows
    sizes = [f"{t.num_rows:,}" for t in inputs]
    users, items = clickstream_sizes(rows)
    table(f"{heading(name, inputs_count, inputs_list)}: {DESCRIBE[name]}, {rows:,} tuples (input tuples/s, best of "
          f"{repeat} interleaved rounds)",
          ["contender", "threads", "input tuples", "best s", "input tuples/s", "output rows"],
          query_rows(best, c.labels, {label: f"{out_rows:,}" for label, *_ in c.labels}),
          [checked_note(list(equals.values()), f"the engine's run at {threads[0]} thread(s)"),
           (f"Input: one table of {rows:,} tuples sorted by ts" if inputs_count == 1 else
            f"Inputs: {inputs_count} tables of {' + '.join(sizes)} tuples (the rows dealt by a random input index, "
            "each table sorted by ts), merged by time, input index, position")
           + f"; {users:,} users, {items:,} items, price null in {PRICE_NULLS:.0%} of the rows.",
           f"Peers: {PEERS[name]}",
           f"Polars ran on its own pool of {pool} threads (polars.thread_pool_size(); fixed at import), whatever "
           "the row's engine/DuckDB thread count. Peers start from the same Arrow tables and end with Arrow tables "
           "cast to the engine's output schema, all timed; nothing is sorted before comparing."])
    return Measured(best, polars_label, fastest[max(threads)][1], out_rows)


def ratio_rows(measured: Mapping[tuple[str, int], Measured], rows: int, threads: list[int]) -> list[list[str]]:
    out = []
    for (name, k), m in measured.items():
        for t in threads:
            engine = rows / m.best[_label("engine", t)]
            peer, peer_rate = best_peer(m.best, rows, t, m.polars_label)
            out.append([name, str(k), str(t), rate(engine), peer, rate(peer_rate), ratio(engine / peer_rate)])
    return out


def operator_rows(measured: Mapping[tuple[str, int], Measured], rows: int) -> list[list[str]]:
    out = []
    for (name, k), m in measured.items():
        busy = cpu = 0
        for op in m.stats["operators"]:
            busy += op["busy_ns"]
            cpu += op["cpu_ns"]
            per_in = op["busy_ns"] / op["tuples_in"] if op["tuples_in"] else 0.0
            cpu_per_in = op["cpu_ns"] / op["tuples_in"] if op["tuples_in"] else 0.0
            label = op["name"] if op.get("copies", 1) == 1 else f"{op['name']} (x{op['copies']}, below the merge)"
            if op["name"] == "union":
                label = "union (the merge, after operators below it)"
            out.append([name, str(k), label, op["kind"], "yes" if op.get("fused") else "no",
                        f"{op['tuples_in']:,}", f"{op['busy_ns'] / 1e6:,.1f}", f"{per_in:.1f}",
                        f"{op['busy_ns'] / rows:.1f}", f"{op['cpu_ns'] / 1e6:,.1f}", f"{cpu_per_in:.1f}"])
        out.append([name, str(k), "(all operators)", "-", "-", f"{rows:,}", f"{busy / 1e6:,.1f}", "-",
                    f"{busy / rows:.1f}", f"{cpu / 1e6:,.1f}", "-"])
    return out


def bar_rows(measured: Mapping[tuple[str, int], Measured], rows: int) -> list[list[str]]:
    out, ok = [], True
    for (name, k), m in measured.items():
        if k not in BAR_INPUTS:
            continue
        engine = rows / m.best[_label("engine", BAR_THREADS)]
        peer, peer_rate = best_peer(m.best, rows, BAR_THREADS, m.polars_label)
        met = engine >= BAR_RATIO * peer_rate
        ok &= met
        out.append([f"{name}, {k} input{'' if k == 1 else 's'}: engine >= {BAR_RATIO:g} x best peer at "
                    f"{BAR_THREADS} threads", f"{ratio(engine / peer_rate)}x ({rate(engine)} t/s against {peer} "
                    f"{rate(peer_rate)} t/s)", verdict(met)])
    complete = all((n, k) in measured for n in PIPELINES for k in BAR_INPUTS)
    out.append([f"At {BAR_THREADS} threads, each pipeline at least {BAR_RATIO:g}x the best of Polars and DuckDB, "
                f"at {' and at '.join(map(str, BAR_INPUTS))} inputs",
                "every row above" if complete else "not every pipeline and input count ran: not judged",
                verdict(ok and complete)])
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=None, help=f"tuples (default {ROWS:,}; {QUICK_ROWS:,} with "
                                                               "--quick)")
    parser.add_argument("--repeat", type=int, default=None, help="interleaved rounds (default 3; 1 with --quick)")
    parser.add_argument("--threads", default=",".join(map(str, THREADS)),
                        help="engine and DuckDB threads, comma-separated (default 1,2)")
    parser.add_argument("--inputs", default=",".join(map(str, INPUTS)),
                        help="input counts, comma-separated (default 1,4)")
    parser.add_argument("--pipelines", default=",".join(PIPELINES), help=f"comma-separated, of {', '.join(PIPELINES)}")
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_ROWS:,} tuples, 1 round: a smoke test")
    args = parser.parse_args(argv)
    pipelines = [s.strip() for s in args.pipelines.split(",") if s.strip()]
    unknown = [s for s in pipelines if s not in PIPELINES]
    if unknown or not pipelines:
        parser.error(f"unknown pipeline {', '.join(unknown)}; choose from {', '.join(PIPELINES)}")
    pipelines = [p for p in PIPELINES if p in pipelines]  # the tables' order, each once

    def ints(text: str, option: str) -> list[int]:
        try:
            values = [int(v) for v in text.split(",") if v.strip()]
        except ValueError:
            values = []
        if not values or min(values) < 1 or len(set(values)) != len(values):
            parser.error(f"{option} takes distinct comma-separated positive ints, got {text!r}")
        return values

    threads = ints(args.threads, "--threads")
    inputs_list = sorted(ints(args.inputs, "--inputs"))
    if len(inputs_list) > 26:
        parser.error("--inputs takes at most 26 input counts")
    rows = args.rows or (QUICK_ROWS if args.quick else ROWS)
    repeat = args.repeat or (1 if args.quick else 3)
    if rows < 1000 or repeat < 1:
        parser.error("--rows must be at least 1000 and --repeat at least 1")
    start = clock.perf_counter()
    print(f"# Pipeline benchmarks: the engine against Polars and DuckDB"
          f"{' (--quick: a smoke test, the figures mean nothing)' if args.quick else ''}")
    print(f"\n{rows:,} tuples, best of {repeat} interleaved rounds, threads {', '.join(map(str, threads))}, inputs "
          f"{', '.join(map(str, inputs_list))}; pyarrow-ops {po.__version__}, Polars {pl.__version__} "
          f"({pl.thread_pool_size()} threads), DuckDB {duckdb.__version__}, pyarrow {pa.__version__}, numpy "
          f"{np.__version__}. {_machine()}", flush=True)
    source = clickstream(rows)
    measured: dict[tuple[str, int], Measured] = {}
    for name in pipelines:
        for k in inputs_list:
            measured[(name, k)] = measure(name, source, k, inputs_list, repeat, threads)

    table("4. Engine / best peer (same run)",
          ["pipeline", "inputs", "threads", "engine t/s", "best peer", "best peer t/s", "engine / best peer"],
          ratio_rows(measured, rows, threads),
          ["Best peer: the faster of DuckDB at the row's threads and Polars on its own pool; t/s: input tuples per "
           "second of the best round."])
    top = max(threads)
    table(f"5. Worker time per tuple and operator: the engine at {top} thread{'' if top == 1 else 's'}",
          ["pipeline", "inputs", "operator", "kind", "fused", "tuples in", "busy ms", "ns/tuple in",
           "ns/input tuple", "cpu ms", "cpu ns/tuple in"],
          operator_rows(measured, rows),
          [f"From PipelineResult.stats() of the engine's best round at {top} thread(s) (its fastest run, whose "
           "throughput section 4 reports): busy ms = the workers' time in "
           "the operator (busy_ns, all workers together); ns/tuple in = busy_ns / the operator's tuples_in; "
           "ns/input tuple = busy_ns / the pipeline's input tuples; cpu ms = the workers' CPU time in the operator "
           "(cpu_ns: busy_ns less the time the OS ran other threads on their cores, such as the ingress thread's "
           "merge when the workers take every core); cpu ns/tuple in = cpu_ns / tuples_in. Fused operators share "
           "their chain's morsels (and its CPU time, split in proportion to busy_ns). "
           "With several inputs the planner runs leading filters on each input before the merge (x4: the copies' "
           "sums) and the merge of what they keep is a union operator; otherwise the merge runs on the ingress "
           "thread. The cutting into morsels (ingress) and to_arrow() (the caller) are in no operator's time."])
    if BAR_THREADS in threads:
        table(f"6. Bars (issue 29), {rows:,} tuples", ["bar", "measured", "verdict"], bar_rows(measured, rows),
              ["Engine and best peer: input tuples per second of the best round, same run (section 4)."])
    else:
        print(f"\n### 6. Bars (issue 29)\n\nNot judged: --threads has no {BAR_THREADS}.\n")
    print(f"All outputs checked equal. Total {clock.perf_counter() - start:.0f} s. {_machine()}")


if __name__ == "__main__":
    main()
