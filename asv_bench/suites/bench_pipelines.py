"""The three clickstream pipelines of benchmarks.pipelines (stateless: filter and two computed columns; sessions:
sessionize then running; windows: per-item tumbling hours), the engine alone, over 1,000,000 tuples at 1 and at
4 inputs. benchmarks.pipelines prints the same against Polars and DuckDB, with every output checked equal."""

import functools

from benchmarks import pipelines as bench_pipelines
from benchmarks.graphs import clickstream

ROWS = 1_000_000


# asv re-runs ``setup`` before every timed call; the data are generated once per process.
@functools.cache
def _inputs(inputs: int):
    return bench_pipelines.split(clickstream(ROWS), inputs)


class Pipelines:
    """Pipeline.run(threads=t).to_arrow() of one pipeline over 1,000,000 clickstream tuples in 1 or 4 inputs."""

    params = (list(bench_pipelines.PIPELINES), [1, 4], [1, 2])
    param_names = ["pipeline", "inputs", "threads"]
    timeout = 300
    number = 1
    repeat = (3, 5, 30.0)

    def setup(self, pipeline, inputs, threads):
        self.pipeline = bench_pipelines.engine_pipeline(pipeline, _inputs(inputs))

    def time_pipeline(self, pipeline, inputs, threads):
        self.pipeline.run(threads=threads).to_arrow()


class KeyedFusion:
    """The sessions pipeline (sessionize then running per session, over 1,000,000 tuples in 1 input, 2 threads) with
    its two partitioned operators fused into one keyed chain (the default) and each run on its own (fuse=False)."""

    params = ([True, False],)
    param_names = ["fuse"]
    timeout = 300
    number = 1
    repeat = (3, 5, 30.0)

    def setup(self, fuse):
        self.pipeline = bench_pipelines.engine_pipeline("sessions", _inputs(1))

    def time_sessions(self, fuse):
        self.pipeline.run(threads=2, fuse=fuse).to_arrow()


@functools.cache
def _graph(query: str):
    from benchmarks import graphs

    if query == "clickstream":
        return graphs.clickstream_graph(clickstream(ROWS))
    return graphs.cost_graph(*graphs.meter_readings(ROWS))


class GraphQueries:
    """po.run(graph, threads=t).to_arrow() of the two graph queries of benchmarks.graphs over 1,000,000 tuples:
    (a) the clickstream's sessions and top items of each hour from one source; (b) meter readings as-of joined
    with a tariff stream, then the cost per meter and 15 minutes. benchmarks.graphs prints both against Polars
    and DuckDB, every output checked equal."""

    params = (["clickstream", "costs"], [1, 2])
    param_names = ["query", "threads"]
    timeout = 300
    number = 1
    repeat = (3, 5, 30.0)

    def setup(self, query, threads):
        import pyarrow_ops as po

        self.run = lambda: po.run(_graph(query), threads=threads).to_arrow()

    def time_graph(self, query, threads):
        self.run()
