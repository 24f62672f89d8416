"""Cohere family (Command R, Aya): parallel blocks, one bias-free LayerNorm, interleaved
rotary, scaled logits.

Attention and MLP both read ``input_layernorm(h)`` (a LayerNorm without bias) and add to
the same residual; rotary pairs dimensions (2m, 2m+1); the logits are multiplied by
``logit_scale``. With ``use_qk_norm`` queries and keys pass bias-free LayerNorms over each
head (weights per head) before the rotation.
"""

from __future__ import annotations

from typing import Any

from geomlens.models.families.base import (
    ROTARY_OPTIONS,
    AttentionSettings,
    Dims,
    Family,
)
from geomlens.models.families.common import across_heads, gated_mlp, separate_heads


def cohere_settings(config: Any, dims: Dims, index: int, attention: Any) -> AttentionSettings:
    if not config.use_qk_norm:
        return AttentionSettings()
    qn, kn, H, kv = attention.q_norm, attention.k_norm, dims.n_heads, dims.n_kv_heads
    return AttentionSettings(
        qk_norm=lambda q, k: (
            across_heads(qn, q, H, "tokens"),
            across_heads(kn, k, kv, "tokens"),
        ),
    )


def cohere_finish(model: Any, config: Any) -> dict[str, Any]:
    return {"unembedding_scale": float(config.logit_scale)}


COHERE = Family(
    name="cohere",
    model_types=("cohere",),
    features=("parallel blocks", "interleaved rotary", "q/k norms option", "logit scale"),
    auto_class="causal-lm",
    handles=frozenset({"attention_bias", "logit_scale", "use_qk_norm"}),
    options={**ROTARY_OPTIONS},
    heads=separate_heads(),
    mlp_view=gated_mlp(),
    norm_mlp=None,
    layout="parallel",
    norm_kind="layernorm",
    rotary_interleaved=True,
    settings=cohere_settings,
    finish=cohere_finish,
)
