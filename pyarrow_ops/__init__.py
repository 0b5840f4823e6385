"""pyarrow-ops: Arrow-native streaming operators with a C++ core.

Ordered, deterministic results over one or many time-sorted inputs, with Arrow in and Arrow out
and no copies on the way.

>>> import pyarrow as pa, pyarrow_ops as po
>>> po.merge([pa.table({"t": [1, 4]}), pa.table({"t": [2, 3]})], time="t").to_arrow()["t"].to_pylist()
[1, 2, 3, 4]
"""

from pyarrow_ops import errors
from pyarrow_ops.aggregate import DESIGNS, AggregateResult, Design, LiveAggregate, aggregate, live_aggregate
from pyarrow_ops.checkpoint import CheckpointError, restore
from pyarrow_ops.aggregates import Agg, count, first, last, max, mean, min, sum  # noqa: A004
from pyarrow_ops.errors import *  # noqa: F403 (the exception classes, listed in errors.__all__)
from pyarrow_ops.experiment import Experiment
from pyarrow_ops.expr import Expr, col, lit
from pyarrow_ops.io import Result
from pyarrow_ops.memory import memory_pool, release_memory
from pyarrow_ops.merge import merge
from pyarrow_ops.pipeline import GraphResult, LiveInput, Pipeline, PipelineResult, Step, run, union
from pyarrow_ops.plans import explain, plan
from pyarrow_ops.plot import plot_thread_levels
from pyarrow_ops.windows import Session, Window, session, sliding, tumbling

__version__ = "0.1.0"

__all__ = [
    "DESIGNS", "Agg", "AggregateResult", "CheckpointError", "Design", "Experiment", "Expr", "GraphResult", "LiveAggregate", "LiveInput",
    "Pipeline", "PipelineResult", "Result", "Session", "Step", "Window",
    "aggregate", "col", "count", "explain", "first", "last", "lit", "live_aggregate", "max", "mean", "memory_pool",
    "merge", "min", "plan", "plot_thread_levels", "release_memory", "restore", "run",
    "session", "sliding", "sum", "tumbling", "union", *errors.__all__,
]
