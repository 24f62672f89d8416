"""Gemma 2 family: sandwich RMSNorms with gain ``1 + w``, soft-capped attention scores.

Like Gemma 3, each sub-block's output is normalised again before it joins the residual
(``extra_norms["post_attn"]``, ``["post_mlp"]``), scores are scaled by
``query_pre_attn_scalar ** -0.5`` and the embedding by sqrt(d). Unlike Gemma 3 there are
no q/k norms, one rotary base for all layers, and the attention applies
``attn_logit_softcapping`` (``c * tanh(s / c)`` before the mask); the logits are capped by
``final_logit_softcapping``. ``sliding_attention`` layers keep their module's window.
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
from geomlens.models.families.gemma3 import GEMMA_OPTIONS, gemma_finish, known_layer_types


def gemma2_settings(config: Any, dims: Dims, index: int, attention: Any) -> AttentionSettings:
    return AttentionSettings(
        scale=float(attention.scaling),
        window=attention.sliding_window,
        softcap=attention.attn_logit_softcapping,
    )


def one_activation(config: Any) -> list[str]:
    """Gemma 2 reads ``hidden_activation``; a different legacy ``hidden_act`` is refused."""
    act, legacy = config.hidden_activation, getattr(config, "hidden_act", None)
    return [] if legacy in (None, act) else [f"hidden_act={legacy!r} (handled: {act!r})"]


GEMMA2 = Family(
    name="gemma2",
    model_types=("gemma2",),
    features=("GQA", "sliding window", "logit soft-capping", "embedding scale"),
    auto_class="causal-lm",
    handles=GEMMA_OPTIONS,
    options={
        "rope_parameters": known_rope,
        "rope_scaling": known_rope,
        "use_bidirectional_attention": falsy,
        "layer_types": known_layer_types,
    },
    heads=separate_heads(),
    mlp_view=gated_mlp(),
    norm_mlp="pre_feedforward_layernorm",
    extra_norms={"post_attn": "post_attention_layernorm", "post_mlp": "post_feedforward_layernorm"},
    layout="sandwich",
    norm_offset=1.0,
    settings=gemma2_settings,
    checks=one_activation,
    finish=gemma_finish,
)
