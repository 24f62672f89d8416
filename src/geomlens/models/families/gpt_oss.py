"""GPT-OSS family (gpt-oss-20b, gpt-oss-120b): Llama-like blocks with attention sinks,
alternating sliding-window and full layers, YaRN rotary and a mixture of experts whose
gated unit is a clamped SwiGLU.

- Attention: Q/K/V/O with biases; each head has a learned sink logit, one more softmax
  column that takes probability mass but adds no value (``AttentionView.sinks``), so a
  head's probabilities over the real keys sum to less than 1. ``layer_types`` alternates
  ``sliding_attention`` (the module's window) and ``full_attention``.
- Rotary: YaRN (``rope_type`` "yarn", read from the model's rotary module with its
  attention scaling), halves paired as in Llama.
- Mixture of experts: the router's logits ``x W^T + b``, the top k kept and a softmax over
  them; each expert's ``gate_up_proj`` [d, 2 * ff] alternates gate and up columns (with
  biases), and its unit is ``(clamp(up, -l, l) + 1) * g * sigmoid(alpha * g)`` with
  ``g = min(gate, l)`` (``swiglu_limit`` l, ``swiglu_alpha``), then ``down_proj`` plus its
  bias (one more row of ``W_out``, weighted by the router).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import torch

from geomlens.models.families.base import ROTARY_OPTIONS, AttentionSettings, Dims, Family
from geomlens.models.families.common import activation_of, separate_heads
from geomlens.models.families.gemma3 import known_layer_types
from geomlens.models.families.moe import expert_views, topk_router
from geomlens.models.view import MlpView


def clamped_swiglu(limit: float, alpha: float) -> Any:
    """(gate, up) [..., ff] -> GPT-OSS's expert coefficients, as its experts compute them."""

    def glu(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
        gate = gate.clamp(min=None, max=limit)
        up = up.clamp(min=-limit, max=limit)
        return (up + 1) * (gate * torch.sigmoid(gate * alpha))

    return glu


def gpt_oss_mlp(moe: Any, config: Any, layer: Any = None) -> MlpView:
    """The routed experts (top-k softmax of the biased router logits) as one ``MlpView``."""
    experts = moe.experts
    glu = clamped_swiglu(float(experts.limit), float(experts.alpha))
    act = activation_of(config)
    views = tuple(replace(e, glu=glu) for e in expert_views(experts, act, layout="interleaved"))
    router = moe.router
    route = topk_router(router.weight.detach(), router.top_k, bias=router.bias.detach())
    rows = [r for e in views for r in (e.W_out, *([] if e.b_out is None else [e.b_out[None]]))]
    return MlpView(
        W_in=None,
        W_gate=None,
        W_out=torch.cat(rows),
        b_in=None,
        b_out=None,
        activation=act,
        module=moe,
        experts=views,
        router=route,
    )


def gpt_oss_settings(config: Any, dims: Dims, index: int, attention: Any) -> AttentionSettings:
    """The module's window (sliding layers) and its per-head sink logits."""
    return AttentionSettings(
        scale=float(attention.scaling),
        window=attention.sliding_window,
        sinks=attention.sinks.detach(),
    )


GPT_OSS = Family(
    name="gpt_oss",
    model_types=("gpt_oss",),
    features=(
        "GQA",
        "attention sinks",
        "sliding layers",
        "QKV/O biases",
        "MoE (biased router + clamped SwiGLU experts)",
    ),
    auto_class="causal-lm",
    handles=frozenset(
        {
            "attention_bias",
            "num_experts_per_tok",
            "num_local_experts",
            "sliding_window",
            "swiglu_alpha",
            "swiglu_limit",
        }
    ),
    options={**ROTARY_OPTIONS, "layer_types": known_layer_types},
    heads=separate_heads(),
    mlp_view=gpt_oss_mlp,
    settings=gpt_oss_settings,
)
