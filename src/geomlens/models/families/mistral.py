"""Mistral family: Llama blocks with one sliding window shared by every layer.

``config.sliding_window`` (Mistral 7B v0.1: 4096; later versions: none) masks, in all
layers alike, keys ``window`` or more positions behind the query; ``layer_types`` is not
read by Hugging Face's Mistral, so neither is it here.
"""

from __future__ import annotations

from typing import Any

from geomlens.models.families.base import AttentionSettings, Dims, Family, default_rope, one_of
from geomlens.models.families.common import gated_mlp, separate_heads


def config_window(config: Any, dims: Dims, index: int, attention: Any) -> AttentionSettings:
    """The config's one sliding window, in every layer (Mistral, Mixtral, Phi-3)."""
    return AttentionSettings(window=getattr(config, "sliding_window", None))


MISTRAL = Family(
    name="mistral",
    model_types=("mistral",),
    features=("GQA", "sliding window"),
    auto_class="causal-lm",
    options={
        "rope_parameters": default_rope,
        "rope_scaling": default_rope,
        "attention_dropout": one_of(0.0, 0),
    },
    heads=separate_heads(),
    mlp_view=gated_mlp(),
    settings=config_window,
)
