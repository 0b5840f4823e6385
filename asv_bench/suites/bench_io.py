"""Import/export overhead per batch (Arrow C Data Interface in, Arrow out).

A single input passes through ``merge`` without copying, so these timings are the pure cost of
importing the batches, exporting them again and the Python wrapper around it.
"""

import functools

import numpy as np
import pyarrow as pa

import pyarrow_ops

ROWS = 65_536
BATCHES = 64


def _batch(time_values: np.ndarray) -> pa.RecordBatch:
    n = len(time_values)
    rng = np.random.default_rng(0)
    return pa.record_batch(
        {
            "time": pa.array(time_values, type=pa.int64()),
            "v": pa.array(rng.random(n)),
            "s": pa.array(np.char.add("s", (np.arange(n) % 1000).astype(str)).tolist()),
        }
    )


# asv re-runs ``setup`` before every timed call; building the data once per process keeps
# that cheap without changing what is measured.
@functools.cache
def _one_batch() -> pa.RecordBatch:
    return _batch(np.arange(ROWS, dtype=np.int64))


@functools.cache
def _many_batches() -> list[pa.RecordBatch]:
    # Like pa.Table.from_batches([batch] * 64), but with time an arange over all 64 * 65536 rows,
    # split into 64 batches, so the stream stays sorted; v and s are the one batch's columns.
    base = _one_batch()
    full_time = np.arange(BATCHES * ROWS, dtype=np.int64)
    table = pa.Table.from_batches(
        [
            pa.record_batch(
                [pa.array(full_time[i * ROWS : (i + 1) * ROWS]), base["v"], base["s"]],
                schema=base.schema,
            )
            for i in range(BATCHES)
        ]
    )
    batches = table.to_batches()
    assert len(batches) == BATCHES and all(b.num_rows == ROWS for b in batches)
    return batches


class ImportExport:
    """Pass-through of one and of 64 batches of 65536 rows (int64 time, float64, string)."""

    repeat = (20, 200, 10.0)
    warmup_time = 0.2

    def setup(self):
        self.batch = _one_batch()
        self.table = pa.Table.from_batches(_many_batches())

    def time_pass_through_one_batch(self):
        pyarrow_ops.merge([self.batch], time="time").to_arrow()

    def time_pass_through_64_batches(self):
        # Per-batch figure = this time / 64 (see track_pass_through_per_batch).
        pyarrow_ops.merge([self.table], time="time").to_arrow()

    def track_pass_through_per_batch(self):
        """Best-of-50 time of the 64-batch pass-through divided by 64: seconds per batch."""
        import time

        best = float("inf")
        for _ in range(50):
            start = time.perf_counter()
            pyarrow_ops.merge([self.table], time="time").to_arrow()
            best = min(best, time.perf_counter() - start)
        return best / BATCHES

    track_pass_through_per_batch.unit = "seconds"
