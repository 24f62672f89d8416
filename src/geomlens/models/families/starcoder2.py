"""StarCoder 2 family: Llama-like pre-LayerNorm blocks with a dense GELU MLP and biases.

``mlp.c_fc``/``mlp.c_proj`` (with biases, as Q, K, V and O have with ``use_bias``) form a
plain MLP; the norms are LayerNorms with bias; the config's ``sliding_window``, when set, masks
every layer alike.
"""

from __future__ import annotations

from geomlens.models.families.base import ROTARY_OPTIONS, Family
from geomlens.models.families.common import config_window, dense_mlp, separate_heads

STARCODER2 = Family(
    name="starcoder2",
    model_types=("starcoder2",),
    features=("GQA", "sliding window", "dense MLP", "biases"),
    auto_class="causal-lm",
    handles=frozenset({"sliding_window", "use_bias"}),
    options={**ROTARY_OPTIONS},
    heads=separate_heads(),
    mlp_view=dense_mlp("c_fc", "c_proj"),
    norm_kind="layernorm",
    settings=config_window,
)
