"""The plan a graph of pipelines runs by, as data (:func:`plan`) and as text (:func:`explain`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pyarrow as pa

from pyarrow_ops import _engine
from pyarrow_ops.live import LiveInput
from pyarrow_ops.pipeline import Pipeline, _Graph


def plan(outputs: Mapping[str, Pipeline], *, fuse: bool = True, push_down: bool = True) -> dict[str, Any]:
    """The plan the engine runs the graph of ``outputs`` by (runtime/planner.h), as data:

    * ``nodes``: per graph node, ``{"source": i, "input": None}`` or ``{"operator": n}``; with
      ``push_down``, a set of inputs whose first filters and projections run on each input before
      the merge has a source node per input (``"input"``: its index), each followed by its copy of
      those operators, and a ``union`` in the merge's place;
    * ``operators``: per operator, its name, description, kind, selectivity, keys,
      max_parallelism, output_schema, ``inputs`` (node indices), ``preserves_time``, ``number``
      (in errors and :meth:`PipelineResult.stats`: copies of one operator share it), and its
      ``region`` and ``fused`` chain (indices, or None);
    * ``regions``: parallel regions (``operators``, ``key``, ``routing``, ``ordering``);
    * ``sequential``: operators outside every region (stateful, or of several inputs);
    * ``fused``: chains of operators run as one task; ``shuffles``: ``from``/``to`` regions and
      ``key``; ``outputs``: the node of each output, in order; ``names``: the outputs' names;
      ``sources``: each source's schema.
    """
    graph = _Graph(outputs)
    schemas = [_schema_of(inputs) for inputs in graph.inputs]
    specs = graph.specs(schemas)
    data = _engine.plan_graph([sch.__arrow_c_schema__() for sch in schemas], graph.time, specs, graph.outputs, fuse,
                              [len(inputs) for inputs in graph.inputs], push_down)
    data["names"] = graph.names
    data["sources"] = schemas
    return data


def explain(outputs: Mapping[str, Pipeline], *, fuse: bool = True, push_down: bool = True) -> str:
    """:func:`plan` as text: the sources, one line per operator (its inputs after ``<-``; a source's
    input when its filters run before the merge), then the regions, fused chains, shuffles and
    outputs."""
    data = plan(outputs, fuse=fuse, push_down=push_down)

    def node(i: int) -> str:
        n = data["nodes"][i]
        if "source" not in n:
            return str(n["operator"])
        return f"source {n['source']}" + ("" if n["input"] is None else f" input {n['input']}")

    lines = [f"source {i}  {', '.join(s.names)}" for i, s in enumerate(data["sources"])]
    for number, op in enumerate(data["operators"]):
        kind = op["kind"] + (f" by [{', '.join(op['keys'])}]" if op["keys"] else "")
        if len(op["inputs"]) > 1:
            kind = f"{len(op['inputs'])} inputs"
        par = {"stateful": "1", "partitioned": "partitions"}.get(op["kind"]) or (
            str(op["max_parallelism"]) if op["max_parallelism"] else "every worker")
        if len(op["inputs"]) > 1:
            par = "1"
        inputs = ", ".join(node(i) for i in op["inputs"])
        lines.append(f"{number} {op['name']}  {kind}  selectivity: {op['selectivity']}  parallelism: {par}  <- {inputs}")
    for r, region in enumerate(data["regions"]):
        routing = f"hash by [{', '.join(region['key'])}]" if region["routing"] == "hash" else region["routing"]
        ops = ", ".join(map(str, region["operators"]))
        lines.append(f"region {r}: operators {ops}  routing: {routing}  ordering: {region['ordering']}")
    for chain in data["fused"]:
        names = "+".join(data["operators"][n]["name"] for n in chain)
        lines.append(f"fused: {'+'.join(map(str, chain))} ({names})")
    for sh in data["shuffles"]:
        lines.append(f"shuffle: region {sh['from']} -> region {sh['to']} by [{', '.join(sh['key'])}]")
    for name, out in zip(data["names"], data["outputs"]):
        lines.append(f"output {name} <- {node(out)}")
    return "\n".join(lines)


def _schema_of(inputs: list[Any]) -> pa.Schema:
    """The first input's schema, known without reading it."""
    first = inputs[0]
    if isinstance(first, (pa.Table, pa.RecordBatch, pa.RecordBatchReader, LiveInput)):
        return first.schema
    if hasattr(first, "__arrow_c_schema__"):
        return pa.schema(first)
    raise TypeError("a plan needs inputs whose schema is known without reading them (tables, readers, "
                    f"live inputs), got {type(first).__name__}")

