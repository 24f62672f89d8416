"""OLMo family (OLMo 1): Llama blocks with LayerNorms that have no gain or bias.

Each norm is ``F.layer_norm(x, eps=1e-5)`` with gamma = 1 and beta = 0 (the view's gain is
ones). ``clip_qkv`` clamps queries, keys and values, which makes attention nonlinear in
its input, so it is refused.
"""

from __future__ import annotations

from geomlens.models.families.base import ROTARY_OPTIONS, Family, falsy
from geomlens.models.families.common import gated_mlp, separate_heads

OLMO = Family(
    name="olmo",
    model_types=("olmo",),
    features=("non-parametric LayerNorm",),
    auto_class="causal-lm",
    handles=frozenset({"attention_bias"}),
    options={**ROTARY_OPTIONS, "clip_qkv": falsy},
    heads=separate_heads(),
    mlp_view=gated_mlp(),
    norm_kind="layernorm",
    norm_eps=1e-5,
)
