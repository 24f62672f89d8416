"""StableLM family (StableLM 2, StableLM-3B-4E1T): Llama blocks with LayerNorms and
partial rotary.

Rotary covers ``partial_rotary_factor`` of each head; Q, K, V carry biases with
``use_qkv_bias``. With ``qk_layernorm`` every query and key head has its own LayerNorm
(``q_layernorm.norms[h]``), applied before the rotation. With ``use_parallel_residual``
(StableLM 2 12B) attention and MLP both read ``input_layernorm(h)``.
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


def stablelm_settings(config: Any, dims: Dims, index: int, attention: Any) -> AttentionSettings:
    if not config.qk_layernorm:
        return AttentionSettings()
    qn, kn, H, kv = attention.q_layernorm, attention.k_layernorm, dims.n_heads, dims.n_kv_heads
    return AttentionSettings(
        qk_norm=lambda q, k: (across_heads(qn, q, H), across_heads(kn, k, kv)),
    )


def stablelm_variant(config: Any) -> dict[str, Any]:
    """Parallel blocks share ``input_layernorm``; sequential ones are pre-norm."""
    if config.use_parallel_residual:
        return {"layout": "parallel", "norm_mlp": None}
    return {}


STABLELM = Family(
    name="stablelm",
    model_types=("stablelm",),
    features=("partial rotary", "QKV biases", "per-head q/k LayerNorms", "parallel option"),
    auto_class="causal-lm",
    handles=frozenset(
        {"partial_rotary_factor", "qk_layernorm", "use_parallel_residual", "use_qkv_bias"}
    ),
    options={**ROTARY_OPTIONS},
    heads=separate_heads(),
    mlp_view=gated_mlp(),
    norm_kind="layernorm",
    settings=stablelm_settings,
    variant=stablelm_variant,
)
