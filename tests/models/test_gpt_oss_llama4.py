"""GPT-OSS and Llama 4 beyond their rows in the family table: what the tiny rows leave at
initial values (GPT-OSS's expert biases start at zero), and that each concept the view
adds for them (sink logits, chunked masks, the NoPE query temperature, q/k norms after a
scaled rotation, router-scaled expert inputs, the clamped SwiGLU) is what makes the
on-load check pass: the view without it is stopped, naming block and quantity."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
import torch
import transformers

from geomlens.models.check import CheckFailed, check_view
from geomlens.models.families import family_for, gpt_oss, llama4
from geomlens.models.families.base import Family

SIZES: dict[str, Any] = dict(
    vocab_size=96,
    hidden_size=32,
    intermediate_size=16,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=8,
    max_position_embeddings=64,
    num_local_experts=4,
)


def _model(config: Any, all_params: bool = False) -> Any:
    """A tiny random model; 1-D parameters (and with ``all_params`` the expert biases)
    moved off their initial values."""
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(
        config, attn_implementation="eager", dtype=torch.float32
    )
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.ndim == 1 or (all_params and name.endswith("_bias")):
                p.add_(0.2 * torch.randn_like(p))
    return model.eval().requires_grad_(False)


def _check(family: Family, model: Any) -> dict[str, float]:
    return check_view(family.build(model, None, "tiny", "memory")).max_error


def _settings(family: Family, **changes: Any) -> Family:
    base = family.settings
    return replace(family, settings=lambda *a: replace(base(*a), **changes))


@pytest.fixture(scope="module")
def oss() -> Any:
    config = transformers.GptOssConfig(
        **SIZES, num_experts_per_tok=2, sliding_window=4, swiglu_limit=0.3
    )
    assert family_for(config).name == "gpt_oss"
    return _model(config, all_params=True)


def test_gpt_oss_with_expert_biases_and_clamping_passes(oss: Any) -> None:
    assert float(oss.model.layers[0].mlp.experts.down_proj_bias.abs().max()) > 0
    errors = _check(gpt_oss.GPT_OSS, oss)
    assert max(errors.values()) < 1e-4
    view = gpt_oss.GPT_OSS.build(oss, None, "tiny", "memory")
    x = torch.randn(1, 6, 32, generator=torch.Generator().manual_seed(1))
    rows = view.blocks[0].attn.probabilities(x).sum(-1)
    assert float(rows.max()) < 1.0  # the sinks take part of every row's mass


def _without_glu(moe: Any, config: Any, layer: Any = None) -> Any:
    view = gpt_oss.gpt_oss_mlp(moe, config, layer)
    return replace(view, experts=tuple(replace(e, glu=None) for e in view.experts))


def _without_bias_rows(moe: Any, config: Any, layer: Any = None) -> Any:
    view = gpt_oss.gpt_oss_mlp(moe, config, layer)
    experts = tuple(replace(e, b_out=None) for e in view.experts)
    return replace(view, experts=experts, W_out=torch.cat([e.W_out for e in experts]))


@pytest.mark.parametrize(
    ("broken", "quantity"),
    [
        (_settings(gpt_oss.GPT_OSS, sinks=None), "attention probabilities"),
        (_settings(gpt_oss.GPT_OSS, window=None), "attention probabilities"),
        (replace(gpt_oss.GPT_OSS, mlp_view=_without_glu), "output"),
        (replace(gpt_oss.GPT_OSS, mlp_view=_without_bias_rows), "output"),
    ],
    ids=["no-sinks", "no-window", "plain-swiglu", "no-expert-bias"],
)
def test_gpt_oss_without_each_concept_is_stopped(oss: Any, broken: Family, quantity: str) -> None:
    with pytest.raises(CheckFailed) as info:
        _check(broken, oss)
    assert info.value.quantity == quantity


def _llama4(**options: Any) -> Any:
    sizes = {**SIZES, "num_hidden_layers": 4, "intermediate_size_mlp": 24}
    config = transformers.Llama4TextConfig(
        **sizes,
        attention_chunk_size=4,
        floor_scale=4,
        pad_token_id=0,
        **options,
    )
    assert family_for(config).name == "llama4"
    return _model(config)


@pytest.fixture(scope="module")
def scout() -> Any:
    return _llama4()


def test_llama4_q_k_norms_after_a_scaled_rotation_pass() -> None:
    """YaRN multiplies cos and sin by its attention factor; the q/k norm comes after."""
    yarn = dict(rope_type="yarn", rope_theta=500000.0, factor=4.0)
    model = _llama4(rope_parameters={**yarn, "original_max_position_embeddings": 16})
    assert model.model.rotary_emb.attention_scaling != 1.0
    assert max(_check(llama4.LLAMA4, model).values()) < 1e-4


def _unscaled_inputs(moe: Any, config: Any, layer: Any = None) -> Any:
    return replace(llama4.llama4_mlp(moe, config, layer), scale_inputs=False)


@pytest.mark.parametrize(
    ("broken", "quantity"),
    [
        (_settings(llama4.LLAMA4, chunk=None), "attention probabilities"),
        (_settings(llama4.LLAMA4, query_scale=None), "attention probabilities"),
        (_settings(llama4.LLAMA4, qk_norm=None), "attention probabilities"),
        (replace(llama4.LLAMA4, rotary_interleaved=False), "attention probabilities"),
        (replace(llama4.LLAMA4, mlp_view=_unscaled_inputs), "output"),
    ],
    ids=["no-chunks", "no-temperature", "no-qk-norm", "halves-rotary", "router-on-outputs"],
)
def test_llama4_without_each_concept_is_stopped(scout: Any, broken: Family, quantity: str) -> None:
    assert max(_check(llama4.LLAMA4, scout).values()) < 1e-4
    with pytest.raises(CheckFailed) as info:
        _check(broken, scout)
    assert info.value.quantity == quantity
