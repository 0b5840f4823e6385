"""Runs still going when the interpreter exits are stopped while Python still runs normally.

A run's engine threads call into Python: its ingress pulls a Python input (a generator, a
``LiveInput``'s queue), its workers call ``map_batches`` functions, and a thread reading its result
leaves the engine by taking the GIL back. Once the interpreter finalizes, a thread that asks for
the GIL is ended where it stands (``pthread_exit``), and inside the engine's C++ frames that aborts
the whole process ("terminate called without an active exception"). So at exit (``atexit`` runs
before finalization) every run not yet garbage collected is stopped and its threads joined: its
live inputs stop feeding it first (a pull waiting on one ends), and when a run was stopped midway
the threads reading it get a moment to leave the engine before finalization begins.

A thread only waiting on a result never takes the GIL meanwhile (the Ctrl-C check runs on the
main thread alone, engine/python/gil.h), so a daemon thread still waiting at exit is no danger.
"""

from __future__ import annotations

import atexit
import threading
import time
import weakref
from typing import Any

EXIT_STOP_TIMEOUT_S = 10.0
"""How long exit waits for one run's threads (a Python input blocked elsewhere may never return)."""
READERS_GRACE_S = 0.2
"""After stopping a run midway, how long exit lets the threads that were reading it take the GIL
back and leave the engine (microseconds, when the GIL is free)."""

# Every run not yet garbage collected: objects with _stop_at_exit(timeout) -> bool (True when it
# stopped work in progress).
_RUNS: weakref.WeakSet[Any] = weakref.WeakSet()


def register(run: Any) -> None:
    _RUNS.add(run)


def stop_joined(stop: Any, timeout: float) -> None:
    """Calls ``stop()`` on a helper thread and waits at most ``timeout`` for it: a run's join
    waits on its threads, and one stuck in a user's Python input must not hold the exit forever."""
    helper = threading.Thread(target=stop, name="pyarrow-ops stop at exit", daemon=True)
    helper.start()
    helper.join(timeout)


@atexit.register
def _stop_runs_at_exit() -> None:
    stopped = False
    for run in list(_RUNS):
        stopped |= bool(run._stop_at_exit(EXIT_STOP_TIMEOUT_S))
    if stopped:
        time.sleep(READERS_GRACE_S)  # the GIL is free meanwhile
