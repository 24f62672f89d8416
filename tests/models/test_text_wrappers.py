"""Multimodal wrappers (Gemma 3, Mistral 3) read through their language model, end to end:
a tiny wrapper saved as a folder with a real tokenizer loads by path (the on-load check runs
the wrapper's own forward pass on text), and ``geomlens decompose``, ``sphere`` and
``walk`` exit 0 on it. Also: GLM-4.5's router with its correction bias moved off zero (the
family table leaves buffers at their initial values) still equals Hugging Face's."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
import transformers
from family_cases import CASES, Case, build_case
from tiny_models import small_tokenizer

from geomlens.cli import main
from geomlens.models import load_model
from geomlens.models.check import check_view

WRAPPERS = [c for c in CASES if c.id.endswith("-multimodal")]


def wrapper_folder(case: Case, root: Path) -> Path:
    """Save a tiny random wrapper of ``case`` (text sizes of 32 wide, the tokenizer's
    vocabulary and special tokens, 512 positions) with a real tokenizer."""
    tokenizer = small_tokenizer(False)
    vocab = len(tokenizer)
    ids = {f"{k}_token_id": getattr(tokenizer, f"{k}_token_id") for k in ("bos", "eos", "pad")}
    text = {**case.options["text_config"], "hidden_size": 32, "intermediate_size": 48}
    text.update(vocab_size=vocab, max_position_embeddings=512)
    text.update({k: v for k, v in ids.items() if v is not None})
    if "head_dim" in text:
        text["head_dim"] = 8
    options: dict[str, Any] = {**case.options, "text_config": text}
    for key in ("image_token_index", "boi_token_index", "eoi_token_index"):
        if key in options:  # the last ids of the vocabulary
            options[key] = vocab - 1 - ("boi", "eoi", "image").index(key.split("_")[0])
    config = transformers.CONFIG_MAPPING[case.model_type](**options)
    torch.manual_seed(0)
    model = transformers.AutoModelForImageTextToText.from_config(config)
    folder = root / case.id
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.mark.parametrize("case", WRAPPERS, ids=[c.id for c in WRAPPERS])
def test_a_saved_wrapper_loads_and_runs_decompose_sphere_and_walk(
    case: Case, tmp_path: Path
) -> None:
    folder = wrapper_folder(case, tmp_path)
    view = load_model(folder)
    assert type(view.model).__name__.endswith("ForConditionalGeneration")
    assert view.family == case.family and view.load_check is not None
    assert max(view.load_check.max_error.values()) < view.load_check.tolerance
    assert "logits" in view.load_check.max_error  # the wrapper's own logits were compared
    window = ["--contexts", "8", "--length", "16", "--batch-size", "8", "--figures", "none"]
    for command in ("decompose", "sphere", "walk"):
        out = tmp_path / f"{case.id}-{command}"
        rc = main([command, "--model", str(folder), *window, "--out", str(out)])
        assert rc == 0, command
        metrics = json.loads((out / "metrics.json").read_text())
        assert metrics, command


def test_glm4_moe_router_correction_bias_matches_hf() -> None:
    """The correction bias moves which experts are chosen (not their weights): with it set
    far off zero, the view's blocks still rebuild Hugging Face's outputs."""
    view = build_case(next(c for c in CASES if c.id == "glm4_moe"))
    g = torch.Generator().manual_seed(1)
    moved = 0
    with torch.no_grad():
        for block in view.blocks:
            gate = getattr(block.mlp().module, "gate", None)
            if gate is not None:
                gate.e_score_correction_bias.copy_(torch.randn(8, generator=g))
                moved += 1
    assert moved == 2  # the first layer is dense
    check = check_view(view)
    assert max(check.max_error.values()) < check.tolerance
