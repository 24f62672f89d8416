"""OLMo 2 family: norms after each sub-block, q/k RMSNorms over all heads at once.

A block is ``h + N1(Attn h)``, then ``+ N2(MLP .)`` (``layout="post-sublayer"``, N1 =
``post_attention_layernorm``, N2 = ``post_feedforward_layernorm``): the sub-blocks read
the raw residual. ``q_norm`` and ``k_norm`` normalise the whole projected query [H*dh]
and key [kv*dh] before the heads are split, so the view's per-head (GQA-expanded)
queries and keys are joined back for them.
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
from geomlens.models.families.common import gated_mlp, separate_heads


def across_heads(norm: Any, x: torch.Tensor, n: int) -> torch.Tensor:
    """Apply ``norm`` over the n distinct heads of x [B, H, T, dh] joined, expand back."""
    group = x.shape[1] // n
    x = x[:, ::group]  # one copy of each grouped K/V head
    B, _, T, dh = x.shape
    y = norm(x.transpose(1, 2).reshape(B, T, n * dh)).reshape(B, T, n, dh).transpose(1, 2)
    return y.repeat_interleave(group, dim=1)


def olmo2_settings(config: Any, dims: Dims, index: int, attention: Any) -> AttentionSettings:
    q_norm, k_norm, H, kv = attention.q_norm, attention.k_norm, dims.n_heads, dims.n_kv_heads
    return AttentionSettings(
        qk_norm=lambda q, k: (across_heads(q_norm, q, H), across_heads(k_norm, k, kv)),
    )


OLMO2 = Family(
    name="olmo2",
    model_types=("olmo2",),
    features=("GQA", "q/k norms over all heads"),
    auto_class="causal-lm",
    options={
        **ROTARY_OPTIONS,
    },
    heads=separate_heads(),
    mlp_view=gated_mlp(),
    norm_attn="post_attention_layernorm",
    norm_mlp="post_feedforward_layernorm",
    extra_norms={"q_norm": "self_attn.q_norm", "k_norm": "self_attn.k_norm"},
    layout="post-sublayer",
    settings=olmo2_settings,
)
