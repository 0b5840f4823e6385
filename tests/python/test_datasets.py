import pyarrow as pa
import pyarrow.compute as pc

from pyarrow_ops.datasets import smart_meter_readings


def test_smart_meters_are_deterministic_and_sorted_per_concentrator():
    a = smart_meter_readings(rows=20_000, meters=300, concentrators=5, seed=7)
    b = smart_meter_readings(rows=20_000, meters=300, concentrators=5, seed=7)
    c = smart_meter_readings(rows=20_000, meters=300, concentrators=5, seed=8)
    assert len(a) == 5
    assert all(x.equals(y) for x, y in zip(a, b))
    assert not all(x.equals(y) for x, y in zip(a, c))
    assert sum(t.num_rows for t in a) == 20_000
    for i, t in enumerate(a):
        times = t.column("time")
        assert pc.all(pc.greater_equal(times[1:], times[:-1])).as_py()
        assert pc.all(pc.equal(t.column("concentrator"), i)).as_py()
        assert t.schema.field("time").type == pa.timestamp("ms", tz="UTC")
    # Meshes route some readings through neighbours; voltages go missing now and then.
    homes = pa.concat_tables(a).select(["meter", "concentrator"]).to_pydict()
    assert any(m % 5 != c for m, c in zip(homes["meter"], homes["concentrator"]))
    assert sum(t.column("voltage").null_count for t in a) > 0
