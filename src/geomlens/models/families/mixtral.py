"""Mixtral family: Mistral blocks whose MLP is a sparse mixture of gated experts.

The block's ``mlp`` holds ``experts.gate_up_proj`` [E, 2*ff, d] (gate rows first, then
up rows) and ``experts.down_proj`` [E, d, ff]; its router ``gate`` takes a softmax over
the E logits, keeps the top ``num_experts_per_tok`` and renormalises them to sum to 1.
The view's MLP has one dense gated ``MlpView`` per expert, that router (zero weight for
experts not chosen) and the experts' output rows stacked as ``W_out``.
"""

from __future__ import annotations

from typing import Any

import torch

from geomlens.models.families.base import ROTARY_OPTIONS, Family
from geomlens.models.families.common import activation_of, config_window, separate_heads
from geomlens.models.view import MlpView


def topk_router(weight: torch.Tensor, k: int) -> Any:
    """x [..., d] -> [..., E]: softmax over the logits, top k renormalised, zeros elsewhere."""

    def route(x: torch.Tensor) -> torch.Tensor:
        probs = (x.to(weight.dtype) @ weight.T).float().softmax(-1)
        top, index = probs.topk(k, dim=-1)
        return torch.zeros_like(probs).scatter(-1, index, top / top.sum(-1, keepdim=True))

    return route


def mixtral_moe(moe: Any, config: Any, layer: Any = None) -> MlpView:
    gate_up = moe.experts.gate_up_proj.detach()  # [E, 2 * ff, d]
    down = moe.experts.down_proj.detach()  # [E, d, ff]
    ff, act = down.shape[-1], activation_of(config)
    experts = tuple(
        MlpView(
            W_in=gate_up[e, ff:].T,
            W_gate=gate_up[e, :ff].T,
            W_out=down[e].T,
            b_in=None,
            b_out=None,
            activation=act,
            module=moe.experts,
        )
        for e in range(gate_up.shape[0])
    )
    return MlpView(
        W_in=None,
        W_gate=None,
        W_out=torch.cat([e.W_out for e in experts]),
        b_in=None,
        b_out=None,
        activation=act,
        module=moe,
        experts=experts,
        router=topk_router(moe.gate.weight.detach(), moe.gate.top_k),
    )


MIXTRAL = Family(
    name="mixtral",
    model_types=("mixtral",),
    features=("GQA", "sliding window", "MoE (router + experts)"),
    auto_class="causal-lm",
    options={
        **ROTARY_OPTIONS,
    },
    heads=separate_heads(),
    mlp_view=mixtral_moe,
    settings=config_window,
)
