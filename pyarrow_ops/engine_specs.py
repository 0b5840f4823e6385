"""Pipeline steps and graph nodes as the engine's specs (``_engine.*Spec``): the one place that
maps an operator as written to the engine's struct, lengths resolved to the time column's unit."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pyarrow as pa

from pyarrow_ops import _engine
from pyarrow_ops.aggregate import _agg_specs
from pyarrow_ops.io import as_streams
from pyarrow_ops.windows import Session, in_units

if TYPE_CHECKING:
    from pyarrow_ops.pipeline import Step


def step_spec(step: Step, time_type: pa.DataType) -> Any:
    """A step as the engine's operator spec (_engine.*Spec), lengths in the time column's unit."""
    name, args = step.name, step.args
    if name == "filter":
        return _engine.FilterSpec(args[0]._to_ir())
    if name == "select":
        return _engine.SelectSpec([(n, e._to_ir()) for n, e in args[0]])
    if name == "with_columns":
        return _engine.WithColumnsSpec([(n, e._to_ir()) for n, e in args[0]])
    if name == "map_batches":
        fn, schema = args
        return _engine.MapBatchesSpec(fn, None if schema is None else pa.schema(schema).__arrow_c_schema__())
    if name == "sessionize":
        return _engine.SessionizeSpec(args[0], in_units(args[1], "gap", time_type), args[2])
    if name == "lag":
        return _engine.LagSpec(*args)
    if name == "delta":
        return _engine.DeltaSpec(*args)
    if name == "running":
        return _engine.RunningSpec(args[0], _agg_specs(args[1]))
    if name == "dedupe":
        return _engine.DedupeSpec(args[0], None if args[1] is None else in_units(args[1], "within", time_type))
    if name == "pairs":
        return _engine.PairsSpec(args[0], args[1], in_units(args[2], "gap", time_type))
    if name == "window_aggregate":
        by_window = args[3] if len(args) > 3 else False  # steps pickled before by_window existed
        if isinstance(args[1], Session):  # the fixed window is unused (window/sessions.h)
            return _engine.WindowAggregateSpec(args[0], _engine.WindowSpec(1, 1, 0), _agg_specs(args[2]), False,
                                               session_gap=args[1].resolve(time_type))
        return _engine.WindowAggregateSpec(args[0], _engine.WindowSpec(*args[1].resolve(time_type)),
                                           _agg_specs(args[2]), by_window)
    if name == "top_k":
        return _engine.TopKSpec(*args)
    if name == "join_table":
        keys, table = args
        (stream,) = as_streams([table])
        return _engine.LookupJoinSpec(keys, stream)
    if name == "parametric":
        kind, keys, cost_us, selectivity, state_bytes = args
        return _engine.ParametricSpec(_engine.OperatorKind[kind], keys, cost_us, selectivity, state_bytes)
    raise ValueError(f"unknown pipeline operator {name!r}")


def merge_spec(kind: str, args: tuple[Any, ...], time_type: pa.DataType) -> Any:
    """A union's or join's node as the engine's spec, lengths in the time column's unit."""
    if kind == "union":
        return _engine.UnionSpec()
    if kind == "join":
        on, lo, hi, how = args
        return _engine.JoinSpec(on, in_units(lo, "within", time_type),
                                in_units(hi, "within", time_type), _engine.JoinHow[how])
    by, tolerance = args
    return _engine.AsofJoinSpec(by, None if tolerance is None else in_units(tolerance, "tolerance", time_type))
