"""GPT-2 family: pre-LayerNorm decoder blocks, learned absolute positions, fused QKV.

GPT-2's projections are ``Conv1D`` modules whose weights are already [in, out]: the fused
``c_attn`` holds all of Q, then K, then V.
"""

from __future__ import annotations

from typing import Any

from geomlens.models.families.base import Dims, Family, falsy, one_of
from geomlens.models.families.common import bias_of, dense_mlp, heads_from, split_fused
from geomlens.models.view import HeadWeights


def gpt2_heads(attn: Any, dims: Dims) -> HeadWeights:
    W_Q, W_K, W_V, b_Q, b_K, b_V = split_fused(
        attn.c_attn.weight.detach(), bias_of(attn.c_attn), "contiguous", dims
    )
    W_O = attn.c_proj.weight.detach()
    return heads_from(W_Q, W_K, W_V, W_O, (b_Q, b_K, b_V, bias_of(attn.c_proj)), dims)


GPT2 = Family(
    name="gpt2",
    model_types=("gpt2",),
    features=("fused QKV",),
    auto_class="causal-lm",
    handles=frozenset({"reorder_and_upcast_attn"}),
    options={
        # The view assumes scores scaled by 1/sqrt(d_head), the same in every layer.
        "scale_attn_weights": one_of(True),
        "scale_attn_by_inverse_layer_idx": falsy,
        # Cross-attention blocks have no place in the view.
        "add_cross_attention": falsy,
    },
    heads=gpt2_heads,
    mlp_view=dense_mlp("c_fc", "c_proj", conv1d=True),
    base=("transformer",),
    embed="wte",
    pos_embed="wpe",
    layers="h",
    final_norm="ln_f",
    attention="attn",
    sites=("c_attn", "c_proj"),
    norm_attn="ln_1",
    norm_mlp="ln_2",
    norm_kind="layernorm",
    position="learned",
)
