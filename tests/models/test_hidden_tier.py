"""The hidden-state tier: the types issue 43 names load with hidden states equal to Hugging
Face's, the attention-level analyses say per layer that they do not apply, the commands
run on saved tiny models (``models.tiny``). The reach table's rows: ``test_reach.py``."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
import torch
from tiny_models import small_tokenizer

from geomlens.analyses.common.applicable import not_applicable
from geomlens.cli import main
from geomlens.models.hidden_tier import build_hidden_view, check_hidden_view
from geomlens.models.loading import is_encoder_model
from geomlens.models.tiny import tiny_model

NAMED = [
    "deberta-v2",
    "deepseek_v2",
    "deepseek_v3",
    "falcon_h1",
    "lfm2",
    "granitemoehybrid",
    "qwen3_next",
]
"""The types issue 43 names."""


@pytest.mark.parametrize("model_type", NAMED)
def test_named_types_equal_hugging_face(model_type: str) -> None:
    model = tiny_model(model_type)
    view = build_hidden_view(model, None, model_type, "memory", is_encoder_model(model))
    check = check_hidden_view(view)
    assert view.tier == "hidden-state" and check.tolerance == 0.0
    assert check.max_error["hidden states"] == 0.0
    ids = torch.randint(3, 96, (1, 5))
    with torch.inference_mode():
        theirs = model(input_ids=ids, output_hidden_states=True).hidden_states
        assert torch.equal(view.block_input(ids), theirs[0])
    # every block says why its mixing is not modelled; the shared check says it per layer
    reasons = view.not_modelled()
    assert sorted(reasons) == [0, 1] and all("mixes tokens by" in r for r in reasons.values())
    skipped = not_applicable(view, "the attention split")
    assert skipped is not None and skipped["unsupported"].startswith("not applicable: ")
    assert skipped["layers"]["1"].startswith("not applicable: layer 1 mixes tokens by")
    with pytest.raises(Exception, match="not applicable: layer 0"):
        view.blocks[0].heads()


def test_hybrid_layers_say_how_they_mix() -> None:
    view = build_hidden_view(tiny_model("lfm2"), None, "lfm2", "memory", False)
    assert "short convolution" in view.blocks[0].mixing  # type: ignore[operator]
    assert "no declared family describes" in view.blocks[1].mixing  # type: ignore[operator]
    mla = build_hidden_view(tiny_model("deepseek_v3"), None, "deepseek_v3", "memory", False)
    assert "multi-head latent attention" in mla.blocks[0].mixing  # type: ignore[operator]
    assert mla.final_norm is not None and mla.final_norm.kind == "rmsnorm"


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Tiny saved models (with a real tokenizer) of every type issue 43 names: a
    disentangled-attention encoder, MLA decoders and hybrids."""
    root = tmp_path_factory.mktemp("hidden")
    for model_type in NAMED:
        encoder = model_type == "deberta-v2"
        tokenizer = small_tokenizer(encoder)
        sizes: dict[str, Any] = {"vocab_size": len(tokenizer)}
        for key in ("bos", "eos", "pad"):
            if getattr(tokenizer, f"{key}_token_id") is not None:
                sizes[f"{key}_token_id"] = getattr(tokenizer, f"{key}_token_id")
        model = tiny_model(model_type, **sizes)
        model.save_pretrained(root / model_type)
        tokenizer.save_pretrained(root / model_type)
    return root


@pytest.mark.parametrize("model_type", NAMED)
def test_commands_run_in_the_hidden_state_tier(
    model_type: str, saved: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = saved / model_type
    for command in ("decompose", "sphere", "walk"):
        out = saved / f"{command}-{model_type}"
        args = [command, "--model", str(folder), "--contexts", "8", "--length", "16"]
        assert main([*args, "--batch-size", "8", "--figures", "none", "--out", str(out)]) == 0
        metrics = json.loads((out / "metrics.json").read_text())
        manifest = json.loads((out / "manifest.json").read_text())
        assert "hidden-state" in json.dumps(manifest), "the run records its tier"
        if command == "decompose":
            assert metrics["decomposition"] and metrics["attention"]["layers"]["0"].startswith(
                "not applicable: layer 0"
            )
        if command == "sphere":
            assert metrics["sphere"]["not_applicable"]["layers"]
            assert metrics["sphere"]["trajectory"]
        if command == "walk":
            walk = metrics["walk"]
            assert walk["kernels"]["negative_self_bias_fraction"] is None
            assert walk["kernels"]["not_applicable"]["unsupported"].startswith("not applicable")
            assert walk["encoding"] and walk["similarity"]
    assert "hidden-state tier" in capsys.readouterr().err
    if model_type != "deberta-v2":  # the concept tests, on decoders, read only the model
        task = str(resources.files("geomlens") / "data" / "timedial_200.json")
        out = saved / f"concepts-{model_type}"
        args = ["concepts", "--model", str(folder), "--task", task, "--limit", "3"]
        assert main([*args, "--quiet", "--out", str(out)]) == 0
        concepts = json.loads((out / "metrics.json").read_text())["concepts"]
        assert concepts["baseline"]["n"] == 3 and concepts["schemes"]
