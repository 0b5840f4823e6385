"""The engine's buffer pool, seen from Python.

Column buffers of 64 KiB to 64 MiB that the engine frees are kept for its next batches instead of
going back to the system (docs/architecture.md, "Buffers"): a pipeline allocates the same sizes
thousands of times a second, and fresh pages cost the kernel's zeroing on first touch. At most
256 MiB are kept idle, or the environment's ``PYARROW_OPS_IDLE_MIB`` (MiB, read when the engine
first allocates; 0 turns recycling off): set it where many processes run the engine at once, such
as Spark's Python workers (``spark.executorEnv.PYARROW_OPS_IDLE_MIB``). :func:`release_memory`
hands the idle buffers back now, for a process that has finished its heavy work and wants its
memory returned; :func:`memory_pool` says what is kept.

>>> import pyarrow as pa, pyarrow_ops as po
>>> t = pa.table({"t": list(range(100_000)), "v": [1.0] * 100_000})
>>> _ = po.Pipeline(t, time="t").with_columns(w=po.col("v") * 2).run().to_arrow()
>>> po.release_memory() >= 0
True
>>> po.memory_pool()["idle_bytes"]
0
"""

from __future__ import annotations

from pyarrow_ops import _engine


def memory_pool() -> dict[str, int]:
    """The pool's state: ``idle_bytes`` kept for reuse now, at most ``idle_limit``, and since the
    process started the allocations served from it (``reused``) and those that needed new memory
    (``fresh``)."""
    idle, reused, fresh, limit = _engine.memory_pool()
    return {"idle_bytes": idle, "reused": reused, "fresh": fresh, "idle_limit": limit}


def release_memory() -> int:
    """Frees every idle buffer the pool keeps; returns their bytes. Batches still in use are
    untouched; the pool fills again as the engine runs."""
    return int(_engine.release_memory())
