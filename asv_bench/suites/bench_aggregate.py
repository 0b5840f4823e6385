"""Multiway windowed aggregation on smart meters (the paper's Table 2 queries k-OI, k-OS, and w-OI, W-OI with
each tuple in 10 and 20 windows) per design, next to Polars and DuckDB; and the T-Gate against a scanning
skip list. The queries are benchmarks.aggregate.QUERIES."""

import pyarrow_ops as po
from benchmarks import peers
from benchmarks.aggregate import QUERIES
from pyarrow_ops import _testing
from pyarrow_ops.datasets import smart_meter_readings

ROWS = 500_000


class Aggregate:
    params = (["k-OI", "k-OS", "w-OI", "W-OI"], [1, 4, 20], [*po.DESIGNS, "polars", "duckdb"])
    param_names = ["query", "inputs", "engine"]
    timeout = 300

    def setup(self, query, inputs, engine):
        self.q = QUERIES[query]
        self.tables = smart_meter_readings(rows=ROWS, meters=243, concentrators=inputs, period_ms=1_000, seed=1)
        if engine in po.DESIGNS:
            try:  # a design that does not take the query (e.g. one without first()) is skipped
                self.run(engine, [t.slice(0, 100) for t in self.tables])
            except (ValueError, TypeError) as error:
                raise NotImplementedError(str(error)) from None

    def run(self, engine, tables):
        q = self.q
        if engine in po.DESIGNS:
            agg = po.count() if q.column is None else getattr(po, q.function)(q.column)
            po.aggregate(tables, time="time", key=q.key, window=po.sliding(q.size_ms, q.advance_ms), aggs={"a": agg},
                         design=engine).to_arrow()
        else:
            fn = peers.polars_aggregate if engine == "polars" else peers.duckdb_aggregate
            fn(tables, time="time", key=[q.key], size=q.size_ms, advance=q.advance_ms, offset=0,
               aggs={"a": (q.function, q.column)})

    def time_aggregate(self, query, inputs, engine):
        self.run(engine, self.tables)


class Gate:
    params = ([1, 4, 20], [False, True])
    param_names = ["inputs", "scan_all"]

    def time_merge_2m(self, inputs, scan_all):
        _testing.benchmark_gate(inputs, 2_000_000, scan_all, 2, 1024)


class Lateness:
    """The paper's k-OI at 4 inputs with lateness=5 s: sorted inputs (the buffer's cost alone) and
    inputs shuffled within the bound (benchmarks.lateness), next to no lateness."""

    params = (["none", "bound", "shuffled"],)
    param_names = ["inputs_as"]
    timeout = 300

    def setup(self, inputs_as):
        from benchmarks.lateness import shuffled_within

        self.tables = smart_meter_readings(rows=ROWS, meters=243, concentrators=4, period_ms=1_000, seed=1)
        if inputs_as == "shuffled":
            self.tables = [shuffled_within(t, 5_000) for t in self.tables]
        self.lateness = None if inputs_as == "none" else 5_000

    def time_aggregate(self, inputs_as):
        po.aggregate(self.tables, time="time", key="meter", window=po.sliding(30_000, 3_000), aggs={"n": po.count()},
                     lateness=self.lateness).to_arrow()


class Sessions:
    """Session windows (5 s gap) per meter at 4 inputs, per design that computes them."""

    params = (["mq", "mqlf", "tumlsc"],)
    param_names = ["design"]
    timeout = 300

    def setup(self, design):
        self.tables = smart_meter_readings(rows=ROWS, meters=243, concentrators=4, period_ms=1_000, seed=1)

    def time_sessions(self, design):
        po.aggregate(self.tables, time="time", key="meter", window=po.session(5_000),
                     aggs={"n": po.count(), "kwh": po.sum("kwh")}, design=design).to_arrow()


class Checkpoints:
    """The paper's k-OI at 4 inputs through live_aggregate (benchmarks.checkpoints): no
    checkpoints, the rows kept for them (checkpointable), and a snapshot every 100,000 tuples."""

    params = (["none", "kept", "snapshots"],)
    param_names = ["checkpoints"]
    timeout = 300

    def setup(self, checkpoints):
        self.tables = smart_meter_readings(rows=ROWS, meters=243, concentrators=4, period_ms=1_000, seed=1)

    def time_live_aggregate(self, checkpoints):
        import tempfile

        from benchmarks.checkpoints import run_live

        q = QUERIES["k-OI"]
        with tempfile.TemporaryDirectory() as directory:
            run_live(self.tables, q, "auto", directory if checkpoints == "snapshots" else None,
                     100_000 if checkpoints == "snapshots" else None, kept=checkpoints != "none")
