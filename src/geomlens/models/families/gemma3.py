"""Gemma 3 family (text): sandwich RMSNorms with gain ``1 + w``, local/global rotary, GQA.

Each block normalises the input of attention and MLP (``norm_attn``, ``norm_mlp``) and
also each sub-block's output before it joins the residual (``extra_norms["post_attn"]``,
``extra_norms["post_mlp"]``); queries and keys are RMS-normalised per head
(``extra_norms["q_norm"]``, ``["k_norm"]``) before the rotation. Sliding-window layers
rotate with the local theta (``local_rope_theta``), full-attention layers with the global
one recorded in the view's ``PositionScheme``.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any

from geomlens.models.families.base import Family, falsy
from geomlens.models.families.llama import attention_heads, gated_mlp
from geomlens.models.view import BlockView, ModelView, NormView, PositionScheme, norm_view

LAYER_TYPES = ("full_attention", "sliding_attention")


def _rope_type(params: Any) -> str:
    params = params or {}
    return str(params.get("rope_type", params.get("type", "default")))


def default_rope_per_layer_type(value: Any) -> str | None:
    """Accept rotary parameters without scaling, per layer type or flat (older configs)."""
    value = value or {}
    if "rope_type" in value or "type" in value:
        scaled = [] if _rope_type(value) == "default" else ["full_attention"]
    else:
        scaled = [kind for kind, params in value.items() if _rope_type(params) != "default"]
    if not scaled:
        return None
    return "handled: rope_type 'default' (no rope scaling); scaled: " + ", ".join(scaled)


def known_layer_types(value: Any) -> str | None:
    """Accept only full and sliding-window attention layers."""
    unknown = sorted({t for t in value or () if t not in LAYER_TYPES})
    return None if not unknown else "handled: " + ", ".join(repr(t) for t in LAYER_TYPES)


def rope_thetas(config: Any) -> tuple[float, float]:
    """(global, local) rotary bases, from ``rope_parameters`` (transformers 5) or older fields."""
    params = getattr(config, "rope_parameters", None) or {}
    full = params.get("full_attention") or {}
    sliding = params.get("sliding_attention") or {}
    global_theta = full.get("rope_theta", getattr(config, "rope_theta", 1_000_000.0))
    local_theta = sliding.get("rope_theta", getattr(config, "rope_local_base_freq", 10_000.0))
    return float(global_theta), float(local_theta)


def local_rope_theta(config: Any) -> float:
    """The rotary base of the sliding-window (local) layers."""
    return rope_thetas(config)[1]


def _rms(module: Any) -> NormView:
    return norm_view(module, "rmsnorm", "eps", offset=1.0)


def build_gemma3(model: Any, tokenizer: Any, name: str, source: str) -> ModelView:
    """The view of a ``Gemma3ForCausalLM`` (or a bare ``Gemma3TextModel``)."""
    config = model.config
    base = getattr(model, "model", model)
    n_heads, n_kv = config.num_attention_heads, config.num_key_value_heads
    d_head = config.head_dim
    blocks = []
    for i, layer in enumerate(base.layers):
        attn = layer.self_attn
        blocks.append(
            BlockView(
                index=i,
                module=layer,
                attention=attn,
                norm_attn=_rms(layer.input_layernorm),
                norm_mlp=_rms(layer.pre_feedforward_layernorm),
                placement="pre",
                heads_fn=partial(attention_heads, attn, n_heads, n_kv),
                mlp_fn=partial(gated_mlp, layer.mlp, config.hidden_activation),
                extra_norms={
                    "post_attn": _rms(layer.post_attention_layernorm),
                    "post_mlp": _rms(layer.post_feedforward_layernorm),
                    "q_norm": _rms(attn.q_norm),
                    "k_norm": _rms(attn.k_norm),
                },
            )
        )
    W_E = base.embed_tokens.weight.detach()
    lm_head = getattr(model, "lm_head", None)
    W_U = W_E.T if lm_head is None else lm_head.weight.detach().T
    embed_scale = getattr(base.embed_tokens, "embed_scale", None)
    # HF multiplies by the scale cast to the weights' dtype (sqrt(640) becomes 25.25 in bf16).
    scale = (
        float(config.hidden_size**0.5) if embed_scale is None else float(embed_scale.to(W_E.dtype))
    )
    return ModelView(
        name=name,
        family="gemma3",
        model=model,
        tokenizer=tokenizer,
        base=base,
        config=config,
        n_layers=config.num_hidden_layers,
        d_model=config.hidden_size,
        n_heads=n_heads,
        n_kv_heads=n_kv,
        d_head=d_head,
        n_ctx=config.max_position_embeddings,
        W_E=W_E,
        W_pos=None,
        W_U=W_U,
        final_norm=_rms(base.norm),
        blocks=tuple(blocks),
        position=PositionScheme(
            kind="rotary", rope_theta=rope_thetas(config)[0], rotary_dim=d_head
        ),
        is_encoder=False,
        source=source,
        embedding_scale=scale,
    )


@dataclass(frozen=True)
class Gemma3Family(Family):
    """The Gemma 3 mapping, which also checks options that depend on each other."""

    def unhandled(self, config: Any) -> list[str]:
        """Every unhandled option, including a query scale other than 1/sqrt(head_dim)."""
        problems = super().unhandled(config)
        scalar = getattr(config, "query_pre_attn_scalar", None)
        head_dim = getattr(config, "head_dim", None)
        if scalar is not None and head_dim is not None and scalar != head_dim:
            problems.append(
                f"query_pre_attn_scalar={scalar!r} (handled: equal to head_dim={head_dim!r}, "
                "i.e. scores scaled by 1/sqrt(head_dim))"
            )
        return problems


GEMMA3 = Gemma3Family(
    name="gemma3",
    model_types=("gemma3_text",),
    options={
        "rope_parameters": default_rope_per_layer_type,
        "rope_scaling": default_rope_per_layer_type,
        "attn_logit_softcapping": falsy,
        "final_logit_softcapping": falsy,
        "use_bidirectional_attention": falsy,
        "layer_types": known_layer_types,
    },
    auto_class="causal-lm",
    build=build_gemma3,
)
