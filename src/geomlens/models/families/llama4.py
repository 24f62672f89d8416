"""Llama 4 family (the text model of Llama 4 Scout and Maverick, ``llama4_text``).

- Rotary layers (``no_rope_layers[i] == 1``) rotate interleaved pairs (2m, 2m+1), the
  complex form, and attend in chunks of ``attention_chunk_size`` positions where
  ``layer_types`` says ``chunked_attention`` (``AttentionView.chunk``). With
  ``use_qk_norm`` their rotated queries and keys pass a weightless RMSNorm over each head.
- NoPE layers (every fourth in the released checkpoints) do not rotate and attend over
  the whole causal context; with ``attn_temperature_tuning`` query t is multiplied by
  ``1 + attn_scale * log(1 + floor((t + 1) / floor_scale))`` (``AttentionView.query_scale``).
- MoE layers (``moe_layers``, from ``interleave_moe_layer_step``): a router keeps the top k
  logits and passes them through a sigmoid; each chosen expert reads its input multiplied
  by that weight (``MlpView.scale_inputs``), and a shared gated expert reads every token
  (one more expert of weight 1). The other layers have a dense gated MLP
  (``intermediate_size_mlp``).
"""

from __future__ import annotations

from typing import Any

import torch

from geomlens.models.families.base import ROTARY_OPTIONS, AttentionSettings, Dims, Family
from geomlens.models.families.common import activation_of, gated_mlp, separate_heads
from geomlens.models.families.moe import expert_views, experts_view
from geomlens.models.families.rope import rope_type_of
from geomlens.models.view import MlpView

LAYER_TYPES = ("full_attention", "chunked_attention")


def known_layer_types(value: Any) -> str | None:
    """Accept full and chunked attention layers."""
    unknown = sorted({t for t in value or () if t not in LAYER_TYPES})
    return None if not unknown else "handled: " + ", ".join(repr(t) for t in LAYER_TYPES)


def rope_scaling(config: Any) -> float:
    """The factor Hugging Face's rotary multiplies cos and sin by (1 but for YaRN-like
    rope types), from transformers' own rope initialisation."""
    kind = rope_type_of(getattr(config, "rope_parameters", None))
    if kind == "default":
        return 1.0
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    return float(ROPE_INIT_FUNCTIONS[kind](config, None)[1])


def rotated_l2_norm(eps: float, scaling: float) -> Any:
    """The weightless RMSNorm Llama 4 applies after the rotation, as a norm before it: the
    rotation keeps each head's length up to the rope scaling s, so
    ``norm(s R x) = s R (x / sqrt(s^2 mean(x^2) + eps))``: this norm, then the view's
    rotation (which multiplies by s). [B, H, T, dh] each."""

    def norm(x: torch.Tensor) -> torch.Tensor:
        work = x.to(torch.promote_types(x.dtype, torch.float32))
        mean = work.pow(2).mean(-1, keepdim=True)
        return (work * torch.rsqrt(scaling**2 * mean + eps)).to(x.dtype)

    return lambda q, k: (norm(q), norm(k))


def temperature(attn_scale: float, floor_scale: float) -> Any:
    """T -> [T] the query factors of a NoPE layer, as Hugging Face computes them."""

    def scale(length: int) -> torch.Tensor:
        positions = torch.arange(length).float()
        return torch.log1p(torch.floor((positions + 1.0) / floor_scale)) * attn_scale + 1.0

    return scale


def llama4_settings(config: Any, dims: Dims, index: int, attention: Any) -> AttentionSettings:
    """Rotary or NoPE, the chunk, the q/k norm and the NoPE temperature of one block."""
    rope = bool(attention.use_rope)
    chunked = config.layer_types[index] == "chunked_attention"
    qk_norm = None
    if hasattr(attention, "qk_norm"):
        qk_norm = rotated_l2_norm(float(attention.qk_norm.variance_epsilon), rope_scaling(config))
    query_scale = None
    if attention.attn_temperature_tuning and not rope:
        query_scale = temperature(float(attention.attn_scale), float(attention.floor_scale))
    return AttentionSettings(
        scale=float(attention.scaling),
        rope=rope,
        chunk=config.attention_chunk_size if chunked else None,
        qk_norm=qk_norm,
        query_scale=query_scale,
    )


def sigmoid_router(weight: torch.Tensor, k: int) -> Any:
    """x [..., d] -> [..., E + 1]: the sigmoid of the top k logits (zero elsewhere), and 1
    for the shared expert."""

    def route(x: torch.Tensor) -> torch.Tensor:
        logits = x.to(weight.dtype) @ weight.T
        top, index = logits.topk(k, dim=-1)
        kept = torch.full_like(logits, float("-inf")).scatter(-1, index, top)
        scores = torch.sigmoid(kept.float()).to(logits.dtype)
        return torch.cat([scores, torch.ones_like(scores[..., :1])], dim=-1)

    return route


def llama4_mlp(moe: Any, config: Any, layer: Any = None) -> MlpView:
    """A dense gated MLP, or the routed experts (inputs scaled by the router) plus the
    shared expert as one MlpView."""
    if not hasattr(moe, "experts"):
        return gated_mlp()(moe, config, layer)
    act = activation_of(config)
    views = expert_views(moe.experts, act, layout="columns")
    views += (gated_mlp()(moe.shared_expert, config),)
    router = sigmoid_router(moe.router.weight.detach(), moe.router.top_k)
    return experts_view(moe, views, router, act, scale_inputs=True)


LLAMA4 = Family(
    name="llama4",
    model_types=("llama4_text",),
    features=(
        "GQA",
        "interleaved rotary",
        "chunked attention",
        "NoPE layers with query temperature",
        "weightless q/k norms",
        "MoE (sigmoid router scaling inputs + shared expert)",
    ),
    auto_class="causal-lm",
    handles=frozenset(
        {
            "attention_bias",
            "attention_chunk_size",
            "attn_scale",
            "attn_temperature_tuning",
            "floor_scale",
            "interleave_moe_layer_step",
            "intermediate_size_mlp",
            "moe_layers",
            "no_rope_layer_interval",
            "no_rope_layers",
            "num_experts_per_tok",
            "num_local_experts",
            "use_qk_norm",
        }
    ),
    options={**ROTARY_OPTIONS, "layer_types": known_layer_types},
    heads=separate_heads(),
    mlp_view=llama4_mlp,
    mlp="feed_forward",
    rotary_interleaved=True,
    settings=llama4_settings,
)
