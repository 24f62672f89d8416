"""Qwen 3 family (dense): Llama blocks with per-head RMSNorms on queries and keys.

``q_norm`` and ``k_norm`` normalise each head's projected query and key (over d_head)
before the rotation, so q . k is not linear in the block input. Q/K/V carry biases only
with ``attention_bias``; ``sliding_attention`` layers keep their module's window.
"""

from __future__ import annotations

from typing import Any

from geomlens.models.families.base import (
    ROTARY_OPTIONS,
    AttentionSettings,
    Dims,
    Family,
)
from geomlens.models.families.common import gated_mlp, separate_heads
from geomlens.models.families.gemma3 import known_layer_types


def qwen3_settings(config: Any, dims: Dims, index: int, attention: Any) -> AttentionSettings:
    q_norm, k_norm = attention.q_norm, attention.k_norm
    return AttentionSettings(
        window=attention.sliding_window,
        qk_norm=lambda q, k: (q_norm(q), k_norm(k)),
    )


QWEN3 = Family(
    name="qwen3",
    model_types=("qwen3",),
    features=("GQA", "per-head q/k norms", "sliding layers"),
    auto_class="causal-lm",
    handles=frozenset(
        {"attention_bias", "max_window_layers", "sliding_window", "use_sliding_window"}
    ),
    options={
        **ROTARY_OPTIONS,
        "layer_types": known_layer_types,
    },
    heads=separate_heads(),
    mlp_view=gated_mlp(),
    extra_norms={"q_norm": "self_attn.q_norm", "k_norm": "self_attn.k_norm"},
    settings=qwen3_settings,
)
