"""K-way merge of time-sorted tables, next to the polars concat + stable sort peer."""

import functools
import time

import polars
import pyarrow_ops
import pyarrow_ops.datasets

ROWS = 2_000_000
PARAMS = [1, 4, 20]


# asv re-runs ``setup`` before every timed call; generating each data set once per process
# keeps that cheap (generation takes ~0.6 s) without changing what is measured.
@functools.cache
def _tables(inputs: int):
    return pyarrow_ops.datasets.smart_meter_readings(rows=ROWS, concentrators=inputs, seed=0)


@functools.cache
def _frames(inputs: int):
    return [polars.from_arrow(t) for t in _tables(inputs)]


class _OverInputs:
    """Settings shared by both sides of the comparison, so they are measured alike."""

    params = PARAMS
    param_names = ["inputs"]
    timeout = 300
    number = 1
    repeat = (3, 5, 30.0)


class Merge(_OverInputs):
    """pyarrow_ops.merge over ``inputs`` smart-meter tables, 2,000,000 rows in total, one thread per
    core (the default)."""

    def setup(self, inputs):
        self.tables = _tables(inputs)
        self.rows = sum(t.num_rows for t in self.tables)

    def time_merge(self, inputs):
        pyarrow_ops.merge(self.tables, time="time").to_arrow()

    def track_tuples_per_second(self, inputs):
        start = time.perf_counter()
        pyarrow_ops.merge(self.tables, time="time").to_arrow()
        return self.rows / (time.perf_counter() - start)

    track_tuples_per_second.unit = "tuples/s"


class MergeThreads:
    """pyarrow_ops.merge of 4 and 20 inputs on 1, 2 and 4 threads: the regions' parts merged side by
    side (on a 2-core machine 4 threads only add handoffs)."""

    params = ([4, 20], [1, 2, 4])
    param_names = ["inputs", "threads"]
    timeout = 300
    number = 1
    repeat = (3, 5, 30.0)

    def setup(self, inputs, threads):
        self.tables = _tables(inputs)

    def time_merge(self, inputs, threads):
        pyarrow_ops.merge(self.tables, time="time", threads=threads).to_arrow()


class PolarsConcatSort(_OverInputs):
    """The peer: polars.concat(frames).sort("time", maintain_order=True) on the same data."""

    def setup(self, inputs):
        self.frames = _frames(inputs)

    def time_concat_sort(self, inputs):
        polars.concat(self.frames).sort("time", maintain_order=True)
