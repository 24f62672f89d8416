"""Mistral family: Llama blocks with one sliding window shared by every layer.

The config's ``sliding_window`` (Mistral 7B v0.1: 4096; later versions: none) masks, in all
layers alike, keys ``window`` or more positions behind the query; ``layer_types`` is not
read by Hugging Face's Mistral, so neither is it here.
"""

from __future__ import annotations

from geomlens.models.families.base import (
    ROTARY_OPTIONS,
    Family,
)
from geomlens.models.families.common import config_window, gated_mlp, separate_heads

MISTRAL = Family(
    name="mistral",
    model_types=("mistral",),
    features=("GQA", "sliding window"),
    auto_class="causal-lm",
    handles=frozenset({"sliding_window"}),
    options={
        **ROTARY_OPTIONS,
    },
    heads=separate_heads(),
    mlp_view=gated_mlp(),
    settings=config_window,
)
