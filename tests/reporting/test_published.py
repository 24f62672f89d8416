"""A paper's published numbers beside a run's own, when the run is of that model.

Song & Zhong print Table 1 for GPT-2 small. A random GPT-2 of exactly that shape (12
blocks of width 768, a 50,257-token vocabulary) stands in for the real checkpoint, which
this machine cannot download: the check is that the run recognises the model, keeps the
published numbers beside its own in metrics.json, and the claims, the report page and
``compare`` show them; a run of any other model shows none.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest
import torch
import transformers

from geomlens.analyses.decomposition.schema import published_section
from geomlens.analyses.registry import claims, write_report
from geomlens.cli import main
from geomlens.models import BUNDLED
from geomlens.models.loading import resolve_folder
from geomlens.reporting import published

GPT2_SMALL = {"family": "gpt2", "n_layers": 12, "d_model": 768, "vocab": 50257}
SMOLLM2 = {"family": "llama", "n_layers": 30, "d_model": 576, "vocab": 49152}


def rows(n: int = 13) -> list[dict[str, Any]]:
    """Decomposition rows of layers 0..n-1 (position 0 left out) with known values."""
    return [
        {
            "layer": i,
            "skip_first": True,
            "pos_rank": 10 + i % 3,
            "pos_stable_rank": 1.5,
            "rel_norm_pos_centred": 0.5 + i / 100,
            "pos_explained": 0.8,
        }
        for i in range(n)
    ]


def metrics_of(layer_rows: list[dict[str, Any]]) -> dict[str, Any]:
    medians = {"pos_rank": [10.0, 12.0], "rel_norm_pos_centred": [0.5, 0.7]}
    return {
        "decomposition": {
            "skip_first": True,
            "layers": layer_rows,
            "intervals": {"method": "m", "n_draws": 30, "groups": 16, "medians": medians},
        }
    }


def test_only_gpt2_small_has_published_numbers() -> None:
    assert published.published_for(GPT2_SMALL) is published.SONG_GPT2
    assert published.published_for(SMOLLM2) is None
    assert published.published_for({**GPT2_SMALL, "n_layers": 24}) is None  # GPT-2 medium
    assert published.published_for(None) is None
    for _, corpora in published.SONG_GPT2.quantities.values():
        assert all(len(v) == 13 for v in corpora.values())  # layers 0..12


def test_the_comparison_holds_both_sides_layer_by_layer() -> None:
    found = published_section(metrics_of(rows()), GPT2_SMALL)
    assert found is not None and found["model"] == "GPT-2 small (124M)"
    by_key = {q["key"]: q for q in found["quantities"]}
    rank = by_key["pos_rank"]
    assert rank["ours"]["median"] == 11 and (rank["ours"]["low"], rank["ours"]["high"]) == (10, 12)
    assert {c: p["median"] for c, p in rank["published"].items()} == {
        "GitHub": 11,
        "OpenWebText": 11,
        "WikiText": 11,
    }
    assert rank["published"]["OpenWebText"]["layers"]["12"] == 12
    norm = by_key["rel_norm_pos_centred"]
    assert norm["ours"]["layers"]["12"] == pytest.approx(0.62)
    assert norm["published"]["GitHub"]["layers"]["12"] == 0.123
    assert (norm["ours"]["low"], norm["ours"]["high"]) == (0.5, 0.7)
    stable = by_key["pos_stable_rank"]
    assert (stable["ours"]["low"], stable["ours"]["high"]) == (None, None)  # none planted
    # a run of fewer layers: the medians are over the layers it has, with no interval
    short = published_section(metrics_of(rows(5)), GPT2_SMALL)
    assert short is not None
    short_rank = next(q for q in short["quantities"] if q["key"] == "pos_rank")
    assert short_rank["ours"]["low"] is None and len(short_rank["ours"]["layers"]) == 5


def test_the_low_rank_claim_shows_the_published_rank_for_gpt2_only() -> None:
    metrics = metrics_of(rows())
    low_rank = next(c for c in claims(metrics, GPT2_SMALL) if c.id == "song.pos_low_rank")
    assert "11 on GitHub, 11 on OpenWebText, 11 on WikiText" in low_rank.published
    assert all(not c.published for c in claims(metrics, SMOLLM2))


@pytest.fixture(scope="module")
def gpt2_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``geomlens decompose`` of a random model of GPT-2 small's shape (SmolLM2's
    tokenizer: its ids all fall inside the larger vocabulary)."""
    if not BUNDLED["smollm2-135m"].installed:
        pytest.fail(f"smollm2-135m is not installed ({BUNDLED['smollm2-135m'].install})")
    root = tmp_path_factory.mktemp("gpt2")
    config = transformers.GPT2Config(n_positions=64)  # the library's defaults: GPT-2 small
    torch.manual_seed(0)
    transformers.GPT2LMHeadModel(config).save_pretrained(root / "gpt2")
    tokenizer = transformers.AutoTokenizer.from_pretrained(resolve_folder("smollm2-135m"))
    tokenizer.save_pretrained(root / "gpt2")
    out = root / "run"
    args = ["decompose", "--model", str(root / "gpt2"), "--contexts", "16", "--length", "16"]
    args += ["--figures", "none"]  # the checks read numbers, the comparison and the page
    assert main([*args, "--out", str(out)]) == 0
    return out


def test_a_gpt2_run_keeps_and_shows_the_published_numbers(gpt2_run: Path, tmp_path: Path) -> None:
    metrics = json.loads((gpt2_run / "metrics.json").read_text())
    assert metrics["published"]["source"] == published.SONG_SOURCE
    keys = [q["key"] for q in metrics["published"]["quantities"]]
    assert keys == ["pos_rank", "pos_stable_rank", "rel_norm_pos_centred"]
    ours = metrics["published"]["quantities"][0]["ours"]["layers"]
    assert sorted(ours, key=int) == [str(i) for i in range(13)]
    norm = metrics["published"]["quantities"][2]["ours"]  # resampled from the sketches
    assert norm["low"] is not None and norm["low"] <= norm["median"] <= norm["high"]
    low_rank = next(c for c in metrics["claims"] if c["id"] == "song.pos_low_rank")
    assert "on OpenWebText" in low_rank["published"]

    assert main(["compare", str(gpt2_run), "--out", str(tmp_path / "cmp")]) == 0
    html = (tmp_path / "cmp" / "compare.html").read_text()
    assert '<section id="published">' in html and "Published numbers for GPT-2 small" in html
    with open(tmp_path / "cmp" / "compare_claims.csv", newline="", encoding="utf-8") as f:
        found = {r["id"]: r for r in csv.DictReader(f)}
    assert "on GitHub" in found["song.pos_low_rank"]["published"]
    assert found["song.pos_low_frequency"]["published"] == ""

    page = write_report(gpt2_run).read_text()  # the run's own page: its Claims section
    assert "Published numbers for GPT-2 small" in page
    assert "relative norm of pos (centred states)" in page and "published: " in page


def test_a_run_of_another_model_has_no_published_numbers(minilm_report: Path) -> None:
    metrics = json.loads((minilm_report / "metrics.json").read_text())
    assert "published" not in metrics
    assert all(c["published"] == "" for c in metrics["claims"])


def test_singhs_published_scores_are_the_papers_own_numbers() -> None:
    """Every number a Singh record states (0.839 as 83.9%, 80% as is) occurs in the paper's
    text, and the section it cites is a heading there."""
    import os
    import re

    papers = Path(os.environ.get("GEOMLENS_DATA", "data")).parent / "papers"
    found = sorted(papers.glob("003_*.txt"))
    if not found:  # the papers sit beside the offline data; a machine without them has none
        pytest.skip(f"Singh's text is not in {papers} (GEOMLENS_DATA names its sibling data/)")
    paper = found[0].read_text(encoding="utf-8")
    headings = {line.split(" ")[0] for line in paper.splitlines() if line[:1].isalnum()}
    for score in published.SINGH_SCORES:
        for whole, digits in re.findall(r"\b(0\.(\d+))\b", score.text):
            percent = f"{int(digits[:2])}" + (f".{digits[2:]}" if digits[2:] else "") + "%"
            assert percent in paper, (score.claim, whole, percent)
        for percent in re.findall(r"\b\d+%", score.text):
            assert percent in paper, (score.claim, percent)
        assert score.source.split(",")[0].split(" ")[-1] in headings, score.source
