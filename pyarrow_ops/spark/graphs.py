"""Graphs on Spark (docs/spark.md, "Graphs"): the plan of an in-process run, carried out with
DataFrames, giving each output the table ``po.run`` gives, row for row.

Every node's DataFrame carries, besides its data columns, sequence columns whose ascending order
(nulls last) is the node's stream order in a sequential run:
  - a source: (time, input index, position), the merged order of its inputs;
  - a chain of single-input operators: the planner's regions as stages (``_run_stages``, as for a
    chain), each appending its own sequence columns;
  - a union: (time, argument index, rank), the rank a number that increases along each argument's
    stream (a global sort by its sequence, then ``monotonically_increasing_id``);
  - an interval join: the pair's emission key, (time, side, rank) of the later row of the pair in
    the merged order of the two streams, a phase (0: an unmatched left row emitted just before the
    first row past its deadline, 1: a pair, 2: an unmatched left row right after itself when
    hi < 0), and (side, rank) of the other row; exactly the engine's output order (docs/graphs.md);
  - an as-of join: the left row's rank (one output row per left row, in left order).
Both joins run partitioned: rows of both sides are bucketed by a hash of the key, and each bucket's
left and right rows, in stream order, go through the engine's join in one Python call
(``cogroup(...).applyInArrow``); every pair has equal keys, so no pair spans buckets, and the
emission keys put the buckets' outputs back in the sequential order.

A node used by several nodes is checkpointed (computed once); each output is sorted by its
sequence columns, which are then dropped.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from pyarrow_ops.pipeline import Pipeline, _Graph

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

LEFT_ROW = "__pao_lrow"
RIGHT_ROW = "__pao_rrow"
BUCKET = "__pao_bucket"


class _Node:
    """A node's DataFrame, its sequence columns and its data columns' engine schema."""

    def __init__(self, df: DataFrame, sequence: list[str], schema: pa.Schema) -> None:
        self.df, self.sequence, self.schema = df, sequence, schema

    def data(self) -> list[str]:
        return self.schema.names


def _time_ints(column: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """A time column's stored integers (timestamps in their unit, dates in days)."""
    if pa.types.is_date32(column.type):
        column = column.cast(pa.int32())
    return np.asarray(column.cast(pa.int64()).to_numpy(zero_copy_only=False), dtype=np.int64)


def _ranked(node: _Node, name: str) -> DataFrame:
    """``node``'s rows with ``name``, a long that increases along its stream order."""
    from pyspark.sql import functions as F

    ordered = node.df.orderBy(*[F.asc_nulls_last(c) for c in node.sequence])
    return ordered.withColumn(name, F.monotonically_increasing_id())


def run_graph(outputs: Mapping[str, Pipeline], inputs: Mapping[Pipeline, DataFrame | Sequence[DataFrame]], *,
              partitions: int | None = None, threads: int | None = None) -> dict[str, DataFrame]:
    """See :func:`pyarrow_ops.spark.run` with a mapping of outputs."""
    from pyspark.sql import functions as F
    from pyspark.sql.pandas.types import to_arrow_schema

    import pyarrow_ops.spark as ps

    graph = _Graph(outputs)
    frames: dict[int, Any] = {}
    for source, dfs in inputs.items():
        if not isinstance(source, Pipeline) or not source.is_chain or source.steps:
            raise TypeError("run's inputs map each source pipeline (po.Pipeline(...), before any "
                            f"operator) of the graph to its DataFrame(s), got a key {source!r}")
        frames[id(source._inputs)] = dfs
    sources = []
    for index, local in enumerate(graph.inputs):
        if id(local) not in frames:
            raise ValueError(f"source {index} of the graph has no DataFrames in inputs: map each source pipeline to "
                             "its DataFrame(s), e.g. {readings: readings_df}")
        sources.append(frames[id(local)])
    some = sources[0] if not isinstance(sources[0], (list, tuple)) else sources[0][0]
    spark = some.sparkSession
    ps.check_workers(spark)
    threads = threads or ps._task_cpus(spark)
    n = partitions or spark.sparkContext.defaultParallelism
    time = graph.time
    names = itertools.count()
    uses = [0] * len(graph.nodes)
    for _, _, node_inputs in graph.nodes:
        for i in node_inputs:
            uses[i] += 1
    for o in graph.outputs:
        uses[o] += 1

    nodes: dict[int, _Node] = {}
    inputs_of: dict[int, int] = {}  # a source node's number of inputs
    chain_start: dict[int, tuple[int, list[Any]]] = {}  # a step node -> (the chain's input node, steps so far)
    for index, (kind, payload, node_inputs) in enumerate(graph.nodes):
        if kind == "source":
            tagged, count, _ = ps._tagged(sources[payload], None, None)
            tagged = tagged.withColumn(ps.TIME_COLUMN, F.col(time))
            spark_in = to_arrow_schema(tagged.schema, timezone="UTC")
            schema = pa.schema([f for f in spark_in if not f.name.startswith("__pao_")])
            if graph.time_orders[payload] != (None, "error"):  # late rows out, each input renumbered by time
                tagged = ps.in_time_order(tagged, time, count, graph.time_orders[payload], schema.field(time).type)
            nodes[index] = _Node(tagged, [ps.TIME_COLUMN, ps.INPUT_COLUMN, ps.POSITION_COLUMN], schema)
            inputs_of[index] = count
        elif kind == "step":
            (before,) = node_inputs
            start, steps = chain_start.get(before, (before, []))
            steps = [*steps, payload]
            if uses[index] == 1 and index not in graph.outputs and _only_consumer_is_step(graph, index):
                chain_start[index] = (start, steps)  # the chain goes on: run it at its end
                continue
            nodes[index] = _chain(nodes[start], steps, time, inputs_of.get(start), threads, n, names,
                                  from_source=graph.nodes[start][0] == "source")
        elif kind == "union":
            nodes[index] = _union([nodes[i] for i in node_inputs], time, next(names))
        else:
            nodes[index] = _join(kind, payload, nodes[node_inputs[0]], nodes[node_inputs[1]], time, threads, n,
                                 next(names))
        if index in nodes and uses[index] > 1:
            node = nodes[index]
            node.df = node.df.localCheckpoint(eager=False)  # computed once for all its consumers
    result = {}
    for name, out in zip(graph.names, graph.outputs):
        node = nodes[out]
        order = [F.asc_nulls_last(c) for c in node.sequence]
        result[name] = ps._sorted(node.df, order, n).drop(*node.sequence)
    return result


def _only_consumer_is_step(graph: _Graph, index: int) -> bool:
    return any(kind == "step" and inputs == [index] for kind, _, inputs in graph.nodes)


def _chain(node: _Node, steps: list[Any], time: str, inputs: int | None, threads: int, partitions: int,
           names: Iterator[int], *, from_source: bool) -> _Node:
    import pyarrow_ops.spark as ps

    chain = Pipeline.from_steps(steps, time=time)
    stages = ps._stages(chain, node.schema)
    df, sequence, schema = ps._run_stages(node.df, stages, node.schema, node.sequence, inputs or 1, time, threads,
                                          partitions, names, from_source=from_source)
    return _Node(df, sequence, schema)


def _union(parts: list[_Node], time: str, number: int) -> _Node:
    from pyspark.sql import functions as F

    t, arg, rank = f"__pao_u{number}_t", f"__pao_u{number}_a", f"__pao_u{number}_r"
    out = None
    for i, part in enumerate(parts):
        ranked = _ranked(part, rank)
        one = ranked.select(*[F.col(c) for c in part.data()], F.col(time).alias(t), F.lit(i).alias(arg), F.col(rank))
        out = one if out is None else out.unionByName(one)
    schema = parts[0].schema
    nullable = [any(p.schema.field(i).nullable for p in parts) for i in range(len(schema))]
    schema = pa.schema([f.with_nullable(k) for f, k in zip(schema, nullable)])
    return _Node(out, [t, arg, rank], schema)


def _join(kind: str, args: tuple[Any, ...], left: _Node, right: _Node, time: str, threads: int, partitions: int,
          number: int) -> _Node:
    """An interval join or an as-of join, partitioned by key buckets (module docstring)."""
    from pyspark.sql import functions as F
    from pyspark.sql.pandas.types import from_arrow_schema

    import pyarrow_ops as po
    import pyarrow_ops.spark as ps

    keys = list(args[0])
    rank = f"__pao_j{number}_rank"

    def prepared(node: _Node) -> DataFrame:
        ranked = _ranked(node, rank)
        bucket = F.pmod(F.xxhash64(*[F.col(k) for k in keys]), F.lit(partitions)) if keys else F.lit(0)
        return ranked.select(*[F.col(c) for c in node.data()], F.col(rank), bucket.alias(BUCKET))

    left_in = pa.schema([*left.schema, pa.field(LEFT_ROW, pa.int64())])
    right_in = pa.schema([*right.schema, pa.field(RIGHT_ROW, pa.int64())])

    def engine_join(lt: pa.Table, rt: pa.Table) -> Pipeline:
        lp, rp = Pipeline(lt, time=time), Pipeline(rt, time=time)
        if kind == "join":
            on, lo, hi, how = args
            return lp.join(rp, on=on, within=(lo, hi), how=how)
        by, tolerance = args
        return lp.join_asof(rp, by=by, tolerance=tolerance)

    plan = po.plan({"out": engine_join(left_in.empty_table(), right_in.empty_table())})
    engine_out = plan["operators"][-1]["output_schema"]
    data_out = pa.schema([f for f in engine_out if f.name not in (LEFT_ROW, RIGHT_ROW)])
    if kind == "join":
        seq = [f"__pao_j{number}_{c}" for c in ("t", "side", "rank", "phase", "oside", "orank")]
    else:
        seq = [f"__pao_j{number}_rank_l"]
    spark_out = pa.schema([*ps._for_spark(data_out), *[pa.field(c, pa.int64()) for c in seq]])
    lo, hi = (args[1], args[2]) if kind == "join" else (0, 0)
    if kind == "join":  # lengths as the engine takes them: ints in the time column's unit
        from pyarrow_ops.windows import in_units

        lo = in_units(lo, "within", left.schema.field(time).type)
        hi = in_units(hi, "within", left.schema.field(time).type)

    # The UDF below is pickled to the workers: it captures plain values only (no _Node, which
    # holds a DataFrame and so the driver's SparkContext).
    left_names, left_schema = left.data(), left.schema
    right_names, right_schema = right.data(), right.schema

    def bucket(lt: pa.Table, rt: pa.Table) -> pa.Table:
        lt = lt.sort_by(rank) if lt.num_rows else lt
        rt = rt.sort_by(rank) if rt.num_rows else rt
        lranks = lt.column(rank).to_numpy() if lt.num_rows else np.zeros(0, np.int64)
        rranks = rt.column(rank).to_numpy() if rt.num_rows else np.zeros(0, np.int64)
        ltimes = _time_ints(lt.column(time)) if lt.num_rows else np.zeros(0, np.int64)
        rtimes = _time_ints(rt.column(time)) if rt.num_rows else np.zeros(0, np.int64)
        ldata = lt.select(left_names).cast(left_schema).append_column(
            pa.field(LEFT_ROW, pa.int64()), pa.array(np.arange(lt.num_rows, dtype=np.int64)))
        rdata = rt.select(right_names).cast(right_schema).append_column(
            pa.field(RIGHT_ROW, pa.int64()), pa.array(np.arange(rt.num_rows, dtype=np.int64)))
        out = engine_join(ldata, rdata).run(threads=threads).to_arrow()
        lrow = out.column(LEFT_ROW).to_numpy()
        if kind == "join":
            rmask = out.column(RIGHT_ROW).is_null().to_numpy(zero_copy_only=False)
            rrow = out.column(RIGHT_ROW).fill_null(0).to_numpy()
            lt_, lr_ = ltimes[lrow], lranks[lrow]
            rt_ = rtimes[rrow] if rt.num_rows else np.zeros(len(lrow), np.int64)
            rr_ = rranks[rrow] if rt.num_rows else np.zeros(len(lrow), np.int64)
            right_later = ~rmask & (rt_ >= lt_)
            left_later = ~rmask & ~right_later
            unmatched = rmask
            key_t = np.where(right_later, rt_, np.where(left_later, lt_, lt_ + max(hi, 0) if hi >= 0 else lt_))
            side = np.where(right_later, 1, np.where(left_later, 0, 2 if hi >= 0 else 0))
            key_rank = np.where(right_later, rr_, lr_)
            phase = np.where(unmatched, 0 if hi >= 0 else 2, 1)
            oside = np.where(right_later, 0, np.where(left_later, 1, 0))
            orank = np.where(right_later, lr_, np.where(left_later, rr_, 0))
            columns = [key_t, side, key_rank, phase, oside, orank]
        else:
            columns = [lranks[lrow]]
        body = out.select(data_out.names)
        arrays = [body.column(f.name).cast(f.type) for f in spark_out if f.name in data_out.names]
        arrays += [pa.array(np.asarray(c, dtype=np.int64)) for c in columns]
        return pa.Table.from_arrays(arrays, schema=spark_out)

    lg, rg = prepared(left).groupBy(BUCKET), prepared(right).groupBy(BUCKET)
    df = lg.cogroup(rg).applyInArrow(bucket, from_arrow_schema(spark_out, prefer_timestamp_ntz=False))
    schema = pa.schema([f for f in data_out])
    return _Node(df, seq, schema)


__all__ = ["run_graph"]
