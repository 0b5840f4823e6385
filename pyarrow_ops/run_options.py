"""The run options of pipelines and graphs (``Pipeline.run``, ``po.run``): each option's names,
and the one check that turns the arguments into the engine's struct."""

from __future__ import annotations

from typing import Literal

from pyarrow_ops import _engine
from pyarrow_ops.experiment import Experiment

# Each option's names as a Literal (for type checkers) and as a tuple (checked at run time).
Scheduler = Literal["ct", "lp", "et", "qst"]
SCHEDULERS: tuple[Scheduler, ...] = ("ct", "lp", "et", "qst")
"""Scheduling heuristics (ordered-processing paper, section 6): ``"ct"`` (the default) runs the
operator with the least normalised throughput in the current window; ``"lp"`` the last operator
with work; ``"et"`` the one with the most estimated work per worker; ``"qst"`` the earliest whose
output queue is under its share of the capacity."""
Reorder = Literal["nonblocking", "locked"]
REORDERS: tuple[Reorder, ...] = ("nonblocking", "locked")
"""How outputs of concurrent workers are put back in order: ``"nonblocking"`` (the default) never
makes a worker wait for another; ``"locked"`` is the mutex baseline."""
Partitioning = Literal["hybrid", "partitioned", "shared"]
Threading = Literal["ordered", "manual", "dedicated", "dynamic"]
THREADINGS: tuple[Threading, ...] = ("ordered", "manual", "dedicated", "dynamic")
PARTITIONINGS: tuple[Partitioning, ...] = ("hybrid", "partitioned", "shared")
"""How partitioned operators share work: ``"hybrid"`` (the default; per-partition queues plus a
master queue, work delegated to the partition's active worker), ``"partitioned"`` (a queue per
partition), ``"shared"`` (one queue, key locks)."""


def options(threads: int | str | None, scheduler: str, reorder: str, partitioning: str, morsel: int | None,
             partitions: int | None, reorder_capacity: int | None, max_inflight: int | None, slice_us: int | None,
             experiment: Experiment, fuse: bool = True, push_down: bool = True,
             threading: str = "ordered") -> _engine.PipelineOptions:
    """The run options, checked, as the engine's struct (Pipeline.run and run share them)."""
    for name, value, allowed in (("scheduler", scheduler, SCHEDULERS), ("reorder", reorder, REORDERS),
                                 ("partitioning", partitioning, PARTITIONINGS), ("threading", threading, THREADINGS)):
        if value not in allowed:
            raise ValueError(f"{name} must be one of {', '.join(map(repr, allowed))}, got {value!r}")
    elastic = threads == "auto"
    if elastic:
        threads = None
    if threading in ("manual", "dedicated") and elastic:
        raise ValueError(f"threads='auto' needs threading='ordered' or 'dynamic', got {threading!r}")
    if threading == "manual" and threads not in (None, 1):
        raise ValueError(f"threading='manual' runs on the reader's thread alone; threads must be None or 1, got {threads!r}")
    if threading == "dedicated" and threads is not None:
        raise ValueError(f"threading='dedicated' runs a thread per operator; threads must be None, got {threads!r}")
    for name, value in (("threads", threads), ("morsel", morsel), ("partitions", partitions),
                        ("reorder_capacity", reorder_capacity), ("max_inflight", max_inflight),
                        ("slice_us", slice_us)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            also = ", or 'auto'" if name == "threads" else ""
            raise ValueError(f"{name} must be a positive int or None{also}, got {value!r}")
    if not isinstance(experiment, Experiment):
        raise TypeError(f"experiment must be a pyarrow_ops.Experiment, got {type(experiment).__name__}")
    options = _engine.PipelineOptions(
        threads=threads or 0, scheduler=_engine.Scheduler[scheduler], reorder=_engine.Reorder[reorder],
        partitioning=_engine.Partitioning[partitioning], partitions=partitions or 0, morsel_rows=morsel or 0,
        reorder_capacity=reorder_capacity or 0, max_inflight=max_inflight or 0, slice_us=slice_us or 0,
        rate=float(experiment.rate), fuse=bool(fuse), push_down=bool(push_down), elastic=elastic,
        threading=_engine.Threading[threading])
    return options
