"""Gemma family (Gemma 1): Llama-like pre-norm blocks with Gemma's conventions.

RMSNorm gains are stored as ``w`` and applied as ``1 + w`` (``norm_offset=1``); the
embedding is multiplied by sqrt(d) cast to the weights' dtype (``gemma_finish``); the LM
head is tied; Gemma 2B has one K/V head (multi-query).
"""

from __future__ import annotations

from geomlens.models.families.base import ROTARY_OPTIONS, Family, falsy
from geomlens.models.families.common import gated_mlp, separate_heads
from geomlens.models.families.gemma3 import gemma_finish

GEMMA = Family(
    name="gemma",
    model_types=("gemma",),
    features=("GQA/multi-query", "embedding scale"),
    auto_class="causal-lm",
    handles=frozenset({"attention_bias"}),
    options={
        **ROTARY_OPTIONS,
        "use_bidirectional_attention": falsy,
    },
    heads=separate_heads(),
    mlp_view=gated_mlp(),
    norm_offset=1.0,
    finish=gemma_finish,
)
