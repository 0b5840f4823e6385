"""Multiway windowed aggregation (k-OI, k-OS on smart meters; the paper's Table 2 queries) per design,
next to the fastest Polars and DuckDB formulations; and the T-Gate against a scanning skip list."""

import pyarrow_ops as po
from pyarrow_ops import _engine, peers
from pyarrow_ops.datasets import smart_meter_readings

ROWS = 500_000
WINDOW = po.sliding(30_000, 3_000)


class Aggregate:
    params = (["k-OI", "k-OS"], [1, 4, 20], ["mq", "mqlf", "tumlsc", "polars", "duckdb"])
    param_names = ["query", "inputs", "engine"]
    timeout = 300

    def setup(self, query, inputs, engine):
        self.tables = smart_meter_readings(rows=ROWS, meters=243, concentrators=inputs, period_ms=1_000, seed=1)
        self.fn, self.col = ("count", None) if query == "k-OI" else ("first", "kwh")

    def time_aggregate(self, query, inputs, engine):
        if engine in po.DESIGNS:
            agg = po.count() if self.col is None else po.first(self.col)
            po.aggregate(self.tables, time="time", key="meter", window=WINDOW, aggs={"a": agg},
                         design=engine).to_arrow()
        else:
            fn = peers.polars_aggregate if engine == "polars" else peers.duckdb_aggregate
            fn(self.tables, time="time", key=["meter"], size=30_000, advance=3_000, offset=0,
               aggs={"a": (self.fn, self.col)})


class Gate:
    params = ([1, 4, 20], [False, True])
    param_names = ["inputs", "scan_all"]

    def time_merge_2m(self, inputs, scan_all):
        _engine.benchmark_gate(inputs, 2_000_000, scan_all, 2, 1024)
