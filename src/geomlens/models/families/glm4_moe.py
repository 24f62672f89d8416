"""GLM-4.5 family (``glm4_moe``): pre-norm Llama blocks with partial rotary, optional per-head
q/k RMSNorms and, after ``first_k_dense_replace`` dense layers, a mixture of experts routed
as DeepSeek-V3 routes.

The router scores each expert with ``sigmoid(x W_router)``; the choice adds a learned
correction bias to those scores, keeps the ``topk_group`` best of ``n_group`` expert groups
(a group's score: the sum of its two best corrected scores) and then the ``top_k`` best
experts within them. The chosen experts are weighted by their uncorrected scores, divided
by their sum (``norm_topk_prob``) and multiplied by ``routed_scaling_factor``. The shared
experts (one gated MLP of width ``n_shared_experts * moe_intermediate_size``) are one more
expert of weight 1. Rotary pairs dimensions (m, m + dim/2) over ``partial_rotary_factor``
of each head (GLM-4's own dense model rotates interleaved pairs; this one does not).
"""

from __future__ import annotations

from typing import Any

import torch

from geomlens.models.families.base import (
    ROTARY_OPTIONS,
    AttentionSettings,
    Dims,
    Family,
)
from geomlens.models.families.common import activation_of, gated_mlp, separate_heads
from geomlens.models.families.moe import expert_views, experts_view
from geomlens.models.view import MlpView


def group_topk_router(gate: Any) -> Any:
    """x [..., d] -> [..., E]: the weights ``Glm4MoeTopkRouter`` gives the chosen experts
    (sigmoid scores, group-limited top k on the corrected scores), zeros elsewhere."""
    weight = gate.weight.detach().float()  # [E, d]; the model routes in float32
    correction = gate.e_score_correction_bias.detach().float()  # [E]
    groups, keep, k = int(gate.num_group), int(gate.topk_group), int(gate.top_k)
    renormalise, scale = bool(gate.norm_topk_prob), float(gate.routed_scaling_factor)

    def route(x: torch.Tensor) -> torch.Tensor:
        scores = (x.float() @ weight.T).sigmoid()  # [..., E]
        choice = scores + correction
        by_group = choice.unflatten(-1, (groups, -1))  # [..., G, E / G]
        group_scores = by_group.topk(2, dim=-1)[0].sum(-1)  # [..., G]
        chosen = torch.zeros_like(group_scores).scatter(-1, group_scores.topk(keep, dim=-1)[1], 1.0)
        allowed = chosen.unsqueeze(-1).expand_as(by_group).flatten(-2).bool()
        index = choice.masked_fill(~allowed, float("-inf")).topk(k, dim=-1)[1]
        top = scores.gather(-1, index)
        if renormalise:
            top = top / (top.sum(-1, keepdim=True) + 1e-20)
        return torch.zeros_like(scores).scatter(-1, index, top * scale)

    return route


def glm4_moe_mlp(moe: Any, config: Any, layer: Any = None) -> MlpView:
    """A dense gated MLP (the first ``first_k_dense_replace`` layers), or the routed experts
    plus the shared experts as one more expert of weight 1."""
    if not hasattr(moe, "experts"):
        return gated_mlp()(moe, config, layer)
    act = activation_of(config)
    views = expert_views(moe.experts, act) + (gated_mlp()(moe.shared_experts, config),)
    routed = group_topk_router(moe.gate)

    def route(x: torch.Tensor) -> torch.Tensor:
        weights = routed(x)
        return torch.cat([weights, torch.ones_like(weights[..., :1])], dim=-1)

    return experts_view(moe, views, route, act)


def glm4_moe_settings(config: Any, dims: Dims, index: int, attention: Any) -> AttentionSettings:
    """The per-head q/k RMSNorms (over d_head, before the rotation) where ``use_qk_norm``."""
    if not getattr(attention, "use_qk_norm", False):
        return AttentionSettings()
    q_norm, k_norm = attention.q_norm, attention.k_norm
    return AttentionSettings(qk_norm=lambda q, k: (q_norm(q), k_norm(k)))


GLM4_MOE = Family(
    name="glm4_moe",
    model_types=("glm4_moe",),
    features=(
        "GQA",
        "partial rotary",
        "q/k norms option",
        "MoE (sigmoid group router + shared experts)",
        "dense first layers",
    ),
    auto_class="causal-lm",
    handles=frozenset(
        {
            "attention_bias",
            "first_k_dense_replace",
            "moe_intermediate_size",
            "n_group",
            "n_routed_experts",
            "n_shared_experts",
            "norm_topk_prob",
            "num_experts_per_tok",
            "num_local_experts",
            "partial_rotary_factor",
            "routed_scaling_factor",
            "topk_group",
            "use_qk_norm",
            # the multi-token-prediction layers are not modules of the model: Hugging Face
            # drops their weights on load and runs the main stack only
            "num_mtp_layers",
            "num_nextn_predict_layers",
        }
    ),
    options={**ROTARY_OPTIONS},
    heads=separate_heads(),
    mlp_view=glm4_moe_mlp,
    settings=glm4_moe_settings,
)
