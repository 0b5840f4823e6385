"""Every example in the README, the docs and the package's docstrings runs as written."""

import doctest
import importlib
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


@pytest.mark.parametrize("path", DOCS, ids=lambda p: p.name)
def test_python_blocks_in_docs_run(path, tmp_path, monkeypatch):
    blocks = re.findall(r"```python\n(.*?)```", path.read_text(), flags=re.S)
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    for block in blocks:
        exec(compile(block, str(path), "exec"), namespace)


@pytest.mark.parametrize("name", ["", ".datasets", ".errors", ".expr", ".io", ".merge", ".pipeline"])
def test_docstring_examples(name):
    module = importlib.import_module("pyarrow_ops" + name)
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0
    assert result.attempted > 0
