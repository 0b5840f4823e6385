"""What every peer comparison does between two timed runs.

``settle()`` idles before a contender's timed run so that it starts on a quiet machine. A peer's
threads go on spinning for a while after its query returns (a thread pool waiting for more work),
and on two cores they take time from whatever runs next: the engine's 4-input stateless pipeline
(10M clicks, 2 threads) ran at 84.0-90.7 M tuples/s right after a Polars query and at 100.0-101.7
M after 0.3 s idle, best of 3 each, two alternations in one process. Every contender waits the
same, so the rounds stay interleaved and no contender is favoured.
"""

from __future__ import annotations

import time

SETTLE_S = 0.3


def settle() -> None:
    """Idles ``SETTLE_S`` seconds, untimed."""
    time.sleep(SETTLE_S)
