"""The IBM Streams scheduler paper's shapes (benchmarks.threading prints the full tables, on 16 cores
too): a chain of 100 operators, one operator every worker runs, and 10 branches of 10 operators with
a union, at 1 us of work per tuple and operator, under each threading model, at a fixed thread count
and elastic (``threads="auto"``). A run is about 1 s at one worker; the elastic figure next to the
fixed one is the issue-30 bar (auto within 10 % of the best fixed count)."""

import functools

import pyarrow_ops as po
from benchmarks import threading as bench_threading

ROWS = 10_000  # the chain and the mix: 100 operators x 10,000 tuples x 1 us = 1 s at one worker
COST_US = 1.0


@functools.cache
def _shapes():
    return bench_threading.shapes(ROWS, depth=100, width=10, cost=COST_US, most_wide=ROWS * 100)


class Threading:
    timeout = 300
    number = 1
    repeat = (3, 5, 60.0)
    params = (["pipeline", "parallel", "mix"],
              ["manual", "dedicated", "ordered 2", "ordered auto", "dynamic 2", "dynamic auto"])
    param_names = ["shape", "contender"]

    def setup(self, shape, contender):
        model, _, threads = contender.partition(" ")
        self.options = {"threading": model}
        if threads:
            self.options["threads"] = threads if threads == "auto" else int(threads)
        self.build = _shapes()[shape][0]

    def time_run(self, shape, contender):
        po.run(self.build(), fuse=False, **self.options).to_arrow()
