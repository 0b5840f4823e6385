"""Zero copy, proven by buffer addresses: what the engine fills is what pyarrow and Polars see,
and a single input reaches the output with its buffers untouched."""

import ctypes

import numpy as np
import polars as pl
import pyarrow as pa

import pytest

import pyarrow_ops as po


class ArrowArray(ctypes.Structure):
    pass


ArrowArray._fields_ = [
    ("length", ctypes.c_int64),
    ("null_count", ctypes.c_int64),
    ("offset", ctypes.c_int64),
    ("n_buffers", ctypes.c_int64),
    ("n_children", ctypes.c_int64),
    ("buffers", ctypes.POINTER(ctypes.c_void_p)),
    ("children", ctypes.POINTER(ctypes.POINTER(ArrowArray))),
    ("dictionary", ctypes.c_void_p),
    ("release", ctypes.c_void_p),
    ("private_data", ctypes.c_void_p),
]

_get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_get_pointer.restype = ctypes.c_void_p
_get_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]


class Captured:
    """Hands pyarrow capsules we have already looked into."""

    def __init__(self, pair):
        self.pair = pair

    def __arrow_c_array__(self, requested_schema=None):
        return self.pair


def engine_filled_addresses(batch_handle):
    """The buffer addresses in the ArrowArray the engine exported, read from the raw struct."""
    pair = batch_handle.__arrow_c_array__()
    array = ArrowArray.from_address(_get_pointer(pair[1], b"arrow_array"))
    columns = []
    for i in range(array.n_children):
        child = array.children[i].contents
        columns.append([child.buffers[j] for j in range(child.n_buffers)])
    return pair, columns


pytestmark = pytest.mark.usefixtures("no_leaked_exports")


def test_pyarrow_and_polars_see_the_buffers_the_engine_filled():
    rng = np.random.default_rng(0)
    inputs = [
        pa.table({"t": np.sort(rng.integers(0, 100, 1000)), "v": rng.random(1000), "s": ["x"] * 1000})
        for _ in range(3)
    ]
    stream = po.merge(inputs, time="t")._native
    handle = stream.next_batch()
    pair, filled = engine_filled_addresses(handle)
    batch = pa.record_batch(Captured(pair))
    for column, buffers in zip(batch.columns, filled):
        seen = [b.address if b is not None else None for b in column.buffers()]
        assert seen == buffers  # pyarrow imported the engine's memory, did not copy it
    frame = pl.from_arrow(batch, rechunk=False)
    # Polars took the numeric buffers as they are: exporting them again shows the same memory.
    back = frame.to_arrow()
    for name, buffers in zip(["t", "v"], filled[:2]):
        assert back.column(name).chunk(0).buffers()[1].address == buffers[1]


def test_single_input_passes_through_untouched():
    rng = np.random.default_rng(1)
    table = pa.Table.from_batches(
        [
            pa.record_batch({"t": np.arange(i * 100, (i + 1) * 100), "v": rng.random(100), "s": ["ab"] * 100})
            for i in range(4)
        ]
    )
    out = po.merge(table, time="t").to_arrow()
    for name in table.column_names:
        for before, after in zip(table.column(name).chunks, out.column(name).chunks):
            assert [b.address if b else None for b in before.buffers()] == [
                b.address if b else None for b in after.buffers()
            ]
            assert after.offset == before.offset


def test_polars_input_passes_through_to_polars_without_copying_numbers():
    frame = pl.DataFrame({"t": np.arange(10_000), "v": np.arange(10_000) * 0.5})
    address = frame.to_arrow().column("v").chunk(0).buffers()[1].address
    out = po.merge(frame, time="t").to_polars()
    assert out.to_arrow().column("v").chunk(0).buffers()[1].address == address


def test_disjoint_inputs_leave_as_slices_of_the_inputs():
    early = pa.table({"t": np.arange(0, 50_000), "v": np.ones(50_000)})
    late = pa.table({"t": np.arange(50_000, 100_000), "v": np.zeros(50_000)})
    out = po.merge([late, early], time="t").to_arrow()
    assert out.column("t").chunk(0).buffers()[1].address == early.column("t").chunk(0).buffers()[1].address
    assert out.column("t").chunk(1).buffers()[1].address == late.column("t").chunk(0).buffers()[1].address
