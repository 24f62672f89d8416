"""Sparse mixtures of experts as one ``MlpView``: every expert's coefficients weighted by
the router (zero for experts it does not choose), the experts' output rows stacked.

Experts are stored as 3D tensors (transformers 5): ``gate_up_proj`` [E, 2 * ff, d] (gate
rows first, then up rows) and ``down_proj`` [E, d, ff]. The router takes a softmax over
the E logits and keeps the top k, renormalised to sum to 1 where the model does so
(Mixtral, GraniteMoE: always; Qwen MoE, OLMoE: with ``norm_topk_prob``). Qwen 2 MoE adds a
shared expert every token uses, weighted by ``sigmoid(x W_shared_gate)``: it is one more
expert here, with that weight.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from geomlens.models.families.common import activation_of, gated_mlp
from geomlens.models.view import MlpView, get_path, linear_in_out


def topk_router(
    weight: torch.Tensor, k: int, renormalise: bool = True, bias: torch.Tensor | None = None
) -> Any:
    """x [..., d] -> [..., E]: softmax over the logits ``x W^T + bias``, top k
    (renormalised: the softmax over the top k logits, as GPT-OSS takes it), zeros elsewhere."""

    def route(x: torch.Tensor) -> torch.Tensor:
        logits = x.to(weight.dtype) @ weight.T
        if bias is not None:
            logits = logits + bias
        probs = logits.float().softmax(-1)
        top, index = probs.topk(k, dim=-1)
        if renormalise:
            top = top / top.sum(-1, keepdim=True)
        return torch.zeros_like(probs).scatter(-1, index, top)

    return route


def expert_views(experts: Any, activation: str, layout: str = "rows") -> tuple[MlpView, ...]:
    """One dense gated ``MlpView`` per expert of a 3D-stored expert module.

    Layouts: "rows" (``gate_up_proj`` [E, 2 * ff, d], gate rows first; ``down_proj``
    [E, d, ff]: Mixtral, Qwen MoE), "columns" ([E, d, 2 * ff], gate columns first;
    ``down_proj`` [E, ff, d]: Llama 4), "interleaved" ([E, d, 2 * ff], gate and up columns
    alternating; ``down_proj`` [E, ff, d]: GPT-OSS). Biases ``gate_up_proj_bias`` [E, 2 * ff]
    and ``down_proj_bias`` [E, d] are read where the module has them.
    """
    gate_up = experts.gate_up_proj.detach()
    down = experts.down_proj.detach()
    if layout == "rows":
        gate_up, down = gate_up.transpose(1, 2), down.transpose(1, 2)  # [E, d, 2ff], [E, ff, d]
    ff = down.shape[1]
    if layout == "interleaved":
        gate, up = slice(0, 2 * ff, 2), slice(1, 2 * ff, 2)
    elif layout in ("rows", "columns"):
        gate, up = slice(0, ff), slice(ff, 2 * ff)
    else:
        raise ValueError(f"unknown expert layout {layout!r}")
    b_gate_up = getattr(experts, "gate_up_proj_bias", None)
    b_down = getattr(experts, "down_proj_bias", None)
    return tuple(
        MlpView(
            W_in=gate_up[e][:, up],
            W_gate=gate_up[e][:, gate],
            W_out=down[e],
            b_in=None if b_gate_up is None else b_gate_up[e, up].detach(),
            b_out=None if b_down is None else b_down[e].detach(),
            activation=activation,
            module=experts,
            b_gate=None if b_gate_up is None else b_gate_up[e, gate].detach(),
        )
        for e in range(gate_up.shape[0])
    )


def experts_view(
    moe: Any,
    views: tuple[MlpView, ...],
    router: Callable[[torch.Tensor], torch.Tensor],
    activation: str,
    scale_inputs: bool = False,
) -> MlpView:
    """One MlpView of a mixture: the experts' views (a shared expert last, at the weight the
    router gives it), their output rows stacked, and the router ``x -> [..., E]``."""
    return MlpView(
        W_in=None,
        W_gate=None,
        W_out=torch.cat([e.W_out for e in views]),
        b_in=None,
        b_out=None,
        activation=activation,
        module=moe,
        experts=views,
        router=router,
        scale_inputs=scale_inputs,
    )


def mixture(
    router: str = "gate",
    experts: str = "experts",
    renormalise: Callable[[Any, Any], bool] = lambda config, router: True,
    shared: tuple[str, str] | None = None,
    dense: Callable[..., MlpView] | None = None,
) -> Callable[..., MlpView]:
    """The ``mlp_view`` of a mixture-of-experts block.

    Args:
        router, experts: paths of the router (its ``weight`` [E, d], ``top_k``) and the
            experts under the block's MLP module.
        renormalise: (config, router module) -> whether the top-k weights are renormalised.
        shared: paths of a shared expert (a gated MLP) and its sigmoid gate, if any.
        dense: the view of layers whose MLP is dense (Qwen 2 MoE's ``mlp_only_layers``).
    """

    def mlp_view(moe: Any, config: Any, layer: Any = None) -> MlpView:
        if dense is not None and not hasattr(moe, experts):
            return dense(moe, config, layer)
        act = activation_of(config)
        gate = get_path(moe, router)
        views = expert_views(get_path(moe, experts), act)
        route = topk_router(gate.weight.detach(), gate.top_k, renormalise(config, gate))
        if shared is not None:
            expert = gated_mlp()(get_path(moe, shared[0]), config)
            views += (expert,)
            w = linear_in_out(get_path(moe, shared[1]))  # [d, 1]
            routed = route

            def route(x: torch.Tensor) -> torch.Tensor:
                share = torch.sigmoid(x.to(w.dtype) @ w).float()
                return torch.cat([routed(x), share], dim=-1)

        return experts_view(moe, views, route, act)

    return mlp_view
