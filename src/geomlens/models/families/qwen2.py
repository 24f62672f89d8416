"""Qwen 2 family: Llama blocks with biases on Q, K and V (none on O).

Layers listed as ``sliding_attention`` in ``layer_types`` (with ``use_sliding_window``,
those from ``max_window_layers`` on) mask keys ``sliding_window`` or more positions back;
each attention module carries its own window (None on full-attention layers).
"""

from __future__ import annotations

from typing import Any

from geomlens.models.families.base import AttentionSettings, Dims, Family, default_rope, one_of
from geomlens.models.families.common import gated_mlp, separate_heads
from geomlens.models.families.gemma3 import known_layer_types


def module_window(config: Any, dims: Dims, index: int, attention: Any) -> AttentionSettings:
    """The attention module's own sliding window (None on full-attention layers)."""
    return AttentionSettings(window=attention.sliding_window)


QWEN2 = Family(
    name="qwen2",
    model_types=("qwen2",),
    features=("GQA", "QKV biases", "sliding layers"),
    auto_class="causal-lm",
    options={
        "rope_parameters": default_rope,
        "rope_scaling": default_rope,
        "attention_dropout": one_of(0.0, 0),
        "layer_types": known_layer_types,
    },
    heads=separate_heads(),
    mlp_view=gated_mlp(),
    settings=module_window,
)
