"""Mixtral family: Mistral blocks whose MLP is a sparse mixture of gated experts.

The block's ``mlp`` holds ``experts.gate_up_proj`` [E, 2*ff, d] (gate rows first, then
up rows) and ``experts.down_proj`` [E, d, ff]; its router ``gate`` takes a softmax over
the E logits, keeps the top ``num_experts_per_tok`` and renormalises them to sum to 1.
The view's MLP has one dense gated ``MlpView`` per expert, that router (zero weight for
experts not chosen) and the experts' output rows stacked as ``W_out`` (``moe.mixture``).
"""

from __future__ import annotations

from geomlens.models.families.base import ROTARY_OPTIONS, Family
from geomlens.models.families.common import config_window, separate_heads
from geomlens.models.families.moe import mixture

MIXTRAL = Family(
    name="mixtral",
    model_types=("mixtral",),
    features=("GQA", "sliding window", "MoE (router + experts)"),
    auto_class="causal-lm",
    handles=frozenset({"num_experts_per_tok", "num_local_experts", "sliding_window"}),
    options={
        **ROTARY_OPTIONS,
    },
    heads=separate_heads(),
    mlp_view=mixture(),
    settings=config_window,
)
