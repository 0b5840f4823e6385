"""The Polars and DuckDB peers of aggregate() (benchmarks/peers.py) against reference_aggregate, without
importing (and so without building) the engine."""

import math

import numpy as np
import pyarrow as pa
import pytest
from reference import reference_aggregate

from benchmarks import peers  # imports neither pyarrow_ops nor its engine

PEERS = [
    pytest.param(peers.polars_aggregate, formulation, id=f"polars-{formulation}")
    for formulation in peers.FORMULATIONS
] + [
    pytest.param(peers.duckdb_aggregate, formulation, id=f"duckdb-{formulation}")
    for formulation in peers.FORMULATIONS
]

# (size, advance, offset): tumbling, sliding with size a multiple of advance or not, gaps (advance > size),
# negative and positive offsets, offsets beyond one advance.
WINDOWS = [
    (5, 5, 0),
    (4, 4, -3),
    (1, 1, 0),
    (7, 3, 0),
    (7, 3, -11),
    (6, 2, 1),
    (9, 3, 2),
    (10, 4, -1),
    (2, 5, 1),
    (3, 7, -4),
    (1, 3, 0),
    (30, 3, 0),
]
TIME_TYPES = [pa.int64(), pa.int32(), pa.timestamp("ms", tz="UTC"), pa.date32(), pa.timestamp("ns")]

ALL_AGGS = {
    "n": ("count", None),
    "n_x": ("count", "x"),
    "sum_v": ("sum", "v"),
    "sum_x": ("sum", "x"),
    "sum_y": ("sum", "y"),
    "sum_u": ("sum", "u"),
    "sum_w": ("sum", "w"),
    "sum_big": ("sum", "big"),
    "sum_ubig": ("sum", "ubig"),
    "mean_v": ("mean", "v"),
    "mean_x": ("mean", "x"),
    "mean_y": ("mean", "y"),
    "mean_u": ("mean", "u"),
    "min_v": ("min", "v"),
    "max_v": ("max", "v"),
    "min_x": ("min", "x"),
    "max_x": ("max", "x"),
    "min_y": ("min", "y"),
    "max_u": ("max", "u"),
    "first_x": ("first", "x"),
    "last_x": ("last", "x"),
    "first_v": ("first", "v"),
    "last_w": ("last", "w"),
    "first_u": ("first", "u"),
    "last_y": ("last", "y"),
}
STRINGS = ["b", "a", "é", "ab", "", "z"]  # "z" < "é" by UTF-8 bytes
APPROXIMATE = {"sum_x", "sum_y", "mean_v", "mean_x", "mean_y", "mean_u"}  # summed in another order


def random_inputs(rng: np.random.Generator, time_type: pa.DataType, inputs: int, max_rows: int) -> list[pa.Table]:
    """Sorted times with heavy ties (shared across inputs), nulls and NaNs in the values."""
    start = int(rng.integers(-25, 6))
    spread = int(rng.integers(0, 4))
    tables = []
    for _ in range(inputs):
        n = int(rng.integers(0, max_rows + 1))
        times = start + np.cumsum(rng.integers(0, spread + 1, n))
        storage = pa.int32() if time_type.bit_width == 32 else pa.int64()

        def masked(values, type_, rate=0.2):
            return pa.array(values, type_, mask=rng.random(n) < rate)

        x = np.round(rng.standard_normal(n) * 1e3, 3)
        x[rng.random(n) < 0.08] = np.nan
        tables.append(
            pa.table(
                {
                    "t": pa.array(times, storage).cast(time_type),
                    "k": masked(rng.integers(0, 4, n), pa.int64(), rate=0.15),
                    "s": pa.array(
                        [None if rng.random() < 0.15 else STRINGS[rng.integers(0, len(STRINGS))] for _ in range(n)],
                        pa.string(),
                    ),
                    "k8": masked(rng.integers(-3, 3, n), pa.int8(), rate=0.1),
                    "v": masked(rng.integers(-10**6, 10**6, n), pa.int64()),
                    "w": masked(rng.integers(-(2**31), 2**31, n), pa.int32()),
                    "u": masked(rng.integers(0, 2**32, n), pa.uint32()),
                    "big": masked(rng.integers(2**62, 2**63, n, dtype=np.int64), pa.int64()),
                    "ubig": masked(rng.integers(2**63, 2**64 - 1, n, dtype=np.uint64), pa.uint64()),
                    "x": masked(x, pa.float64()),
                    "y": masked(rng.standard_normal(n).astype(np.float32), pa.float32()),
                }
            )
        )
    return tables


def _same(a, b) -> bool:
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a):
        return math.isnan(b)
    return a == b and type(a) is type(b)


def _close(a, b) -> bool:
    if a is None or b is None:
        return a is None and b is None
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-6)


def assert_matches(actual: pa.Table, expected: pa.Table, approximate=APPROXIMATE) -> None:
    assert actual.schema == expected.schema
    assert actual.num_rows == expected.num_rows
    for name in expected.column_names:
        column = expected.column(name)
        if pa.types.is_timestamp(column.type) or pa.types.is_date32(column.type):
            storage = pa.int64() if pa.types.is_timestamp(column.type) else pa.int32()
            got, want = actual.column(name).cast(storage).to_pylist(), column.cast(storage).to_pylist()
        else:
            got, want = actual.column(name).to_pylist(), column.to_pylist()
        check = _close if name in approximate else _same
        bad = [i for i, (g, w) in enumerate(zip(got, want)) if not check(g, w)]
        assert not bad, f"{name}: row {bad[0]}: got {got[bad[0]]!r}, want {want[bad[0]]!r}"


@pytest.mark.parametrize("peer, formulation", PEERS)
@pytest.mark.parametrize("seed", range(40))
def test_random_inputs_match_the_reference(peer, formulation, seed):
    rng = np.random.default_rng(seed)
    size, advance, offset = WINDOWS[seed % len(WINDOWS)]
    time_type = TIME_TYPES[seed % len(TIME_TYPES)]
    key = [[], ["k"], ["k", "s"], ["s"], ["k8", "k"]][seed % 5]
    tables = random_inputs(rng, time_type, inputs=int(rng.integers(1, 6)), max_rows=40)
    args = dict(time="t", key=key, size=size, advance=advance, offset=offset, aggs=ALL_AGGS)
    expected = reference_aggregate(tables, **args)
    assert_matches(peer(tables, formulation=formulation, **args), expected)


@pytest.mark.parametrize("peer, formulation", PEERS)
@pytest.mark.parametrize("window", WINDOWS)
def test_every_window_shape_one_key(peer, formulation, window):
    rng = np.random.default_rng(sum(window) + 1000)
    size, advance, offset = window
    tables = random_inputs(rng, pa.timestamp("ms", tz="UTC"), inputs=3, max_rows=60)
    args = dict(time="t", key=["k"], size=size, advance=advance, offset=offset, aggs=ALL_AGGS)
    assert_matches(peer(tables, formulation=formulation, **args), reference_aggregate(tables, **args))


@pytest.mark.parametrize("peer, formulation", PEERS)
def test_only_ties_and_only_nulls(peer, formulation):
    n = 12
    tables = [
        pa.table(
            {
                "t": pa.array([5] * n, pa.int64()),
                "k": pa.array([None, 1] * (n // 2), pa.int64()),
                "x": pa.array([None] * n, pa.float64()),
                "v": pa.array([None if i % 3 else i + 10 * j for i in range(n)], pa.int64()),
            }
        )
        for j in range(3)
    ]
    aggs = {
        "n": ("count", None), "s": ("sum", "x"), "m": ("mean", "x"), "lo": ("min", "x"), "f": ("first", "v"),
        "l": ("last", "v"), "sv": ("sum", "v"), "fx": ("first", "x"),
    }
    args = dict(time="t", key=["k"], size=4, advance=2, offset=1, aggs=aggs)
    expected = reference_aggregate(tables, **args)
    assert expected.num_rows == 4  # two windows, two keys
    assert_matches(peer(tables, formulation=formulation, **args), expected, approximate={"m"})


@pytest.mark.parametrize("peer, formulation", PEERS)
def test_empty_inputs(peer, formulation):
    tables = [t.slice(0, 0) for t in random_inputs(np.random.default_rng(1), pa.timestamp("ns"), 3, 5)]
    args = dict(time="t", key=["k", "s"], size=7, advance=3, offset=0, aggs=ALL_AGGS)
    expected = reference_aggregate(tables, **args)
    assert expected.num_rows == 0
    assert_matches(peer(tables, formulation=formulation, **args), expected)


@pytest.mark.parametrize("peer, formulation", PEERS)
def test_benchmark_shaped_data(peer, formulation):
    """timestamp[ms] over 4 inputs, uint32 meter key, size 30 s, advance 3 s: the benchmark queries."""
    rng = np.random.default_rng(7)
    tables = []
    for _ in range(4):
        n = 3000
        tables.append(
            pa.table(
                {
                    "time": pa.array(
                        np.sort(rng.integers(0, 200_000, n)) + 1_767_225_600_000, pa.timestamp("ms", tz="UTC")
                    ),
                    "meter": pa.array(rng.integers(0, 243, n).astype(np.uint32)),
                    "kwh": pa.array(rng.gamma(2.0, 0.05, n)),
                }
            )
        )
    for aggs in ({"n": ("count", None)}, {"f": ("first", "kwh")}):
        args = dict(time="time", key=["meter"], size=30_000, advance=3_000, offset=0, aggs=aggs)
        assert_matches(peer(tables, formulation=formulation, **args), reference_aggregate(tables, **args))


@pytest.mark.parametrize("peer", [peers.polars_aggregate, peers.duckdb_aggregate])
def test_unsupported_inputs_raise(peer):
    table = pa.table({"t": pa.array([1], pa.int64()), "f": [1.5], "b": [True]})
    base = dict(time="t", size=2, advance=1, offset=0)
    with pytest.raises(NotImplementedError):
        peer([table], key=["f"], aggs={"n": ("count", None)}, **base)
    with pytest.raises(NotImplementedError):
        peer([table], key=[], aggs={"m": ("max", "b")}, **base)
    with pytest.raises(NotImplementedError):
        peer([table.set_column(0, "t", pa.array([1.0]))], key=[], aggs={"n": ("count", None)}, **base)
