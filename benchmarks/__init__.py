"""The benchmarks of pyarrow-ops: benchmark scripts, the peers' formulations (Polars, DuckDB, Spark) and what
they share. Not part of the package: the wheel holds ``pyarrow_ops`` only. Run them from the repository root,
``python -m benchmarks.<name>``:

- ``merge``: the merge against Polars' concat and stable sort;
- ``aggregate``: the T-Gate, every multiway design on the paper's six queries against Polars and DuckDB
  (and Spark), latency and push tables;
- ``pipeline``: the ordered-processing paper's experiments (reordering, partitioning, heuristics, bars);
- ``pipelines``: three clickstream pipelines (stateless, sessions, keyed windows) at 1 and 4 inputs against
  Polars and DuckDB, with the worker time per tuple and operator;
- ``graphs``: the fused hand-off, and the two graph queries (fan-out, as-of join) against Polars and DuckDB;
- ``memory``: peak memory of long aggregation runs;
- ``spark``: the engine inside Spark against Spark's own windowed aggregation.

``peers`` holds the peers' formulations that these compare with, checked against a reference in
tests/benchmarks/. The asv suites in asv_bench/ import from here.
"""
