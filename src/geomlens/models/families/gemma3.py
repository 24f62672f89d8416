"""Gemma 3 family (text): sandwich RMSNorms with gain ``1 + w``, local/global rotary, GQA.

Each block normalises the input of attention and MLP and also each sub-block's output
before it joins the residual (``extra_norms["post_attn"]``, ``["post_mlp"]``); queries and
keys are RMS-normalised per head (``q_norm``, ``k_norm``) before the rotation.
Sliding-window layers rotate with the local rotary set, full-attention layers with the
global one (each of any rope type; Gemma 3 4B and up scale the global one linearly); the
embedding is multiplied by sqrt(d) in the weights' dtype.
"""

from __future__ import annotations

from typing import Any

from geomlens.models.families.base import (
    AttentionSettings,
    Dims,
    Family,
    falsy,
    known_rope,
)
from geomlens.models.families.common import gated_mlp, separate_heads

LAYER_TYPES = ("full_attention", "sliding_attention")


def known_layer_types(value: Any) -> str | None:
    """Accept only full and sliding-window attention layers."""
    unknown = sorted({t for t in value or () if t not in LAYER_TYPES})
    return None if not unknown else "handled: " + ", ".join(repr(t) for t in LAYER_TYPES)


def rope_layer_type(config: Any, index: int, attention: Any) -> str:
    """The rotary set of a block: the local one for sliding-window layers, else global."""
    return "sliding_attention" if attention.sliding_window is not None else "full_attention"


def gemma_settings(config: Any, dims: Dims, index: int, attention: Any) -> AttentionSettings:
    """Per layer: the module's own scale and window; the per-head q/k norms (the rotary
    set follows the layer type, ``rope_layer_type``). Gemma 3's attention does not apply
    ``attn_logit_softcapping`` (Hugging Face reads it but never passes it on), so neither
    does the view."""
    q_norm, k_norm = attention.q_norm, attention.k_norm
    return AttentionSettings(
        scale=float(attention.scaling),
        window=attention.sliding_window,
        qk_norm=lambda q, k: (q_norm(q), k_norm(k)),
    )


def gemma_finish(model: Any, config: Any) -> dict[str, Any]:
    """Embedding scale as Hugging Face applies it (cast to the weights' dtype) and the
    final logit soft-capping."""
    base = getattr(model, "model", model)
    scale = base.embed_tokens.embed_scale.to(base.embed_tokens.weight.dtype)
    return {
        "embedding_scale": float(scale),
        "logit_softcap": getattr(config, "final_logit_softcapping", None),
    }


GEMMA_OPTIONS = frozenset(
    {
        "attention_bias",
        "attn_logit_softcapping",
        "cache_implementation",
        "final_logit_softcapping",
        "query_pre_attn_scalar",
        "sliding_window",
    }
)
"""The config options Gemma 2 and Gemma 3 both handle: soft-capping, the query scale, the
sliding window."""


GEMMA3 = Family(
    name="gemma3",
    model_types=("gemma3_text",),
    features=("GQA", "q/k norms", "sliding window", "local/global rotary", "embedding scale"),
    auto_class="causal-lm",
    handles=GEMMA_OPTIONS | {"rope_local_base_freq", "sliding_window_pattern"},
    options={
        "rope_parameters": known_rope,
        "rope_scaling": known_rope,
        "use_bidirectional_attention": falsy,
        "layer_types": known_layer_types,
    },
    heads=separate_heads(),
    mlp_view=gated_mlp(),
    norm_mlp="pre_feedforward_layernorm",
    extra_norms={
        "post_attn": "post_attention_layernorm",
        "post_mlp": "post_feedforward_layernorm",
        "q_norm": "self_attn.q_norm",
        "k_norm": "self_attn.k_norm",
    },
    layout="sandwich",
    norm_offset=1.0,
    settings=gemma_settings,
    rope_layer=rope_layer_type,
    finish=gemma_finish,
)
