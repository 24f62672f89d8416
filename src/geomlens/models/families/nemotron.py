"""Nemotron family (Nemotron-4, Minitron): LayerNorms with gain ``1 + w``, a squared-ReLU
MLP without a gate, partial rotary.

``input_layernorm`` and ``post_attention_layernorm`` are LayerNorm1P (gamma stored as
``w``, applied as ``1 + w``); the MLP is ``down_proj(relu(up_proj x)^2)``; rotary covers
``partial_rotary_factor`` of each head.
"""

from __future__ import annotations

from geomlens.models.families.base import ROTARY_OPTIONS, Family
from geomlens.models.families.common import dense_mlp, separate_heads

NEMOTRON = Family(
    name="nemotron",
    model_types=("nemotron",),
    features=("GQA", "LayerNorm 1 + w", "squared-ReLU MLP", "partial rotary"),
    auto_class="causal-lm",
    handles=frozenset({"attention_bias", "mlp_bias", "partial_rotary_factor"}),
    options={**ROTARY_OPTIONS},
    heads=separate_heads(),
    mlp_view=dense_mlp("up_proj", "down_proj"),
    norm_kind="layernorm",
    norm_offset=1.0,
)
