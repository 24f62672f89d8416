"""Granite family (IBM Granite 3): Llama blocks with four scalar multipliers.

The embedding is multiplied by ``embedding_multiplier``; scores by
``attention_multiplier`` (instead of 1/sqrt(d_head)); each sub-block's output by
``residual_multiplier`` before it joins the residual; the logits are divided by
``logits_scaling``. GraniteMoE replaces the MLP by a mixture of experts
(``block_sparse_moe``: router, then the chosen experts' softmax-weighted sum).
"""

from __future__ import annotations

from typing import Any

from geomlens.models.families.base import (
    ROTARY_OPTIONS,
    AttentionSettings,
    Dims,
    Family,
    falsy,
    with_options,
)
from geomlens.models.families.common import gated_mlp, separate_heads
from geomlens.models.families.moe import mixture


def granite_settings(config: Any, dims: Dims, index: int, attention: Any) -> AttentionSettings:
    return AttentionSettings(scale=float(attention.scaling))


def granite_finish(model: Any, config: Any) -> dict[str, Any]:
    return {
        "embedding_scale": float(config.embedding_multiplier),
        "unembedding_scale": 1.0 / float(config.logits_scaling),
    }


GRANITE = Family(
    name="granite",
    model_types=("granite",),
    features=("GQA", "embedding/attention/residual multipliers", "logit scaling"),
    auto_class="causal-lm",
    handles=frozenset(
        {
            "attention_bias",
            "attention_multiplier",
            "embedding_multiplier",
            "logits_scaling",
            "residual_multiplier",
        }
    ),
    options={**ROTARY_OPTIONS, "mlp_bias": falsy},
    heads=separate_heads(),
    mlp_view=gated_mlp(),
    settings=granite_settings,
    residual_scale=lambda config: float(config.residual_multiplier),
    finish=granite_finish,
)

GRANITEMOE = with_options(
    GRANITE,
    name="granitemoe",
    model_types=("granitemoe",),
    features=("GQA", "multipliers", "MoE (router + experts)"),
    options={**ROTARY_OPTIONS},
    handles=GRANITE.handles | {"num_local_experts", "num_experts_per_tok"},
    mlp="block_sparse_moe",
    mlp_view=mixture(router="router"),
)
