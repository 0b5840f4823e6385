"""The engine's layers, as the docs state them and as the #includes have them.

One order, written in four places (engine/CMakeLists.txt, engine/README.md, docs/contributing.md,
docs/architecture.md): every one must state the same, and no file of a layer may include a layer
above it. engine/testing/ is not a layer: nothing of the product may include it.
"""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ENGINE = ROOT / "engine"
ORDER = ["core", "arrow", "sync", "gate", "window", "ops", "runtime", "python"]


def stated_orders():
    arrow = re.compile(r"`?(\w+)`?\s*(?:→|->)\s*")
    for doc in ["engine/CMakeLists.txt", "engine/README.md", "docs/contributing.md", "docs/architecture.md"]:
        text = " ".join((ROOT / doc).read_text().split())  # an order may wrap across lines
        match = re.search(r"`?core`?\s*(?:→|->)(?:\s*`?\w+`?\s*(?:→|->))*\s*`?\w+`?", text)
        assert match, f"{doc} states no layer order"
        yield doc, re.findall(r"\w+", match.group(0))


def test_every_doc_states_the_same_layer_order():
    for doc, order in stated_orders():
        assert order == ORDER, f"{doc} says {order}"


def test_each_layer_includes_only_layers_below_it():
    wrong = []
    for path in sorted(ENGINE.glob("*/*")):
        layer = path.parent.name
        if path.suffix not in {".h", ".cpp"}:
            continue
        for included in re.findall(r'#include "(\w+)/', path.read_text()):
            if layer == "testing":
                continue  # tools for tests may use any layer
            if included == "testing" or ORDER.index(included) > ORDER.index(layer):
                wrong.append(f"{path.relative_to(ROOT)} includes {included}/")
    assert wrong == []


def test_every_engine_folder_is_a_layer_or_testing():
    folders = {p.name for p in ENGINE.iterdir() if p.is_dir()}
    assert folders == set(ORDER) | {"testing"}
