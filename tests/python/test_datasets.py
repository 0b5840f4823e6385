import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from pyarrow_ops.datasets import smart_meter_readings, song_comments


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


def test_song_comments_are_deterministic_and_sorted_per_server():
    a = song_comments(rows=50_000, songs=2_000, servers=3, seed=7)
    b = song_comments(rows=50_000, songs=2_000, servers=3, seed=7)
    c = song_comments(rows=50_000, songs=2_000, servers=3, seed=8)
    assert len(a) == 3
    assert all(x.equals(y) for x, y in zip(a, b))
    assert not all(x.equals(y) for x, y in zip(a, c))
    assert sum(t.num_rows for t in a) == 50_000
    schema = pa.schema(
        [
            ("time", pa.timestamp("ms", tz="UTC")),
            ("song", pa.uint32()),
            ("user", pa.uint32()),
            ("server", pa.uint16()),
            ("comment", pa.string()),
            ("length", pa.int32()),
        ]
    )
    for i, t in enumerate(a):
        assert t.schema == schema
        times = t.column("time")
        assert pc.all(pc.greater_equal(times[1:], times[:-1])).as_py()
        assert pc.all(pc.equal(t.column("server"), i)).as_py()
        assert pc.all(pc.equal(t.column("length"), pc.utf8_length(t.column("comment")))).as_py()


def test_song_comments_popularity_is_skewed_and_some_comments_hold_mails_and_ips():
    t = pa.concat_tables(song_comments(rows=200_000, songs=10_000, servers=4, seed=3))
    songs = pc.value_counts(t.column("song"))
    by_count = np.argsort(-songs.field("counts").to_numpy(), kind="stable")
    counts = songs.field("counts").to_numpy()[by_count]
    assert len(counts) <= 10_000
    assert pc.max(t.column("song")).as_py() < 10_000
    assert counts[:100].sum() > 0.3 * t.num_rows  # top 1% of songs: far more than 1% of comments
    # Popular songs are a permutation of the ranks, not simply ids 0, 1, 2.
    assert songs.field("values").to_numpy()[by_count[:3]].tolist() != [0, 1, 2]
    comment = t.column("comment")
    mails = pc.sum(pc.match_substring_regex(comment, r"[a-z]+[0-9]+@[a-z.]+\.[a-z]+")).as_py()
    ips = pc.sum(pc.match_substring_regex(comment, r"[0-9]+\.[0-9]+\.[0-9]+\.[0-9]+")).as_py()
    assert 0.015 * t.num_rows < mails < 0.025 * t.num_rows
    assert 0.007 * t.num_rows < ips < 0.013 * t.num_rows


def test_song_comments_with_no_rows_are_empty_tables_with_the_schema():
    tables = song_comments(rows=0, servers=5)
    assert [t.num_rows for t in tables] == [0] * 5
    assert tables[0].schema == song_comments(rows=10, servers=5)[0].schema


@pytest.mark.parametrize(
    "bad",
    [
        {"rows": -1},
        {"songs": 0},
        {"servers": 0},
        {"servers": 70_000},
        {"rate_per_s": 0.0},
        {"rate_per_s": float("inf")},
        {"skew": -0.5},
        {"skew": float("nan")},
    ],
)
def test_song_comments_reject_bad_arguments(bad):
    with pytest.raises(ValueError):
        song_comments(**{"rows": 10, **bad})
