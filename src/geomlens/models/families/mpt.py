"""MPT family (MosaicML): pre-LayerNorm blocks without biases, ALiBi position bias, fused
QKV.

``Wqkv`` holds all of Q, then K, then V; the norms are LayerNorms without bias; the MLP is
``GELU(x W_up) W_down`` (exact GELU). Scores are ``softmax_scale * q . k + m_h (j - i)``;
Hugging Face adds ``m_h (j - T + 1)``, which differs by a constant per query row, so the
softmax is the same. Hugging Face's ``build_mpt_alibi_tensor`` always runs at its default
``alibi_bias_max`` of 8, where its slopes ``m_h`` are BLOOM's. Hugging Face's MPT
implements only ALiBi, multi-head attention and bias-free layers, so configs asking for
anything else are refused, as are the options it ignores but the original model applied
(q/k LayerNorm, QKV clipping, prefix-LM masks, a logit scale). Its MLP is 4x wide whatever
``expansion_ratio`` says: the option is handled (the view reads the width from the
weights), and weights of another width fail the load's shape check.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from geomlens.models.families.base import (
    AttentionSettings,
    Dims,
    Family,
    falsy,
    one_of,
    standard_dims,
)
from geomlens.models.families.bloom import alibi_settings
from geomlens.models.families.common import dense_mlp, fused_heads

ATTENTION = {
    "alibi": True,
    "alibi_bias_max": 8,
    "attn_type": "multihead_attention",
    "clip_qkv": None,
    "prefix_lm": False,
    "qk_ln": False,
}
"""The ``attn_config`` entries Hugging Face's MPT computes with (others: any value)."""


def known_attention(value: Any) -> str | None:
    """Accept an ``attn_config`` whose entries are those Hugging Face's MPT implements."""
    entries = value.to_dict() if hasattr(value, "to_dict") else dict(value or {})
    bad = [k for k, v in ATTENTION.items() if k in entries and entries[k] != v]
    if not bad:
        return None
    return "handled: " + ", ".join(f"{k}={ATTENTION[k]!r}" for k in bad)


def mpt_settings(config: Any, dims: Dims, index: int, attention: Any) -> AttentionSettings:
    """BLOOM's ALiBi bias (Hugging Face's MPT slopes at ``alibi_bias_max=8`` are BLOOM's
    for every head count) with the module's ``softmax_scale``."""
    return replace(
        alibi_settings(config, dims, index, attention), scale=float(attention.softmax_scale)
    )


def mpt_dims(config: Any) -> Dims:
    """Sizes; the context is ``max_seq_len`` (Hugging Face's ALiBi table ends there)."""
    return replace(standard_dims(config), n_ctx=int(config.max_seq_len))


MPT = Family(
    name="mpt",
    model_types=("mpt",),
    features=("fused QKV", "bias-free LayerNorm"),
    auto_class="causal-lm",
    # expansion_ratio only sets the MLP width, which the view reads from the weights'
    # shapes (Hugging Face's MPT builds 4x whatever it says; a checkpoint of another
    # width is refused by the load's shape check)
    handles=frozenset(
        {"max_seq_len", "learned_pos_emb", "embedding_fraction", "init_device", "expansion_ratio"}
    ),
    options={
        "attn_config": known_attention,
        "no_bias": one_of(True),
        "logit_scale": falsy,
        "norm_type": one_of("low_precision_layernorm", "layernorm"),
    },
    heads=fused_heads("Wqkv", "out_proj", "contiguous"),
    mlp_view=dense_mlp("up_proj", "down_proj", activation="gelu"),
    base=("transformer",),
    embed="wte",
    layers="blocks",
    final_norm="norm_f",
    attention="attn",
    sites=("Wqkv", "out_proj"),
    norm_attn="norm_1",
    norm_mlp="norm_2",
    mlp="ffn",
    norm_kind="layernorm",
    position="alibi",
    dims=mpt_dims,
    settings=mpt_settings,
)
