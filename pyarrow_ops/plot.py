"""Plots of a run's statistics, drawn with matplotlib (an optional dependency:
``pip install 'pyarrow-ops[plot]'``); importing pyarrow_ops does not load it::

    result = po.Pipeline(table, time="t").with_columns(u=po.col("v") * 2).run(threads="auto")
    result.to_arrow()
    po.plot_thread_levels(result, "levels.png")
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


def _levels(source: Any) -> list[Mapping[str, Any]]:
    if hasattr(source, "stats"):
        source = source.stats()
    if isinstance(source, Mapping):
        if "thread_levels" not in source:
            raise ValueError("these statistics hold no thread levels: they come from runs with threads=\"auto\"")
        source = source["thread_levels"]
    levels = list(source)
    for i, entry in enumerate(levels):
        missing = {"at_ns", "threads", "tuples_per_s"} - set(entry)
        if missing:
            raise ValueError(f"thread level {i} lacks {sorted(missing)}: {dict(entry)!r}")
    return levels


def plot_thread_levels(source: Any, path: str, *, title: str | None = None,
                       others: Sequence[tuple[str, Any]] = ()) -> None:
    """Writes a PNG of an elastic run (``threads="auto"``) as the IBM Streams paper's Figure 11 draws
    it: over the run's time in seconds, the tuples per second all operators took in (left axis) and
    the threads that ran (right axis, a step line), one point per period of the controller.

    ``source`` is a run's result, its ``stats()`` or their ``thread_levels`` list. ``others``: more
    runs as ``(label, source)`` pairs, each drawn in a panel of its own below the first (the paper
    draws several runs of one graph side by side)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError("plot_thread_levels needs matplotlib: pip install 'pyarrow-ops[plot]'") from e
    runs = [(title or "", _levels(source))] + [(label, _levels(s)) for label, s in others]
    fig, axes = plt.subplots(len(runs), 1, figsize=(7, 2.6 * len(runs)), squeeze=False)
    for ax, (label, levels) in zip(axes[:, 0], runs, strict=True):
        seconds = [lv["at_ns"] / 1e9 for lv in levels]
        ax.plot(seconds, [lv["tuples_per_s"] / 1e6 for lv in levels], color="tab:blue", marker=".")
        ax.set_xlabel("time (s)")
        ax.set_ylabel("M tuples/s (all operators)", color="tab:blue")
        ax.set_ylim(bottom=0)
        threads = ax.twinx()
        threads.step(seconds, [lv["threads"] for lv in levels], where="post", color="tab:red")
        threads.set_ylabel("threads", color="tab:red")
        threads.set_ylim(0, max([lv["threads"] for lv in levels], default=1) + 1)
        if label:
            ax.set_title(label, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
