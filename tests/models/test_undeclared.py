"""Model types no family declares: loaded through a declared layout only when the on-load
check passes (with a notice naming the layout), refused in one sentence otherwise; types
whose attention geomlens cannot read are refused with the reason."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
import transformers
from tiny_models import char_tokenizer

from geomlens.errors import GeomlensError
from geomlens.models import load_model
from geomlens.models.families import REFUSED, family_for, model_types

VOCAB = 64


def tiny_folder(model_type: str, root: Path, **options: Any) -> Path:
    """A tiny random causal LM of ``model_type`` saved with a covering tokenizer."""
    config = transformers.CONFIG_MAPPING[model_type](
        vocab_size=VOCAB,
        hidden_size=32,
        intermediate_size=48,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=8,
        max_position_embeddings=64,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
        **options,
    )
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(config)
    with torch.no_grad():
        for p in model.parameters():
            if p.ndim == 1:
                p.add_(0.2 * torch.randn_like(p))
    folder = root / model_type
    model.save_pretrained(folder)
    char_tokenizer(VOCAB).save_pretrained(folder)
    return folder


@pytest.mark.parametrize(
    ("model_type", "layout"),
    [("internlm3", "llama"), ("ernie4_5", "helium")],
    ids=["internlm3-as-llama", "ernie4_5-as-helium-interleaved-rotary"],
)
def test_an_undeclared_type_loads_through_a_layout_that_passes(
    model_type: str, layout: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert model_type not in model_types()
    folder = tiny_folder(model_type, tmp_path)
    capsys.readouterr()
    view = load_model(folder)
    notice = capsys.readouterr().err.strip().splitlines()
    assert view.family == layout and view.load_check is not None
    assert len(notice) == 1 and f"through the {layout} layout" in notice[0]
    assert repr(model_type) in notice[0]


def test_an_undeclared_type_no_layout_reproduces_loads_in_the_hidden_state_tier(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Arcee: Llama's tree with an ungated squared-ReLU MLP; the layouts whose paths fit
    (Nemotron's) do not reproduce its norms, so no layout passes: it loads in the
    hidden-state tier, and the notice names each tried layout's first mismatch."""
    folder = tiny_folder("arcee", tmp_path)
    capsys.readouterr()
    view = load_model(folder)
    assert view.tier == "hidden-state" and view.load_check.max_error["hidden states"] == 0.0
    err = capsys.readouterr().err
    assert "'arcee' loads in the hidden-state tier" in err and "extend the closest" in err
    first = err.split("first mismatch of each: ")[1]
    assert first.startswith(("helium (block 0: attention probabilities differ by", "glm ("))
    assert "nemotron (the final norm: construction differs by " in first
    assert "llama, mistral, qwen2" in first and "(ArceeMLP has no gate_proj)" in first
    assert first.index("nemotron") < first.index("llama, mistral")


@pytest.mark.parametrize(
    ("config", "reason"),
    [
        (transformers.DeepseekV3Config(), "latent attention"),
        (transformers.DebertaV2Config(), "disentangled attention"),
        (transformers.DiffLlamaConfig(), "differential attention"),
        (transformers.MambaConfig(), "state-space"),
        (transformers.JambaConfig(), "hybrid"),
    ],
    ids=["deepseek-v3", "deberta-v2", "diffllama", "mamba", "jamba"],
)
def test_unreadable_attention_is_refused_with_the_reason(config: Any, reason: str) -> None:
    assert config.model_type in REFUSED
    with pytest.raises(GeomlensError, match=reason) as info:
        family_for(config)
    message = str(info.value)
    assert f"{config.model_type!r} is not supported" in message and message.count(". ") == 0
