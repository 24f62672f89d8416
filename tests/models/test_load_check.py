"""The on-load check: a declaration broken on purpose is stopped with one sentence naming
the block and the quantity; the bundled models pass it on every load."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import torch
import transformers
from tiny_models import char_tokenizer
from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

import geomlens.models.families as families
from geomlens.cli import main
from geomlens.errors import GeomlensError
from geomlens.models import BUNDLED, ModelView, load_model
from geomlens.models.check import CheckFailed, check_view
from geomlens.models.families.base import AttentionSettings
from geomlens.models.families.llama import LLAMA
from geomlens.models.families.rope import module_rotary

VOCAB = 64


def tiny_llama_config(theta: float = 10000.0) -> Any:
    return transformers.LlamaConfig(
        vocab_size=VOCAB,
        hidden_size=32,
        intermediate_size=48,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
        rope_parameters={"rope_type": "default", "rope_theta": theta},
    )


def wrong_base_llama() -> Any:
    """The Llama mapping with every block rotating at base 500000 instead of the config's."""
    config = tiny_llama_config(500000.0)
    wrong = module_rotary(LlamaRotaryEmbedding(config), config)
    return replace(
        LLAMA, settings=lambda config, dims, index, attention: AttentionSettings(rotary=wrong)
    )


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(tiny_llama_config())
    out = tmp_path_factory.mktemp("llama") / "tiny"
    model.save_pretrained(out)
    char_tokenizer(VOCAB).save_pretrained(out)
    return out


def test_a_tiny_model_passes_and_records_its_check(folder: Path) -> None:
    view = load_model(folder)
    check = view.load_check
    assert check is not None and check.blocks == 2 and check.tokens > 16
    assert {"attention probabilities", "output", "logits"} <= set(check.max_error)
    assert {"norm_attn construction", "norm_mlp construction"} <= set(check.max_error)
    assert max(check.max_error.values()) < check.tolerance


def test_a_wrong_rope_base_is_stopped_naming_block_and_quantity(folder: Path) -> None:
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(tiny_llama_config()).eval()
    view = wrong_base_llama().build(model, None, "tiny-llama", "memory")
    with pytest.raises(CheckFailed) as info:
        check_view(view)
    message = str(info.value)
    assert "at block 0: its attention probabilities" in message and "llama mapping" in message
    assert message.count(". ") == 0 and message.endswith(".")


def test_a_broken_declaration_stops_the_command_in_one_line(
    folder: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = tuple(wrong_base_llama() if f is LLAMA else f for f in families.FAMILIES)
    monkeypatch.setattr(families, "FAMILIES", broken)
    with pytest.raises(GeomlensError, match="on-load check"):
        load_model(folder)
    out = folder.parent / "run"
    args = ["capture", "--model", str(folder), "--contexts", "2", "--length", "8"]
    assert main([*args, "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "at block 0: its attention probabilities" in err[0]
    assert not (out / "metrics.json").exists()


@pytest.mark.parametrize("name", ["smollm2", "minilm"])
def test_the_bundled_models_pass(request: pytest.FixtureRequest, name: str) -> None:
    view: ModelView = request.getfixturevalue(name)  # loaded once per session (conftest)
    check = view.load_check
    assert check is not None and check.blocks == view.n_layers
    assert max(check.max_error.values()) < check.tolerance
    final = "logits" if view.generates else "hidden state"
    assert {"attention probabilities", "output", final} <= set(check.max_error)


def test_gemma3_270m_passes_where_installed() -> None:
    if not BUNDLED["gemma3-270m"].installed:
        pytest.skip("gemma3-270m is not installed")
    check = load_model("gemma3-270m").load_check
    assert check is not None and max(check.max_error.values()) < check.tolerance
