"""`geomlens report` with its default figures (static PNGs included), once per tier and
kind: a full-tier decoder (llama) and encoder (bert), a hidden-state-tier decoder
(deepseek_v3, latent attention) and encoder (deberta-v2), and a hidden-state-tier encoder
whose final norm sits beside its blocks (megatron-bert). The other command tests run with
``--figures none``; these runs (about 30 s each) draw every figure. A model with no norm
geomlens reads and a readout that is not its own (reformer) draws the figures that apply
and says, per part, why the others do not."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from tiny_models import small_tokenizer

from geomlens.cli import main
from geomlens.models.tiny import tiny_model

CASES = [
    ("llama", "full", False),
    ("bert", "full", True),
    ("deepseek_v3", "hidden-state", False),
    ("deberta-v2", "hidden-state", True),
    ("megatron-bert", "hidden-state", True),
]
"""(model type, tier, encoder)."""

EVERY_REPORT = (
    "decomposition_shares.png",
    "decomposition_gram.png",
    "sphere_radius.png",
    "sphere_top_tokens.png",
    "sphere_lens.png",
    "walk_encoding_ranks.png",
    "walk_similarity_cos.png",
)
"""Static figures every report draws, whatever the tier."""

SPHERE_ON_PAGE = (
    "Norms of the hidden states entering each layer norm",
    "Top tokens by norm and by readout score",
    "Logit lens of the prompt",
)
"""Captions of sphere figures the page embeds for every tier."""


def saved(model_type: str, encoder: bool, root: Path) -> Path:
    """A tiny random model of ``model_type`` saved with a real tokenizer."""
    tokenizer = small_tokenizer(encoder)
    sizes: dict[str, Any] = {"vocab_size": len(tokenizer)}
    for key in ("bos", "eos", "pad"):
        if getattr(tokenizer, f"{key}_token_id") is not None:
            sizes[f"{key}_token_id"] = getattr(tokenizer, f"{key}_token_id")
    folder = root / model_type
    tiny_model(model_type, **sizes).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.mark.parametrize(("model_type", "tier", "encoder"), CASES, ids=[c[0] for c in CASES])
def test_report_draws_its_default_figures(
    model_type: str, tier: str, encoder: bool, tmp_path: Path
) -> None:
    folder = saved(model_type, encoder, tmp_path)
    out = tmp_path / "run"
    args = ["report", "--model", str(folder), "--contexts", "8", "--length", "16"]
    assert main([*args, "--batch-size", "8", "--limit", "3", "--quiet", "--out", str(out)]) == 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["model"]["tier"] == tier
    figures = {p.name for p in (out / "figures").iterdir()}
    missing = [f for f in EVERY_REPORT if f not in figures]
    assert not missing, f"{model_type}: {missing} not drawn"
    page = (out / "report.html").read_text()
    for caption in SPHERE_ON_PAGE:  # embedded on the page, under their captions
        assert f'alt="{caption}" src="data:image/png;base64,' in page, caption
    metrics = json.loads((out / "metrics.json").read_text())
    if tier == "full":  # the head probe reads the attention
        assert "sphere_heads.png" in figures
    else:  # no layer probed: no head figure, and the attention parts say why per layer
        assert "sphere_heads.png" not in figures
        assert metrics["attention"]["layers"]["0"].startswith("not applicable: layer 0")
    assert ("concepts_schemes.png" in figures) == (not encoder)
    assert metrics["sphere"]["identity"]["max_rel_err"] is not None  # every norm read


NO_NORMS = "not applicable: the model has no layer norms geomlens can read"
NO_READOUT = "not available: the readout is not available for this model: "


def test_report_says_what_a_model_without_norms_or_readout_cannot_give(tmp_path: Path) -> None:
    """Reformer in the hidden-state tier: no norm geomlens reads (its final norm reads two
    concatenated streams), and logits that differ from the view's readout. `report` with its
    default figures exits 0; each part that needs the norms or the readout writes one
    sentence instead of its numbers, draws no figure, and its claims are not applicable."""
    folder = saved("reformer", False, tmp_path)
    out = tmp_path / "run"
    args = ["report", "--model", str(folder), "--contexts", "8", "--length", "16"]
    assert main([*args, "--batch-size", "8", "--limit", "2", "--quiet", "--out", str(out)]) == 0
    metrics = json.loads((out / "metrics.json").read_text())
    sphere = metrics["sphere"]
    assert sphere["identity"]["max_rel_err"] is None
    assert sphere["not_available"]["identity"] == NO_NORMS
    for part in ("top_tokens", "trajectory"):
        assert sphere["not_available"][part].startswith(NO_READOUT)
        assert part not in sphere
    assert metrics["walk"]["not_available"].startswith(NO_READOUT)
    assert "encoding" not in metrics["walk"]
    assert metrics["concepts"]["unsupported"].startswith(NO_READOUT)
    verdicts = {c["id"]: c["verdict"] for c in metrics["claims"]}
    assert verdicts["molina.layernorm_sphere"] == NO_NORMS
    for claim in ("molina.gamma_beta_common_words", "singh.walk_leaves"):
        assert verdicts[claim].startswith("not applicable: the readout is not available")
    figures = {p.name for p in (out / "figures").iterdir()}
    assert "walk_similarity_cos.png" in figures  # the hidden states' own geometry
    drawn = [f for f in figures if f.startswith(("sphere_", "walk_encoding", "walk_decoding"))]
    assert not drawn, drawn
    page = (out / "report.html").read_text()
    assert f"Layer-norm identity: {NO_NORMS}." in page
    assert "Top tokens: not available: the readout is not available for this model" in page
    assert "Encoding and decoding walks: not available: the readout is not available" in page
