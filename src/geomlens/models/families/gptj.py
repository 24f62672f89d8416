"""GPT-J family: parallel blocks with one shared LayerNorm, interleaved partial rotary.

Attention and MLP both read ``ln_1(h)`` (``norm_mlp=None``) and add to the same residual.
Rotary pairs dimensions (2m, 2m+1) (``rotate_every_two``) over the first ``rotary_dim`` of
each head, base 10000. The LM head has a bias.
"""

from __future__ import annotations

from typing import Any

from geomlens.models.families.base import Dims, Family
from geomlens.models.families.common import dense_mlp, separate_heads
from geomlens.models.view import Rotary


def gptj_rotary(config: Any, dims: Dims, index: int) -> Rotary:
    return Rotary(theta=10000.0, dim=config.rotary_dim, interleaved=True)


GPTJ = Family(
    name="gptj",
    model_types=("gptj",),
    features=("interleaved partial rotary", "shared norm", "head bias"),
    auto_class="causal-lm",
    heads=separate_heads(o="out_proj"),
    mlp_view=dense_mlp("fc_in", "fc_out"),
    base=("transformer",),
    embed="wte",
    layers="h",
    final_norm="ln_f",
    attention="attn",
    sites=("v_proj", "out_proj"),
    norm_attn="ln_1",
    norm_mlp=None,
    layout="parallel",
    norm_kind="layernorm",
    rotary=gptj_rotary,
)
