"""Helium family (Kyutai's Helium): Llama blocks with interleaved rotary pairs (2m, 2m+1)."""

from __future__ import annotations

from geomlens.models.families.base import ROTARY_OPTIONS, Family, falsy
from geomlens.models.families.common import gated_mlp, separate_heads

HELIUM = Family(
    name="helium",
    model_types=("helium",),
    features=("GQA", "interleaved rotary"),
    auto_class="causal-lm",
    handles=frozenset({"attention_bias"}),
    options={**ROTARY_OPTIONS, "mlp_bias": falsy},
    heads=separate_heads(),
    mlp_view=gated_mlp(),
    rotary_interleaved=True,
)
