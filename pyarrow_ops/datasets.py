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


# Vocabulary of the generated comments: no word contains "@", a digit or a ".", so the only
# e-mail addresses and IP addresses in a comment are the ones planted on purpose.
_COMMENT_WORDS = (
    "love", "this", "track", "song", "beat", "drop", "bass", "vocals", "so", "good", "fire",
    "amazing", "wow", "yes", "the", "at", "part", "when", "it", "kicks", "in", "best", "ever",
    "nice", "mix", "remix", "please", "more", "like", "sick", "chill", "vibes", "on", "repeat",
    "goosebumps", "that", "synth", "is", "insane", "who", "else", "here", "from", "radio",
    "banger", "classic", "underrated", "masterpiece", "lol", "omg", "can't", "stop", "listening",
    "to", "follow", "me", "check", "out", "my", "new", "set", "release", "when?", "id?", "!!",
    ":)", "<3", "♥", "très", "bien", "guter", "sound", "mañana", "🔥",
)
_MAIL_NAMES = ("anna", "ben", "carla", "dj", "emil", "fatima", "gus", "hana", "ivan", "jo", "kai", "lena")
_MAIL_DOMAINS = ("example.com", "example.org", "example.net", "mail.example.com")
_COMMENT_USERS = 200_000
_USER_SKEW = 0.8


def _zipf_draws(rng: np.random.Generator, n: int, size: int, skew: float) -> np.ndarray:
    """``size`` draws from ``n`` ids whose popularity is Zipf(``skew``) over ranks 1..n."""
    weights = np.arange(1, n + 1, dtype=np.float64) ** -skew
    ids = rng.permutation(n).astype(np.uint32)  # rank r is id ids[r]: popular ids are not 0, 1, 2
    return ids[rng.choice(n, size, p=weights / weights.sum())]


def song_comments(
    *,
    rows: int = 2_000_000,
    songs: int = 40_000,
    servers: int = 4,
    rate_per_s: float = 1000.0,
    skew: float = 1.1,
    seed: int = 0,
    start: str = "2026-01-01T00:00:00",
) -> list[pa.Table]:
    """Users' comments on songs as received by several comment servers, one table per server.

    ``rows`` comments are created as a Poisson process of ``rate_per_s`` comments per second
    (exponential gaps, milliseconds). Each comment is about a song drawn from a truncated Zipf
    law of exponent ``skew`` over ``songs`` song ids (ranks 1..songs; the ids are a seeded
    permutation of the ranks, so popular songs are not 0, 1, 2), by one of 200,000 users (Zipf,
    exponent 0.8). A load balancer sends each comment to a uniformly random server, where it
    arrives after a random 1-500 ms delay. Each server's table is sorted by arrival ``time``
    (ties by creation order), as its stream would be.

    Columns: ``time`` timestamp[ms, tz=UTC] (arrival at the server), ``song`` uint32, ``user``
    uint32, ``server`` uint16, ``comment`` string (1-10 words; ~2% contain an e-mail address such
    as ``anna7@example.com``, ~1% an IP address such as ``10.1.2.3``; some non-ASCII text),
    ``length`` int32 (characters of the comment).

    >>> from pyarrow_ops.datasets import song_comments
    >>> tables = song_comments(rows=1000, songs=100, servers=3, seed=1)
    >>> [t.num_rows for t in tables], tables[0].column_names
    ([330, 350, 320], ['time', 'song', 'user', 'server', 'comment', 'length'])
    """
    if rows < 0 or songs < 1 or not 1 <= servers <= 65_536:
        raise ValueError("rows must be >= 0, songs >= 1 and servers between 1 and 65536")
    if songs > 2**32:
        raise ValueError("songs must be <= 2**32 (song ids are uint32)")
    if not (np.isfinite(rate_per_s) and rate_per_s > 0):
        raise ValueError("rate_per_s must be a finite number > 0")
    if not (np.isfinite(skew) and skew >= 0):
        raise ValueError("skew must be a finite number >= 0 (0 is uniform popularity)")
    rng = np.random.default_rng(seed)
    start_ms = int(np.datetime64(start, "ms").astype(np.int64))
    created = start_ms + np.floor(np.cumsum(rng.exponential(1000.0 / rate_per_s, rows))).astype(np.int64)
    song = _zipf_draws(rng, songs, rows, skew)
    user = _zipf_draws(rng, _COMMENT_USERS, rows, _USER_SKEW)
    server = rng.integers(0, servers, rows).astype(np.uint16)
    arrival = created + rng.integers(1, 501, rows)

    # The comment text: 1-10 vocabulary words per comment, joined by spaces; an e-mail address
    # or an IP address replaces a word (two different words when a comment has both).
    words = rng.integers(1, 11, rows)
    mail = rng.random(rows) < 0.02
    ip = rng.random(rows) < 0.01
    words[(mail | ip) & (words < 2)] = 2
    offsets = np.zeros(rows + 1, dtype=np.int64)
    np.cumsum(words, out=offsets[1:])
    tokens = pc.take(pa.array(_COMMENT_WORDS), rng.integers(0, len(_COMMENT_WORDS), int(offsets[-1])))
    n_mail, n_ip = int(mail.sum()), int(ip.sum())
    mail_at = rng.integers(0, words)
    ip_at = (mail_at[ip] + 1 + rng.integers(0, words[ip] - 1)) % words[ip]
    addresses = pc.binary_join_element_wise(
        pc.take(pa.array(_MAIL_NAMES), rng.integers(0, len(_MAIL_NAMES), n_mail)),
        pc.cast(pa.array(rng.integers(1, 100, n_mail)), pa.string()),
        "@",
        pc.take(pa.array(_MAIL_DOMAINS), rng.integers(0, len(_MAIL_DOMAINS), n_mail)),
        "",
    )
    octets = rng.integers(0, 256, (4, n_ip))
    octets[0] = np.array([10, 172, 192])[rng.integers(0, 3, n_ip)]
    ips = pc.binary_join_element_wise(*(pc.cast(pa.array(o), pa.string()) for o in octets), ".")
    # replace_with_mask fills the masked slots in position order: put the fill in that order.
    slots = np.concatenate([offsets[:-1][mail] + mail_at[mail], offsets[:-1][ip] + ip_at])
    planted = np.zeros(len(tokens), dtype=bool)
    planted[slots] = True
    fill = pa.concat_arrays([addresses, ips]).take(np.argsort(slots))
    tokens = pc.replace_with_mask(tokens, pa.array(planted), fill)
    comment = pc.binary_join(pa.LargeListArray.from_arrays(pa.array(offsets), tokens), " ")
    length = pc.utf8_length(comment).to_numpy()

    order = np.lexsort((arrival, server))  # by server, then arrival; stable, so ties by creation
    bounds = np.searchsorted(server[order], np.arange(servers + 1))
    tables = []
    for s in range(servers):
        idx = order[bounds[s] : bounds[s + 1]]
        tables.append(
            pa.table(
                {
                    "time": pa.array(arrival[idx], pa.timestamp("ms", tz="UTC")),
                    "song": pa.array(song[idx]),
                    "user": pa.array(user[idx]),
                    "server": pa.array(server[idx]),
                    "comment": comment.take(idx),
                    "length": pa.array(length[idx]),
                }
            )
        )
    return tables
