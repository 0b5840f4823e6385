"""Settings that measure the engine rather than use it: one options object that benchmarks and
the papers' experiments pass to :func:`pyarrow_ops.aggregate`, :meth:`pyarrow_ops.Pipeline.run`
and :func:`pyarrow_ops.spark.aggregate`. Applications leave it out; results never depend on it.

>>> import pyarrow as pa, pyarrow_ops as po
>>> t = pa.table({"t": [0, 1, 2, 3]})
>>> paced = po.Experiment(rate=1_000_000)  # read at most a million tuples per second
>>> po.Pipeline(t, time="t").filter(po.col("t") > 1).run(experiment=paced).to_arrow().num_rows
2
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Experiment:
    """Measurement settings (none changes a result).

    Attributes:
        rate: total input tuples per second the readers pace themselves to, for latency at a given
            load (0: as fast as they can). :func:`~pyarrow_ops.aggregate` (pulled inputs) and
            :meth:`~pyarrow_ops.Pipeline.run`.
        worker_seconds: :func:`pyarrow_ops.spark.aggregate` only: a Spark accumulator
            (``sparkContext.accumulator(0.0)``) to which each Python worker adds the seconds it
            spent in the engine (reading its rows, aggregating), to split a run's time between
            Spark and the engine.
    """

    rate: float = 0.0
    worker_seconds: Any = None

    def __post_init__(self) -> None:
        if isinstance(self.rate, bool) or not isinstance(self.rate, (int, float)) or self.rate < 0:
            raise ValueError(f"rate must be a number of tuples per second >= 0, got {self.rate!r}")


NONE = Experiment()
"""The default: no pacing, nothing recorded."""
