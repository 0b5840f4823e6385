"""The asv suites of pyarrow-ops. They import the repository's ``benchmarks`` package (workloads, queries,
peers' formulations), which the wheel asv installs leaves out, so the repository root goes on the path.

This directory is not called ``benchmarks``, asv's default: asv imports it under its directory name, which
would shadow the repository's package.
"""

import pathlib
import sys

_ROOT = str(pathlib.Path(__file__).resolve().parents[2])
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)
