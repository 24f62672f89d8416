"""In-memory texts as a corpus (``corpus=[...]``) and a run's per-layer tables as pandas
DataFrames with the metric glossary as their column descriptions."""

from __future__ import annotations

import json

import pytest

import geomlens
from geomlens.errors import GeomlensError
from geomlens.models import ModelView

TEXTS = [
    "The river rose through the night and by morning the bridge was under water again.",
    "She opened the old piano, pressed a key, and listened to the note fade slowly away.",
    "Markets fell sharply after the bank raised its rates for the third time this year.",
    "The team scored twice in the last ten minutes to win the cup in front of home fans.",
    "A small robot rolled across the lab floor, stopped, and turned its camera to the door.",
    "Farmers in the valley planted wheat early because the spring had been unusually warm.",
]
SMALL = dict(contexts=4, length=8, layers=[0, 1, 2], batch_size=4, progress=False, figures="none")


@pytest.fixture(scope="module")
def runs(minilm: ModelView, tmp_path_factory: pytest.TempPathFactory):
    """A capture run on the texts in memory, and one on the same texts in a .jsonl file."""
    root = tmp_path_factory.mktemp("memory-corpus")
    jsonl = root / "texts.jsonl"
    jsonl.write_text("".join(json.dumps({"text": t}) + "\n" for t in TEXTS), encoding="utf-8")
    memory = geomlens.capture(
        model="minilm-l6", corpus=TEXTS, out=root / "memory", view=minilm, **SMALL
    )
    on_disk = geomlens.capture(
        model="minilm-l6", corpus=jsonl, out=root / "file", view=minilm, **SMALL
    )
    return memory, on_disk


def test_texts_in_memory_equal_the_same_texts_in_a_file(runs):
    memory, on_disk = runs
    assert memory.metrics["capture"] == on_disk.metrics["capture"]
    assert memory.metrics["capture"]["n_contexts"] == SMALL["contexts"]


def test_same_texts_reuse_the_run(runs, minilm: ModelView, capsys):
    memory, _ = runs
    again = geomlens.capture(
        model="minilm-l6", corpus=list(TEXTS), out=memory.folder, view=minilm, **SMALL
    )
    assert again.metrics == memory.metrics
    assert "reusing it" in capsys.readouterr().err


def test_layers_is_the_metrics_table_with_descriptions(runs):
    memory, _ = runs
    frame = memory.layers()
    rows = memory.metrics["capture"]["layers"]
    assert frame.attrs["table"] == "capture/layers" and memory.tables() == ["capture/layers"]
    assert list(frame["layer"]) == [r["layer"] for r in rows] == SMALL["layers"]
    assert frame["share_pos"].tolist() == pytest.approx([r["share_pos"] for r in rows])
    described = frame.attrs["descriptions"]
    assert "positional part" in described["share_pos"]
    assert "position 0 left out" in described["share_pos_skip_first"]
    assert set(described) <= set(frame.columns)
    assert memory.glossary(["share_pos"])["share_pos"] == described["share_pos"]
    with pytest.raises(GeomlensError, match="has no table"):
        memory.layers("nothing")


@pytest.mark.parametrize("corpus", [[], ["fine", ""]])
def test_empty_texts_refused(corpus):
    with pytest.raises(GeomlensError, match=r"corpus( is an empty list|\[1\] is empty)"):
        geomlens.decompose(model="minilm-l6", corpus=corpus, **SMALL)
