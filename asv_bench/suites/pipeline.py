"""Pipelines of the ordered-processing paper's section 7 (benchmarks.pipeline prints the full tables):
the runtime's overhead on a chain of trivial stateless operators, a partitioned parametric operator per
partitioning scheme under skew, the reordering schemes, and the Q2-shaped pipeline's p99 latency."""

import functools

import pyarrow_ops as po
from benchmarks import pipeline as bench_pipeline
from pyarrow_ops import col
from pyarrow_ops.pipeline import PARTITIONINGS, REORDERS


# asv re-runs ``setup`` before every timed call; each data set is generated once per process.
@functools.cache
def _events(rows: int, sigma: float | None = None):
    return bench_pipeline.parametric_events(rows=rows, keys=bench_pipeline.KEYS, sigma=sigma, seed=7)[0]


class _Timed:
    timeout = 300
    number = 1
    repeat = (3, 5, 30.0)


class Overhead(_Timed):
    """Five trivial stateless operators, one worker, 2,000,000 tuples: the runtime's cost per tuple and operator."""

    params = ["with_columns", "filter"]
    param_names = ["operator"]
    ROWS = 2_000_000

    def setup(self, operator):
        p = po.Pipeline(_events(self.ROWS), time="ts")
        for i in range(bench_pipeline.OVERHEAD_OPS):
            p = p.with_columns(**{f"x{i}": col("value") + 1}) if operator == "with_columns" else p.filter(
                col("value") >= 0)
        self.pipeline = p

    def time_chain(self, operator):
        self.pipeline.run(threads=1).to_arrow()


class Partitioning(_Timed):
    """One partitioned parametric operator (10 us per tuple, 20,000 tuples) per partitioning scheme and skew."""

    params = (list(PARTITIONINGS), [None, 0.1], [1, 2])
    param_names = ["partitioning", "sigma", "threads"]
    ROWS = 20_000

    def setup(self, partitioning, sigma, threads):
        self.pipeline = po.Pipeline(_events(self.ROWS, sigma), time="ts").experimental_parametric("partitioned", cost_us=10,
                                                                                      key="key")

    def time_partitioned(self, partitioning, sigma, threads):
        self.pipeline.run(threads=threads, partitioning=partitioning).to_arrow()


class Reorder(_Timed):
    """The reordering schemes on a light stateless operator (20 us) and on a stateless operator of selectivity
    0.5 feeding a partitioned one (20 us each)."""

    params = (list(REORDERS), ["light", "selective"], [1, 2])
    param_names = ["reorder", "pipeline", "threads"]
    ROWS = 20_000

    def setup(self, reorder, pipeline, threads):
        p = po.Pipeline(_events(self.ROWS), time="ts")
        if pipeline == "light":
            self.pipeline = p.experimental_parametric("stateless", cost_us=20)
        else:
            self.pipeline = p.experimental_parametric("stateless", cost_us=20, selectivity=0.5).experimental_parametric(
                "partitioned", cost_us=20, key="key")

    def time_reorder(self, reorder, pipeline, threads):
        self.pipeline.run(threads=threads, reorder=reorder).to_arrow()


class Latency:
    """p99 latency (us) per 16-tuple batch of the Q2-shaped pipeline, paced at half its maximum throughput."""

    params = [1, 2]
    param_names = ["threads"]
    timeout = 300
    number = 1
    repeat = 1
    ROWS = 20_000

    def track_q2_p99_us(self, threads):
        shape = bench_pipeline.QUERIES[bench_pipeline.LATENCY_BAR_QUERY]
        equal = bench_pipeline.Equal("Q2")
        lat = bench_pipeline.paced_latency(_events(self.ROWS), bench_pipeline.query_build(shape), 1, equal, "ct",
                                           threads=threads, scheduler="ct")
        return lat.p99_us

    track_q2_p99_us.unit = "us"
