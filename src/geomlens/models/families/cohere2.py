"""Cohere 2 family (Command R7B, Command A): Cohere's parallel blocks with sliding-window
layers that rotate and full-attention layers without positions (NoPE).

As in Cohere, attention and MLP both read ``input_layernorm(h)`` (a LayerNorm without
bias), rotary pairs dimensions (2m, 2m+1) and the logits are multiplied by
``logit_scale``. Layers listed as ``sliding_attention`` (``layer_types``; older configs'
``sliding_window_pattern``: every fourth layer full) mask keys ``sliding_window`` or more
positions back and rotate queries and keys; the full-attention layers do not rotate.
"""

from __future__ import annotations

from typing import Any

from geomlens.models.families.base import ROTARY_OPTIONS, AttentionSettings, Dims, with_options
from geomlens.models.families.cohere import COHERE
from geomlens.models.families.gemma3 import known_layer_types


def cohere2_settings(config: Any, dims: Dims, index: int, attention: Any) -> AttentionSettings:
    """Sliding layers: their window and the rotation; full layers: neither (Hugging Face
    rotates exactly where the module has a window)."""
    window = attention.sliding_window
    return AttentionSettings(window=window, rope=window is not None)


COHERE2 = with_options(
    COHERE,
    name="cohere2",
    model_types=("cohere2",),
    features=(
        "parallel blocks",
        "interleaved rotary",
        "NoPE layers",
        "sliding layers",
        "logit scale",
    ),
    handles=frozenset(
        {"attention_bias", "logit_scale", "sliding_window", "sliding_window_pattern"}
    ),
    options={**ROTARY_OPTIONS, "layer_types": known_layer_types},
    settings=cohere2_settings,
)
