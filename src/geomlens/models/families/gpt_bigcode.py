"""GPT-BigCode family (StarCoder 1, SantaCoder): GPT-2 blocks with multi-query attention.

``c_attn`` is an ``nn.Linear`` holding, with ``multi_query``, all of Q then one K head and
one V head (every query head reads them); without it, head by head [q_h, k_h, v_h].
Positions are learned; scores are scaled by 1/sqrt(d_head) with ``scale_attn_weights``,
else not at all.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from geomlens.models.families.base import (
    AttentionSettings,
    Dims,
    Family,
    falsy,
    standard_dims,
)
from geomlens.models.families.common import dense_mlp, fused_heads


def bigcode_dims(config: Any) -> Dims:
    return replace(standard_dims(config), n_kv_heads=1 if config.multi_query else config.n_head)


def bigcode_variant(config: Any) -> dict[str, Any]:
    layout = "contiguous" if config.multi_query else "per-head"
    return {"heads": fused_heads("c_attn", "c_proj", layout)}


def bigcode_settings(config: Any, dims: Dims, index: int, attention: Any) -> AttentionSettings:
    return AttentionSettings(scale=float(attention.scaling))


GPT_BIGCODE = Family(
    name="gpt_bigcode",
    model_types=("gpt_bigcode",),
    features=("multi-query", "fused QKV", "learned positions"),
    auto_class="causal-lm",
    handles=frozenset(
        {
            "attention_softmax_in_fp32",
            "multi_query",
            "scale_attention_softmax_in_fp32",
            "scale_attn_weights",
        }
    ),
    options={"add_cross_attention": falsy},
    mlp_view=dense_mlp("c_fc", "c_proj"),
    base=("transformer",),
    embed="wte",
    pos_embed="wpe",
    layers="h",
    final_norm="ln_f",
    attention="attn",
    sites=("c_attn", "c_proj"),
    norm_attn="ln_1",
    norm_mlp="ln_2",
    norm_kind="layernorm",
    position="learned",
    dims=bigcode_dims,
    settings=bigcode_settings,
    variant=bigcode_variant,
)
