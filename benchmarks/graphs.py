"""Operator graphs on this machine: the cost of a hand-off between operators, and two graph queries against
Polars and DuckDB, printed as markdown.

    python -m benchmarks.graphs [--rows N] [--repeat R] [--threads 1,2] [--quick] [--sections handoff,queries]

1. ``handoff``: a chain of ``CHAIN`` stateless operators over one sorted table of ``--rows`` tuples
   (``handoff_table``), 1 thread, with ``fuse=True`` and ``fuse=False``: ``CHAIN`` x ``select(<all columns>)``
   (a pass-through, so its time is the hand-off) and ``CHAIN`` x ``with_columns(x_i=col("v") + 1)`` for
   reference. Nanoseconds per tuple and operator: (best run - best pipeline-free read
   ``po.merge([table], time="ts").to_arrow()``) / (tuples x ``CHAIN``), and the plain figure (best run / the
   same). Then the bar: the fused select chain at most ``HANDOFF_BAR_NS`` per tuple and operator.
2. ``queries``: two graph queries over data generated here (deterministic seeds), each against Polars and
   DuckDB on the identical Arrow tables, in the same run:

   (a) a TPCx-BB-shaped clickstream (``clickstream``), ONE source feeding two outputs:
       ``sessions`` = ``sessionize("user", gap=30 min)`` then ``running(["user", "session"], {"n": count(),
       "spend": sum("price")})``, and ``top_items`` = ``window_aggregate(tumbling(1 h), {"n": count()},
       key="item", by_window=True)`` (every item's windows of an hour together, items ascending) then
       ``top_k(3, by="n", per="window_start")``: the 3 most viewed items of each hour;
   (b) meter readings enriched by an as-of join (``meter_readings``): ``readings.join_asof(tariffs,
       by="meter")``, ``with_columns(cost=col("kwh") * col("price"))``, then ``window_aggregate(tumbling(15
       min), {"cost": sum("cost"), "n": count()}, key="meter")``.

   Contenders: the engine's graph run (``po.run({...}, threads=t)``), for (a) the same outputs as separate
   ``Pipeline.run``s (one per branch), for (b) for reference the pipeline after the join over the readings
   joined beforehand (the join not timed), Polars (its own thread pool: ``POLARS_MAX_THREADS`` cannot change
   after import) and DuckDB (``SET threads=t``). Throughput is input tuples per second; then the ratios
   graph / separate branches and engine / best peer.

Timing: contenders are interleaved in rounds (each round runs every contender once, in turn) and each keeps
its best round, so a burst of load from the machine's other tenants slows one round of everyone rather than
every run of one contender. Everything from the Arrow input to the Arrow output is timed: the engine's
``run(...).to_arrow()``, and for a peer its reading of the Arrow tables, the query and the Arrow result cast
to the engine's output schema (types and nullability; ``po.plan`` gives it, outside the timing).

Checks: every run's output must equal the engine's 1-thread graph output exactly (``pa.Table.equals``, row
order included; benchmarks.pipeline.Equal); a difference raises AssertionError. The peers reproduce the
engine's documented row order (docs/pipeline.md) rather than sorting both sides, and the data make every
float sum exact in any order (prices, kilowatt-hours and tariffs are multiples of a power of two, small
enough that every partial sum and product is a double), so the engine's exactly rounded sums
(docs/semantics.md) and the peers' sums agree to the bit. The machine is shared: compare figures within
one run. ``--quick`` runs 200,000 tuples (a smoke test: its figures mean nothing).
"""

from __future__ import annotations

import argparse
import time as clock
import warnings
from collections.abc import Callable, Mapping

import duckdb
import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

import pyarrow_ops as po
from benchmarks.pipeline import Equal, _machine, rate, ratio, table, verdict
from pyarrow_ops import col

ROWS = 10_000_000
QUICK_ROWS = 200_000
THREADS = (1, 2)
SECTIONS = ("handoff", "queries")

# 1. Hand-off.
CHAIN = 10  # operators per chain
HANDOFF_BAR_NS = 2.0  # fused select chain, per tuple and operator, 1 thread

# 2. Queries (times in milliseconds).
START_MS = 1_704_067_200_000  # 2024-01-01T00:00:00Z
MINUTE_MS = 60_000
HOUR_MS = 60 * MINUTE_MS
SESSION_GAP_MS = 30 * MINUTE_MS
TOP_ITEMS_WINDOW_MS = HOUR_MS
TOP_K = 3
COST_WINDOW_MS = 15 * MINUTE_MS
EVENTS_PER_SECOND = 5  # clickstream: mean events per second (several share a millisecond at times)
EVENTS = ("view", "click", "cart", "purchase")
EVENT_SHARES = (0.6, 0.25, 0.1, 0.05)
USER_SKEW, ITEM_SKEW = 0.8, 1.0  # Zipf-like exponents: weight of the r-th most active is r**-skew
PRICE_NULLS = 0.1
READING_PERIOD_MS = MINUTE_MS  # each meter reads about once a minute
PRICE_UNIT = 1 / 128  # clickstream prices: multiples of 1/128 below 200
KWH_UNIT = TARIFF_UNIT = 1 / 1024  # readings below 4 kWh, tariffs below 0.5 per kWh


# --- data --------------------------------------------------------------------------------------------


def handoff_table(rows: int, seed: int = 3) -> pa.Table:
    """ts (int64, strictly increasing), key (int64), v and w (float64): one chunk."""
    rng = np.random.default_rng(seed)
    return pa.table({"ts": np.arange(rows, dtype=np.int64), "key": rng.integers(0, 1000, rows),
                     "v": rng.random(rows), "w": rng.random(rows)})


def _zipf_ids(rng: np.random.Generator, n: int, ids: int, skew: float) -> np.ndarray:
    """`n` draws of ids in [0, ids), the r-th most frequent with weight r**-skew; which id is the r-th is a
    random permutation (hot ids are not the small ones)."""
    cdf = np.cumsum(np.arange(1, ids + 1, dtype=np.float64) ** -skew)
    ranks = np.minimum(np.searchsorted(cdf, rng.random(n) * cdf[-1], side="right"), ids - 1)
    return rng.permutation(ids).astype(np.int64)[ranks]


def clickstream_sizes(rows: int) -> tuple[int, int]:
    """(users, items): rows / 10 users (1M at 10M rows); rows / 200 items, between 1,000 and 50,000."""
    return max(1, rows // 10), max(1_000, min(50_000, rows // 200))


def clickstream(rows: int, seed: int = 11) -> pa.Table:
    """A TPCx-BB-shaped web clickstream, sorted by ts.

    ts: int64 milliseconds from ``START_MS``, ``EVENTS_PER_SECOND`` events a second on average (uniform
    draws, so some share a millisecond); user, item: int64 with Zipf-like skew (``clickstream_sizes``);
    price: float64, a multiple of ``PRICE_UNIT`` below 200, null for ``PRICE_NULLS`` of the rows; event:
    string, one of ``EVENTS``.

    >>> t = clickstream(1000)
    >>> t.column_names, t.num_rows, pc.all(pc.greater_equal(t["ts"][1:], t["ts"][:-1])).as_py()
    (['ts', 'user', 'item', 'price', 'event'], 1000, True)
    """
    rng = np.random.default_rng(seed)
    users, items = clickstream_sizes(rows)
    span = rows * 1000 // EVENTS_PER_SECOND
    ts = START_MS + np.sort(rng.integers(0, span, rows))
    price = rng.integers(1, int(200 / PRICE_UNIT), rows) * PRICE_UNIT
    kinds = rng.choice(len(EVENTS), rows, p=EVENT_SHARES)
    return pa.table({
        "ts": ts,
        "user": _zipf_ids(rng, rows, users, USER_SKEW),
        "item": _zipf_ids(rng, rows, items, ITEM_SKEW),
        "price": pa.array(price, mask=rng.random(rows) < PRICE_NULLS),
        "event": pc.take(pa.array(EVENTS, pa.string()), pa.array(kinds)),
    })


def meter_readings(rows: int, seed: int = 13) -> tuple[pa.Table, pa.Table]:
    """(readings, tariffs), each sorted by ts.

    readings: ts (int64 ms), meter (int64, rows / 100 meters, uniform), kwh (float64, a multiple of
    ``KWH_UNIT`` below 4); each meter reads about every ``READING_PERIOD_MS``. tariffs: rows / 100 rows,
    ts strictly increasing over the readings' span and as long before it, meter, price (float64,
    a multiple of ``TARIFF_UNIT`` below 0.5). Each meter gets about (rows / 100) / meters tariffs (one at
    these sizes) at random times, so about a quarter of the readings come before their meter's first tariff
    and have no price.
    """
    rng = np.random.default_rng(seed)
    meters = max(10, rows // 100)
    span = max(1, rows // meters) * READING_PERIOD_MS
    readings = pa.table({
        "ts": START_MS + np.sort(rng.integers(0, span, rows)),
        "meter": rng.integers(0, meters, rows),
        "kwh": rng.integers(0, int(4 / KWH_UNIT), rows) * KWH_UNIT,
    })
    n = max(1, rows // 100)
    tariffs = pa.table({
        "ts": START_MS - span + np.sort(rng.integers(0, 2 * span - n, n)) + np.arange(n),
        "meter": np.resize(rng.permutation(meters), n).astype(np.int64),  # every meter about n / meters times
        "price": rng.integers(1, int(0.5 / TARIFF_UNIT), n) * TARIFF_UNIT,
    })
    return readings, tariffs


# --- timing and checking -----------------------------------------------------------------------------

Outputs = dict[str, pa.Table]


def rounds(contenders: Mapping[str, Callable[[], Outputs]], repeat: int,
           equals: Mapping[str, Equal]) -> dict[str, float]:
    """Best seconds per contender over `repeat` interleaved rounds; every output of every run is checked by
    the Equal of its name (the first contender's first run is the reference)."""
    best = {name: float("inf") for name in contenders}
    for _ in range(repeat):
        for name, run in contenders.items():
            start = clock.perf_counter()
            out = run()
            best[name] = min(best[name], clock.perf_counter() - start)
            for output, result in out.items():
                equals[output].check(name, result)
            out = result = None  # the next run's output need not share memory with this one's
    return best


def output_schemas(outputs: Mapping[str, po.Pipeline]) -> dict[str, pa.Schema]:
    """The engine's output schema of each named output (from po.plan; nothing runs)."""
    plan = po.plan(outputs)
    schemas = {}
    for name, node in zip(plan["names"], plan["outputs"]):
        schemas[name] = pa.schema(plan["operators"][plan["nodes"][node]["operator"]]["output_schema"])
    return schemas


def checked_note(equals: list[Equal], reference: str) -> str:
    return (f"Checked equal (pa.Table.equals, row order included) against {reference}: "
            + "; ".join(f"{e.workload} ({e.settings} outputs)" for e in equals) + ".")


# --- 1. hand-off -------------------------------------------------------------------------------------


def select_chain(p: po.Pipeline) -> po.Pipeline:
    names = p.input_schema.names
    for _ in range(CHAIN):
        p = p.select(*names)
    return p


def with_columns_chain(p: po.Pipeline) -> po.Pipeline:
    for i in range(CHAIN):
        p = p.with_columns(**{f"x{i}": col("v") + 1})
    return p


def handoff_section(rows: int, repeat: int) -> dict[str, float]:
    source = handoff_table(rows)
    chains = {"select(<all columns>)": select_chain(po.Pipeline(source, time="ts")),
              "with_columns(x_i=col('v') + 1)": with_columns_chain(po.Pipeline(source, time="ts"))}
    plus_one = pc.add(source.column("v"), 1.0)
    expected = {"select(<all columns>)": source,
                "with_columns(x_i=col('v') + 1)": pa.table(
                    {**{n: source.column(n) for n in source.column_names},
                     **{f"x{i}": plus_one for i in range(CHAIN)}})}
    equals = {"read": Equal("pipeline-free read")}
    equals["read"].check("the input", source)
    contenders: dict[str, Callable[[], Outputs]] = {
        "read": lambda: {"read": po.merge([source], time="ts").to_arrow()}}
    for name, pipeline in chains.items():
        equals[name] = Equal(f"{CHAIN} x {name}")
        equals[name].check("expected (pyarrow)", expected[name])
        for fuse in (True, False):
            contenders[f"{name} fuse={fuse}"] = (
                lambda pipeline=pipeline, name=name, fuse=fuse: {name: pipeline.run(threads=1, fuse=fuse).to_arrow()})
    del expected
    best = rounds(contenders, repeat, equals)

    baseline = best["read"]
    out_rows = [["po.merge([table]).to_arrow() (pipeline-free read)", "-", f"{baseline:.4f}", "-", "-"]]
    per_op = {}
    for name in chains:
        for fuse in (True, False):
            secs = best[f"{name} fuse={fuse}"]
            net = (secs - baseline) / (rows * CHAIN) * 1e9
            plain = secs / (rows * CHAIN) * 1e9
            per_op[f"{name} fuse={fuse}"] = net
            out_rows.append([f"{CHAIN} x {name}", "fused" if fuse else "unfused", f"{secs:.4f}", f"{net:.2f}",
                             f"{plain:.2f}"])
    fused_line = next((line for line in po.explain({"out": chains["select(<all columns>)"]}).splitlines()
                       if line.startswith("fused:")), "(no fused chain)")
    table(f"1a. Hand-off cost: {CHAIN}-operator stateless chains, {rows:,} tuples, 1 thread (best of {repeat} "
          "interleaved rounds)", ["chain", "fuse", "best s", "ns/tuple/op net", "ns/tuple/op plain"], out_rows,
          [checked_note(list(equals.values()), "the input (select chain) and its pyarrow computation "
                                                 "(with_columns chain)"),
           f"net = (best run - best pipeline-free read) / (tuples x {CHAIN}); plain = best run / (tuples x "
           f"{CHAIN}). Input columns: ts (int64), key (int64), v, w (float64), one chunk.",
           f"Fused select chain (po.explain): `{fused_line}`"])
    fused = per_op["select(<all columns>) fuse=True"]
    table("1b. Hand-off bar", ["bar", "measured", "verdict"],
          [[f"fused {CHAIN} x select(<all columns>) <= {HANDOFF_BAR_NS:g} ns per tuple per operator at 1 thread "
            f"({rows:,} tuples)",
            f"{fused:.2f} ns net ({best['select(<all columns>) fuse=True']:.4f} s - {baseline:.4f} s); unfused "
            f"{per_op['select(<all columns>) fuse=False']:.2f} ns", verdict(fused <= HANDOFF_BAR_NS)]])
    return per_op


# --- 2. queries: the engine --------------------------------------------------------------------------


def clickstream_graph(source: pa.Table) -> dict[str, po.Pipeline]:
    """Query (a): one source (one Pipeline node used twice: a fan-out) feeding two outputs."""
    clicks = po.Pipeline(source, time="ts")
    return {
        "sessions": clicks.sessionize("user", gap=SESSION_GAP_MS)
                          .running(["user", "session"], {"n": po.count(), "spend": po.sum("price")}),
        "top_items": clicks.window_aggregate(po.tumbling(TOP_ITEMS_WINDOW_MS), {"n": po.count()}, key="item",
                                             by_window=True)
                           .top_k(TOP_K, by="n", per="window_start"),
    }


def cost_pipeline(p: po.Pipeline) -> po.Pipeline:
    """Query (b) after the join."""
    return p.with_columns(cost=col("kwh") * col("price")).window_aggregate(
        po.tumbling(COST_WINDOW_MS), {"cost": po.sum("cost"), "n": po.count()}, key="meter")


def cost_graph(readings: pa.Table, tariffs: pa.Table) -> dict[str, po.Pipeline]:
    """Query (b): readings as-of joined with the tariff stream, then the cost per meter and 15 minutes."""
    joined = po.Pipeline(readings, time="ts").join_asof(po.Pipeline(tariffs, time="ts"), by="meter")
    return {"costs": cost_pipeline(joined)}


# --- 2. queries: Polars ------------------------------------------------------------------------------
# The engine's keyed window_aggregate emits a key's window when that key's next tuple (the first one in a
# later window) arrives, right there in the merged order, and the windows still open at the end of the input
# by window start, then key (docs/pipeline.md). With tumbling windows a tuple closes at most one window, so
# the engine's row order is: windows by the position of the key's first tuple of its next window, those
# without one last, by (window_start, key). Both peers compute that position ("__close") and sort by it.


def _polars_windows_in_engine_order(windows: pl.LazyFrame, key: str) -> pl.LazyFrame:
    """`windows` (one row per window and key: __ws, `key`, __first = the position of its first tuple) in the
    engine's emission order."""
    return (windows.sort([key, "__ws"])
            .with_columns(pl.col("__first").shift(-1).over(key).alias("__close"))
            .sort(["__close", "__ws", key], nulls_last=True))


def polars_clickstream(source: pa.Table, schemas: Mapping[str, pa.Schema]) -> Outputs:
    frame = pl.from_arrow(source).lazy()
    in_user = pl.col("ts").diff() > SESSION_GAP_MS  # the key's first tuple: null, session 0
    sessions = (frame
                .with_columns(in_user.fill_null(False).cum_sum().over("user").cast(pl.Int64).alias("session"))
                .with_columns(pl.int_range(1, pl.len() + 1, dtype=pl.Int64).over(["user", "session"]).alias("n"),
                              # cum_sum leaves a null price null: carry the sum so far over it (null until
                              # the key's first non-null price, as the engine's running sum)
                              pl.col("price").cum_sum().forward_fill().over(["user", "session"]).alias("spend")))
    size = TOP_ITEMS_WINDOW_MS
    # Per hour, the items by views, ties by item (the window set's key order, top_k's arrival order).
    top = (frame.group_by((pl.col("ts") - pl.col("ts") % size).alias("__ws"), "item")
           .agg(pl.len().cast(pl.Int64).alias("n"))
           .sort(["__ws", "n", "item"], descending=[False, True, False])
           .with_columns(pl.int_range(1, pl.len() + 1, dtype=pl.Int64).over("__ws").alias("rank"))
           .filter(pl.col("rank") <= TOP_K)
           .select(pl.col("__ws").alias("window_start"), (pl.col("__ws") + size).alias("window_end"), "item", "n",
                   "rank"))
    out = pl.collect_all([sessions, top])
    return {"sessions": out[0].to_arrow().cast(schemas["sessions"]),
            "top_items": out[1].to_arrow().cast(schemas["top_items"])}


def polars_costs(readings: pa.Table, tariffs: pa.Table, schemas: Mapping[str, pa.Schema]) -> Outputs:
    left = pl.from_arrow(readings).with_row_index("__pos")
    with warnings.catch_warnings():  # "sortedness of columns cannot be checked when 'by' groups provided"
        warnings.simplefilter("ignore")
        joined = left.join_asof(pl.from_arrow(tariffs), on="ts", by="meter", strategy="backward",
                                check_sortedness=False)
    size = COST_WINDOW_MS
    windows = (joined.lazy()
               .with_columns((pl.col("kwh") * pl.col("price")).alias("cost"))
               .group_by("meter", (pl.col("ts") - pl.col("ts") % size).alias("__ws"))
               # sum() of only nulls is 0 in Polars, null in the engine
               .agg(pl.when(pl.col("cost").count() > 0).then(pl.col("cost").sum()).alias("cost"),
                    pl.len().cast(pl.Int64).alias("n"), pl.col("__pos").min().alias("__first")))
    costs = (_polars_windows_in_engine_order(windows, "meter")
             .select(pl.col("__ws").alias("window_start"), (pl.col("__ws") + size).alias("window_end"), "meter",
                     "cost", "n")
             .collect())
    return {"costs": costs.to_arrow().cast(schemas["costs"])}


# --- 2. queries: DuckDB ------------------------------------------------------------------------------


def _positioned(table: pa.Table) -> pa.Table:
    """The table with __pos, each row's position: DuckDB's scan of an Arrow table has no row number whose
    order is guaranteed, and the engine's order depends on it (ties in time)."""
    return table.append_column("__pos", pa.array(np.arange(table.num_rows, dtype=np.int64)))


def _duckdb_windows_in_engine_order(windows: str, key: str) -> str:
    """SQL: the window rows of `windows` (__ws, key, ..., __first) with __close, the engine's emission
    position (see _polars_windows_in_engine_order); order by __close NULLS LAST, __ws, key."""
    return f"SELECT *, lead(__first) OVER (PARTITION BY {key} ORDER BY __ws) AS __close FROM ({windows})"


def _duckdb(threads: int, tables: Mapping[str, pa.Table], queries: Mapping[str, str],
            schemas: Mapping[str, pa.Schema]) -> Outputs:
    con = duckdb.connect()
    try:
        con.execute(f"SET threads={threads}")
        for name, t in tables.items():
            con.register(name, t)
        return {name: con.sql(sql).to_arrow_table().cast(schemas[name]) for name, sql in queries.items()}
    finally:
        con.close()


def duckdb_clickstream(source: pa.Table, schemas: Mapping[str, pa.Schema], threads: int) -> Outputs:
    upto = "ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW"
    sessions = f"""
        WITH marked AS (
            SELECT *, CASE WHEN ts - lag(ts) OVER (PARTITION BY "user" ORDER BY __pos) > {SESSION_GAP_MS}
                           THEN 1 ELSE 0 END AS __new
            FROM clicks),
        numbered AS (
            SELECT *, sum(__new) OVER (PARTITION BY "user" ORDER BY __pos {upto}) AS session FROM marked)
        SELECT ts, "user", item, price, event, CAST(session AS BIGINT) AS session,
               count(*) OVER w AS n, sum(price) OVER w AS spend
        FROM numbered
        WINDOW w AS (PARTITION BY "user", session ORDER BY __pos {upto})
        ORDER BY __pos"""
    size = TOP_ITEMS_WINDOW_MS
    top = f"""
        SELECT __ws AS window_start, __ws + {size} AS window_end, item, n, rank
        FROM (SELECT *, row_number() OVER (PARTITION BY __ws ORDER BY n DESC, item) AS rank
              FROM (SELECT ts - ts % {size} AS __ws, item, count(*) AS n FROM clicks GROUP BY __ws, item))
        WHERE rank <= {TOP_K}
        ORDER BY window_start, rank"""
    return _duckdb(threads, {"clicks": _positioned(source)}, {"sessions": sessions, "top_items": top}, schemas)


def duckdb_costs(readings: pa.Table, tariffs: pa.Table, schemas: Mapping[str, pa.Schema], threads: int) -> Outputs:
    size = COST_WINDOW_MS
    windows = f"""
        SELECT r.meter, r.ts - r.ts % {size} AS __ws, sum(r.kwh * t.price) AS cost, count(*) AS n,
               min(r.__pos) AS __first
        FROM readings r ASOF LEFT JOIN tariffs t ON r.meter = t.meter AND r.ts >= t.ts
        GROUP BY r.meter, __ws"""
    costs = f"""
        SELECT __ws AS window_start, __ws + {size} AS window_end, meter, cost, n
        FROM ({_duckdb_windows_in_engine_order(windows, "meter")})
        ORDER BY __close NULLS LAST, __ws, meter"""
    return _duckdb(threads, {"readings": _positioned(readings), "tariffs": tariffs}, {"costs": costs}, schemas)


# --- 2. queries: the tables --------------------------------------------------------------------------


def _label(kind: str, threads: int) -> str:
    return f"{kind} @{threads}"


def query_rows(best: Mapping[str, float], labels: list[tuple[str, str, int, int]], rows_out: Mapping[str, str]
               ) -> list[list[str]]:
    out = []
    for label, kind, threads, tuples in labels:
        secs = best[label]
        out.append([kind, str(threads), f"{tuples:,}", f"{secs:.3f}", rate(tuples / secs), rows_out[label]])
    return out


def best_peer(best: Mapping[str, float], tuples: int, threads: int, polars_label: str) -> tuple[str, float]:
    """The faster of DuckDB at `threads` and Polars (its own pool): (label, input tuples/s)."""
    duck = _label("DuckDB", threads)
    return max([(polars_label, tuples / best[polars_label]), (duck, tuples / best[duck])], key=lambda o: o[1])


class _Contenders:
    """A query's contenders: each run (label -> function) and its table row (label, text, threads, tuples)."""

    def __init__(self) -> None:
        self.runs: dict[str, Callable[[], Outputs]] = {}
        self.labels: list[tuple[str, str, int, int]] = []

    def add(self, kind: str, text: str, threads: int, tuples: int, run: Callable[[], Outputs]) -> None:
        label = _label(kind, threads)
        self.runs[label] = run
        self.labels.append((label, text, threads, tuples))


def clickstream_query(rows: int, repeat: int, threads: list[int]) -> None:
    source = clickstream(rows)
    graph = clickstream_graph(source)
    schemas = output_schemas(graph)
    pool = pl.thread_pool_size()
    polars_label = _label("Polars", pool)
    c = _Contenders()
    for t in threads:
        c.add("graph", "engine graph: po.run (one source, fan-out to 2 outputs)", t, rows,
              lambda t=t: po.run(graph, threads=t).to_arrow())
    for t in threads:
        c.add("separate", "engine, separate branches: 2 x Pipeline.run", t, rows,
              lambda t=t: {n: p.run(threads=t).to_arrow() for n, p in graph.items()})
    c.add("Polars", "Polars (lazy, collect_all; its thread pool)", pool, rows, lambda: polars_clickstream(source, schemas))
    for t in threads:
        c.add("DuckDB", "DuckDB (SET threads)", t, rows, lambda t=t: duckdb_clickstream(source, schemas, t))
    contenders, labels = c.runs, c.labels
    equals = {name: Equal(name) for name in graph}
    best = rounds(contenders, repeat, equals)
    ref = {name: e.reference for name, e in equals.items()}
    counts = f"{ref['sessions'].num_rows:,} + {ref['top_items'].num_rows:,}"
    users, items = clickstream_sizes(rows)
    starts = ref["top_items"].column("window_start").to_numpy()
    runs = 1 + int(np.count_nonzero(starts[1:] != starts[:-1])) if len(starts) else 0
    table(f"2a. Query (a), clickstream: sessions + top_items from one source, {rows:,} tuples (input tuples/s, "
          f"best of {repeat} interleaved rounds)",
          ["contender", "threads", "input tuples", "best s", "input tuples/s", "output rows"],
          query_rows(best, labels, {label: counts for label, *_ in labels}),
          [checked_note(list(equals.values()), f"the engine's graph run at {threads[0]} thread(s)"),
           f"Input: {users:,} users (Zipf-like, exponent {USER_SKEW}), {items:,} items (exponent {ITEM_SKEW}), "
           f"about {EVENTS_PER_SECOND} events/s, price null in {PRICE_NULLS:.0%} of the rows and a multiple of "
           f"1/{round(1 / PRICE_UNIT)} (every sum exact in any order, so compared bit for bit). Session gap "
           f"{SESSION_GAP_MS:,} ms, windows {TOP_ITEMS_WINDOW_MS:,} ms, top {TOP_K}.",
           f"Polars ran on its own pool of {pool} threads (polars.thread_pool_size(); fixed at import), whatever "
           "the row's engine/DuckDB thread count. Peers start from the same Arrow table and end with Arrow tables "
           "cast to the engine's output schema, all timed.",
           "Row order: both peers produce the engine's order themselves (sessions: the input's; top_items: by "
           "hour, then rank; ties in views go to the lesser item, the window set's key order); nothing is sorted "
           f"before comparing. top_items: {len(np.unique(starts)):,} hours, {runs:,} runs of equal window_start "
           "(one per hour: by_window=True emits each hour's window set together)."])
    rows_out = []
    for t in threads:
        g, s = rows / best[_label("graph", t)], rows / best[_label("separate", t)]
        peer, peer_rate = best_peer(best, rows, t, polars_label)
        rows_out.append([str(t), rate(g), rate(s), ratio(g / s), peer, rate(peer_rate), ratio(g / peer_rate)])
    table("2b. Query (a), clickstream: ratios (same run)",
          ["threads", "graph t/s", "separate t/s", "graph / separate", "best peer", "best peer t/s",
           "graph / best peer"], rows_out,
          ["Best peer: the faster of DuckDB at the row's threads and Polars on its own pool."])


def costs_query(rows: int, repeat: int, threads: list[int]) -> None:
    readings, tariffs = meter_readings(rows)
    graph = cost_graph(readings, tariffs)
    schemas = output_schemas(graph)
    # The reference: the pipeline after the join over its output, computed once here (not timed).
    joined_graph = {"joined": po.Pipeline(readings, time="ts").join_asof(po.Pipeline(tariffs, time="ts"), by="meter")}
    joined = po.run(joined_graph, threads=max(threads)).to_arrow()["joined"]
    after_join = cost_pipeline(po.Pipeline(joined, time="ts"))
    tuples = readings.num_rows + tariffs.num_rows
    pool = pl.thread_pool_size()
    polars_label = _label("Polars", pool)
    c = _Contenders()
    for t in threads:
        c.add("graph", "engine graph: po.run (as-of join of 2 sources)", t, tuples,
              lambda t=t: po.run(graph, threads=t).to_arrow())
    for t in threads:
        c.add("after join", "reference: engine, the pipeline after the join over pre-joined readings (join not timed)",
              t, readings.num_rows, lambda t=t: {"costs": after_join.run(threads=t).to_arrow()})
    c.add("Polars", "Polars (join_asof backward by meter, group_by; its thread pool)", pool, tuples,
          lambda: polars_costs(readings, tariffs, schemas))
    for t in threads:
        c.add("DuckDB", "DuckDB (ASOF LEFT JOIN, GROUP BY; SET threads)", t, tuples,
              lambda t=t: duckdb_costs(readings, tariffs, schemas, t))
    contenders, labels = c.runs, c.labels
    equals = {"costs": Equal("costs")}
    best = rounds(contenders, repeat, equals)
    out_rows = f"{equals['costs'].reference.num_rows:,}"
    nulls = joined.column("price").null_count
    table(f"2c. Query (b), readings as-of joined with tariffs, cost per meter and 15 minutes: {readings.num_rows:,} "
          f"readings + {tariffs.num_rows:,} tariffs (input tuples/s, best of {repeat} interleaved rounds)",
          ["contender", "threads", "input tuples", "best s", "input tuples/s", "output rows"],
          query_rows(best, labels, {label: out_rows for label, *_ in labels}),
          [checked_note(list(equals.values()), f"the engine's graph run at {threads[0]} thread(s)"),
           f"Input: {max(10, rows // 100):,} meters reading about every {READING_PERIOD_MS // 1000} s; kwh and "
           f"price multiples of 1/{round(1 / KWH_UNIT)} and 1/{round(1 / TARIFF_UNIT)}, so every product and sum is exact in any order and "
           f"compared bit for bit. {nulls:,} readings come before their meter's first tariff (null price, null "
           "cost: sum() of only nulls is null, as in the engine; Polars needs a when(count > 0)).",
           "Tariff times are distinct, so 'the last right row of one time' never has to break a tie; equal "
           "reading and tariff times match (<=) in all three.",
           f"Polars ran on its own pool of {pool} threads (polars.thread_pool_size()). Row order: both peers "
           "produce the keyed window_aggregate's emission order themselves; nothing is sorted before comparing."])
    rows_out = []
    for t in threads:
        g = tuples / best[_label("graph", t)]
        peer, peer_rate = best_peer(best, tuples, t, polars_label)
        rows_out.append([str(t), rate(g), peer, rate(peer_rate), ratio(g / peer_rate)])
    table("2d. Query (b), as-of join: ratios (same run)",
          ["threads", "graph t/s", "best peer", "best peer t/s", "graph / best peer"], rows_out,
          ["Best peer: the faster of DuckDB at the row's threads and Polars on its own pool. The query has one "
           "branch, so there is no separate-branches run; the pre-joined reference is in 2c."])


def queries_section(rows: int, repeat: int, threads: list[int]) -> None:
    clickstream_query(rows, repeat, threads)
    costs_query(rows, repeat, threads)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=None, help=f"tuples per workload (default {ROWS:,}; "
                                                               f"{QUICK_ROWS:,} with --quick)")
    parser.add_argument("--repeat", type=int, default=None, help="interleaved rounds (default 3; 1 with --quick)")
    parser.add_argument("--threads", default=",".join(map(str, THREADS)), help="engine and DuckDB threads, "
                                                                               "comma-separated (default 1,2)")
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_ROWS:,} tuples, 1 round: a smoke test")
    parser.add_argument("--sections", default=",".join(SECTIONS), help=f"comma-separated, of {', '.join(SECTIONS)}")
    args = parser.parse_args(argv)
    sections = [s.strip() for s in args.sections.split(",") if s.strip()]
    unknown = [s for s in sections if s not in SECTIONS]
    if unknown:
        parser.error(f"unknown section {', '.join(unknown)}; choose from {', '.join(SECTIONS)}")
    try:
        threads = [int(t) for t in args.threads.split(",") if t.strip()]
    except ValueError:
        parser.error(f"--threads takes comma-separated positive ints, got {args.threads!r}")
    if not threads or min(threads) < 1:
        parser.error(f"--threads takes comma-separated positive ints, got {args.threads!r}")
    rows = args.rows or (QUICK_ROWS if args.quick else ROWS)
    repeat = args.repeat or (1 if args.quick else 3)
    if rows < 1000 or repeat < 1:
        parser.error("--rows must be at least 1000 and --repeat at least 1")
    start = clock.perf_counter()
    print(f"# Graph benchmarks{' (--quick: a smoke test, the figures mean nothing)' if args.quick else ''}")
    print(f"\n{rows:,} tuples, best of {repeat} interleaved rounds, threads {', '.join(map(str, threads))}; Polars "
          f"{pl.__version__} ({pl.thread_pool_size()} threads), DuckDB {duckdb.__version__}, pyarrow "
          f"{pa.__version__}. {_machine()}", flush=True)
    if "handoff" in sections:
        handoff_section(rows, repeat)
    if "queries" in sections:
        queries_section(rows, repeat, threads)
    print(f"All outputs checked equal. Total {clock.perf_counter() - start:.0f} s. {_machine()}")


if __name__ == "__main__":
    main()
