"""Every example in the README, the docs and the package's docstrings runs as written."""

import doctest
import importlib
import pathlib
import pkgutil
import re

import pytest

import pyarrow_ops

ROOT = pathlib.Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


@pytest.mark.parametrize("path", DOCS, ids=lambda p: p.name)
def test_python_blocks_in_docs_run(path, tmp_path, monkeypatch):
    blocks = re.findall(r"```python\n(.*?)```", path.read_text(), flags=re.S)
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    for block in blocks:
        exec(compile(block, str(path), "exec"), namespace)


# Every module of the package, found rather than listed, so that a new one cannot be left out. doctest.testmod
# collects only the objects a module defines itself, so each module runs its own examples, re-exported or not.
MODULES = sorted(m.name for m in pkgutil.iter_modules(pyarrow_ops.__path__, "pyarrow_ops.") if not m.name.endswith("._engine"))
WITH_EXAMPLES = {"pyarrow_ops", "pyarrow_ops.aggregate", "pyarrow_ops.datasets", "pyarrow_ops.errors", "pyarrow_ops.expr",
                 "pyarrow_ops.io", "pyarrow_ops.lateness", "pyarrow_ops.live", "pyarrow_ops.merge", "pyarrow_ops.pipeline", "pyarrow_ops.windows",
                 "pyarrow_ops.checkpoint", "pyarrow_ops.streaming"}


@pytest.mark.parametrize("name", ["pyarrow_ops", *MODULES])
def test_docstring_examples(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0
    if name in WITH_EXAMPLES:
        assert result.attempted > 0
