"""The report page as a reader meets it: a glossary for every metric key, tables that
scroll inside their box, one copy of each figure, readable run facts, paper links, and a
page that fits a 1,400 px window with no console errors (MiniLM's session report)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from geomlens.report.glossary import GLOSSARY, describe, descriptions


def test_glossary_describes_every_per_layer_key_of_a_report(minilm_report: Path) -> None:
    """Every key of the per-layer rows the page and the Python API show has a sentence."""
    metrics = json.loads((minilm_report / "metrics.json").read_text())
    rows = [
        *metrics["decomposition"]["layers"],
        *metrics["capture"]["layers"],
        *metrics["walk"]["similarity"]["layers"],
        *metrics["walk"]["encoding"]["layers"],
    ]
    keys = {k for row in rows for k, v in row.items() if not isinstance(v, list)}
    missing = sorted(k for k in keys if describe(k) is None)
    assert missing == []


def test_glossary_sentences_are_one_sentence_each() -> None:
    for key, text in GLOSSARY.items():
        assert text.endswith(".") and ". " not in text, key
        assert len(text) < 240, key
    assert describe("share_pos_skip_first") == (
        GLOSSARY["share_pos"].rstrip(".") + ", position 0 left out."
    )
    assert describe("no_such_key") is None
    assert descriptions(["layer", "no_such_key"]) == {"layer": GLOSSARY["layer"]}


pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
