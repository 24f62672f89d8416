"""SmolLM3 family: Llama blocks where some layers use no positions at all (NoPE).

The config's ``no_rope_layers[i]`` is 1 where layer i rotates queries and keys, 0 where it
does not (SmolLM3-3B: every fourth layer); sliding-window layers, when enabled, keep their
module's window.
"""

from __future__ import annotations

from typing import Any

from geomlens.models.families.base import ROTARY_OPTIONS, AttentionSettings, Dims, Family
from geomlens.models.families.common import gated_mlp, separate_heads
from geomlens.models.families.gemma3 import known_layer_types


def smollm3_settings(config: Any, dims: Dims, index: int, attention: Any) -> AttentionSettings:
    return AttentionSettings(window=attention.sliding_window, rope=bool(attention.use_rope))


SMOLLM3 = Family(
    name="smollm3",
    model_types=("smollm3",),
    features=("GQA", "NoPE layers", "sliding layers"),
    auto_class="causal-lm",
    handles=frozenset(
        {
            "attention_bias",
            "max_window_layers",
            "no_rope_layer_interval",
            "no_rope_layers",
            "sliding_window",
            "use_sliding_window",
        }
    ),
    options={**ROTARY_OPTIONS, "layer_types": known_layer_types},
    heads=separate_heads(),
    mlp_view=gated_mlp(),
    settings=smollm3_settings,
)
