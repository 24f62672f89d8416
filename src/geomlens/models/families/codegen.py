"""CodeGen family (CodeGen 1 and 2): GPT-J-like parallel blocks with a sharded fused QKV.

Attention and MLP both read ``ln_1(h)``. ``qkv_proj`` is split into four model-parallel
shards, each holding a quarter of the queries, then of the values, then of the keys
(``split_fused``'s "codegen" layout); rotary pairs dimensions (2m, 2m+1) over the first
``rotary_dim`` of each head, from the model's own sine/cosine table. The LM head has a bias.
"""

from __future__ import annotations

from geomlens.models.families.base import Family
from geomlens.models.families.common import dense_mlp, fused_heads
from geomlens.models.families.rope import default_rope_only

CODEGEN = Family(
    name="codegen",
    model_types=("codegen",),
    features=("sharded fused QKV", "interleaved partial rotary", "shared norm", "head bias"),
    auto_class="causal-lm",
    handles=frozenset({"rotary_dim"}),
    options={"rope_parameters": default_rope_only, "rope_scaling": default_rope_only},
    heads=fused_heads("qkv_proj", "out_proj", "codegen"),
    mlp_view=dense_mlp("fc_in", "fc_out"),
    base=("transformer",),
    embed="wte",
    layers="h",
    final_norm="ln_f",
    attention="attn",
    sites=("qkv_proj", "out_proj"),
    norm_attn="ln_1",
    norm_mlp=None,
    layout="parallel",
    norm_kind="layernorm",
    rotary_interleaved=True,
)
