"""Qwen 2 family: Llama blocks with biases on Q, K and V (none on O).

Layers listed as ``sliding_attention`` in ``layer_types`` (with ``use_sliding_window``,
those from ``max_window_layers`` on) mask keys ``sliding_window`` or more positions back;
each attention module carries its own window (None on full-attention layers).
"""

from __future__ import annotations

from geomlens.models.families.base import (
    ROTARY_OPTIONS,
    Family,
)
from geomlens.models.families.common import gated_mlp, module_window, separate_heads
from geomlens.models.families.gemma3 import known_layer_types

QWEN2 = Family(
    name="qwen2",
    model_types=("qwen2",),
    features=("GQA", "QKV biases", "sliding layers"),
    auto_class="causal-lm",
    handles=frozenset({"max_window_layers", "sliding_window", "use_sliding_window"}),
    options={
        **ROTARY_OPTIONS,
        "layer_types": known_layer_types,
    },
    heads=separate_heads(),
    mlp_view=gated_mlp(),
    settings=module_window,
)
