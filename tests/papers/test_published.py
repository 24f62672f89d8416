"""The papers' published numbers beside a run's own: the model's, or the nearest published
model's of the same kind and position scheme.

Song & Zhong print Table 1 for GPT-2 small. A random GPT-2 of exactly that shape (12
blocks of width 768, a 50,257-token vocabulary) stands in for the real checkpoint, which
this machine cannot download: the check is that the run recognises the model, keeps the
published numbers beside its own in metrics.json, and the claims, the report page and
``compare`` show them. A run of another model shows the nearest published model's, named
as such, with the layers mapped by relative depth. The project's data file is checked
against the authors' values beside the project (``../shared/published``) when they exist.
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
from geomlens.papers import published

GPT2_SMALL = {"family": "gpt2", "n_layers": 12, "d_model": 768, "vocab": 50257}
SMOLLM2 = {
    "family": "llama",
    "n_layers": 30,
    "d_model": 576,
    "vocab": 49152,
    "position": "rotary",
    "is_encoder": False,
}
MINILM = {
    "family": "bert",
    "n_layers": 6,
    "d_model": 384,
    "vocab": 30522,
    "position": "learned",
    "is_encoder": True,
}
BLOOM_LIKE = {"family": "bloom", "n_layers": 4, "d_model": 64, "vocab": 1000, "position": "alibi"}
T5_SMALL = {
    "family": "t5",
    "n_layers": 6,
    "d_model": 512,
    "vocab": 32128,
    "position": "t5-relative",
    "is_encoder": True,
}
SHARED = Path(__file__).resolve().parents[2].parent / "shared" / "published" / "authors_values.json"


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


def test_gpt2_small_has_its_own_numbers_and_other_models_the_nearest() -> None:
    own = published.published_for(GPT2_SMALL)
    assert own is not None and own.model == "GPT-2 small (124M)" and own.nearest == ""
    for _, corpora in published.SONG_GPT2.quantities.values():
        assert all(sorted(v) == list(range(13)) for v in corpora.values())  # layers 0..12
    medium = published.published_for({**GPT2_SMALL, "n_layers": 24, "position": "learned"})
    assert medium is not None and medium.model == "GPT-2 small (124M)" and medium.nearest
    expected = {
        "SmolLM2": (SMOLLM2, "Llama-2-7B", "pythia-1b-deduped"),
        "MiniLM": (MINILM, "bert-base-cased", None),  # Singh leaves encoders out
        "GPT-2": ({**GPT2_SMALL, "position": "learned"}, "GPT-2 small (124M)", "gpt-neo-1.3B"),
        "BLOOM-like": (BLOOM_LIKE, "bloom-560m", "pythia-1b-deduped"),
        "T5": (T5_SMALL, None, "flan-t5-large"),  # Song & Zhong print no T5
    }
    for name, (model, song, singh) in expected.items():
        found = published.published_for(model)
        assert (found.model if found else None) == song, name
        nearest = published.nearest_singh(model)
        assert (nearest[0].short if nearest else None) == singh, name
    assert published.model_kind(T5_SMALL) == "encoder-decoder"
    assert published.model_kind(MINILM) == "encoder"
    assert published.model_kind({**MINILM, "family": "bart"}) == "encoder-decoder"
    assert published.published_for(None) is None  # no position scheme: no nearest model


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


def test_the_low_rank_claim_names_the_model_whose_rank_it_shows() -> None:
    metrics = metrics_of(rows())
    low_rank = next(c for c in claims(metrics, GPT2_SMALL) if c.id == "song.pos_low_rank")
    assert "11 on GitHub, 11 on OpenWebText, 11 on WikiText" in low_rank.published
    assert "nearest" not in low_rank.published
    assert low_rank.published_number == 11  # the number the claims figure marks
    smol_rank = next(c for c in claims(metrics_of(rows(31)), SMOLLM2) if c.id == low_rank.id)
    assert smol_rank.published_number is not None and 6 <= smol_rank.published_number <= 11
    smol = {c.id: c.published for c in claims(metrics_of(rows(31)), SMOLLM2)}
    assert "6-11 over the layers" in smol["song.pos_low_rank"]
    assert "Llama-2-7B; nearest published model of this kind" in smol["song.pos_low_rank"]
    assert "Llama-2-7B: abs(cos) within / between topics" in smol["song.context_topics"]
    assert "0.40 / 0.17 on GitHub" in smol["song.context_topics"]
    assert (
        "pythia-1b-deduped on HellaSwag (test 1): 0.740 zero-shot"
        in smol["singh.concepts_pyramidal"]
    )
    mini = {c.id: c.published for c in claims(metrics_of(rows(7)), MINILM)}
    assert "(Song & Zhong 2023, bert-base-cased; nearest" in mini["song.pos_low_rank"]
    assert not mini.get("singh.concepts_pyramidal")


def test_layers_map_by_relative_depth_with_the_setup_and_its_caveats() -> None:
    minilm = published_section(metrics_of(rows(7)), MINILM)
    assert minilm is not None and minilm["model"] == "bert-base-cased"
    assert minilm["mapping"]["layers"] == {str(k): 2 * k for k in range(7)}  # layer k: 2k
    rank = next(q for q in minilm["quantities"] if q["key"] == "pos_rank")
    assert rank["published"]["GitHub"]["layers"]["3"] == 11  # bert-base-cased's layer 6
    assert any("causal mask" in c for c in minilm["caveats"])
    smol = published_section(metrics_of(rows(31)), SMOLLM2)
    assert smol is not None and smol["mapping"]["published_layers"] == 32
    # round(l / 30 * 32), then the nearest of the 13 states the authors printed
    assert smol["mapping"]["layers"]["15"] == 16 and smol["mapping"]["layers"]["30"] == 32
    assert smol["mapping"]["layers"]["1"] == 0  # 1 -> 1: printed 0 and 2, the lower
    assert "800 random windows" in smol["setup"] and smol["nearest"].startswith("nearest published")
    topics = {t["key"]: t for t in smol["topics"]}
    assert topics["ctx_cos_within"]["published"]["WikiText"] == {"mean": 0.6, "std": 0.25}
    bloom = published_section(metrics_of(rows(5)), BLOOM_LIKE)
    assert bloom is not None and any("final norm" in c for c in bloom["caveats"])
    assert published_section(metrics_of(rows(7)), T5_SMALL) is None


def test_the_data_file_holds_the_authors_values_with_their_sources() -> None:
    values = published.published_values()
    assert len(values) == 687
    for r in values:
        assert r["source"] and r["paper"] and r["model"] and "value" in r
        assert not r.get("superseded")
    if not SHARED.exists():  # a clone without the authors' files beside it checks no more
        return
    authors = json.loads(SHARED.read_text(encoding="utf-8"))
    current = [r for r in authors if not r.get("superseded")]
    assert [json.dumps(r, sort_keys=True) for r in current] == [
        json.dumps(r, sort_keys=True) for r in values
    ]


def test_singhs_least_shares_are_the_figures_points() -> None:
    assert published.singh_range("singh.concepts_pyramidal", "decoder", 0) == (0.551, 0.839, 11)
    assert published.singh_range("singh.concepts_similarity", "encoder-decoder", 0) == (
        0.751,
        0.96,
        3,
    )
    neo = [
        r["value"]
        for r in published.singh_points("singh.concepts_pyramidal", "EleutherAI/gpt-neo-1.3B")
        if r["segmentation"] == "concat_all_examples"
    ]
    assert neo == [0.839, 0.823]  # the paper's text, section 5.1.1


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


def test_a_run_of_another_model_shows_the_nearest_published_model(minilm_report: Path) -> None:
    metrics = json.loads((minilm_report / "metrics.json").read_text())
    assert metrics["published"]["model"] == "bert-base-cased"
    low_rank = next(c for c in metrics["claims"] if c["id"] == "song.pos_low_rank")
    assert "bert-base-cased; nearest published model" in low_rank["published"]


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
