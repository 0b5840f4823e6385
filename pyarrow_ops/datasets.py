"""Deterministic generators for the workloads pyarrow-ops is built for.

The same arguments always give the same tables, on any machine (numpy's PCG64 generator).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

SMART_METER_STATUSES = ("ok", "low_voltage", "high_voltage", "tamper", "reboot")
_STATUS_WEIGHTS = np.array([0.96, 0.02, 0.01, 0.005, 0.005])


def smart_meter_readings(
    *,
    rows: int = 2_000_000,
    meters: int = 10_000,
    concentrators: int = 8,
    period_ms: int = 900_000,
    mesh_share: float = 0.1,
    seed: int = 0,
    start: str = "2026-01-01T00:00:00",
) -> list[pa.Table]:
    """Smart-meter readings as received by several data concentrators, one table per concentrator.

    Each of ``meters`` meters sends a reading every ``period_ms`` (at its own phase). A reading
    travels to the meter's home concentrator (``meter % concentrators``) or, for a ``mesh_share``
    of readings, through a neighbour in the mesh, and arrives after a random 20-2000 ms delay.
    Each concentrator's table is sorted by arrival ``time`` (ties by meter), as its stream would be.

    Columns: ``time`` timestamp[ms, tz=UTC] (arrival at the concentrator), ``meter`` uint32,
    ``concentrator`` uint16, ``kwh`` double (energy in the period), ``voltage`` float (null when
    the meter's sensor did not report, ~0.5%), ``outage`` bool (rare alarms), ``status`` string
    (null with the voltage).

    >>> from pyarrow_ops.datasets import smart_meter_readings
    >>> tables = smart_meter_readings(rows=1000, meters=50, concentrators=3, seed=1)
    >>> [t.num_rows for t in tables], tables[0].column_names[:3]
    ([333, 350, 317], ['time', 'meter', 'concentrator'])
    """
    if rows < 0 or meters < 1 or concentrators < 1 or period_ms < 1:
        raise ValueError("rows must be >= 0; meters, concentrators and period_ms >= 1")
    rng = np.random.default_rng(seed)
    start_ms = int(np.datetime64(start, "ms").astype(np.int64))
    reports = -(-rows // meters)
    meter = np.tile(np.arange(meters, dtype=np.uint32), reports)[:rows]
    slot = np.repeat(np.arange(reports, dtype=np.int64), meters)[:rows]
    phase = rng.integers(0, period_ms, meters)
    arrival = start_ms + slot * period_ms + phase[meter] + rng.integers(20, 2000, rows)
    concentrator = (meter % concentrators).astype(np.uint16)
    if concentrators > 1:
        via_mesh = rng.random(rows) < mesh_share
        neighbour = (concentrator + rng.integers(1, concentrators, rows)) % concentrators
        concentrator = np.where(via_mesh, neighbour, concentrator).astype(np.uint16)
    kwh = rng.gamma(2.0, 0.05, rows)
    voltage = (230.0 + rng.normal(0.0, 3.0, rows)).astype(np.float32)
    missing = rng.random(rows) < 0.005
    outage = rng.random(rows) < 0.001
    status_code = rng.choice(len(SMART_METER_STATUSES), rows, p=_STATUS_WEIGHTS)

    order = np.lexsort((meter, arrival, concentrator))  # by concentrator, then arrival, then meter
    bounds = np.searchsorted(concentrator[order], np.arange(concentrators + 1))
    statuses = pa.array(SMART_METER_STATUSES)
    tables = []
    for c in range(concentrators):
        idx = order[bounds[c] : bounds[c + 1]]
        gone = missing[idx]
        tables.append(
            pa.table(
                {
                    "time": pa.array(arrival[idx], pa.timestamp("ms", tz="UTC")),
                    "meter": pa.array(meter[idx]),
                    "concentrator": pa.array(concentrator[idx]),
                    "kwh": pa.array(kwh[idx]),
                    "voltage": pa.array(voltage[idx], mask=gone),
                    "outage": pa.array(outage[idx]),
                    "status": pc.if_else(
                        pa.array(gone), pa.scalar(None, pa.string()), pc.take(statuses, status_code[idx])
                    ),
                }
            )
        )
    return tables
