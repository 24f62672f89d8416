"""Llama family (SmolLM2): pre-RMSNorm blocks, rotary positions, grouped-query attention."""

from __future__ import annotations

from geomlens.models.families.base import Family, falsy, known_rope, one_of
from geomlens.models.families.common import gated_mlp, separate_heads

LLAMA = Family(
    name="llama",
    model_types=("llama",),
    features=("GQA",),
    auto_class="causal-lm",
    handles=frozenset({"attention_bias"}),
    options={
        "rope_parameters": known_rope,
        "rope_scaling": known_rope,
        "pretraining_tp": one_of(1, None),
        "sliding_window": falsy,
        "mlp_bias": falsy,
    },
    heads=separate_heads(),
    mlp_view=gated_mlp(),
)
