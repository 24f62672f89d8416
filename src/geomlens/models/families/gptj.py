"""GPT-J family: parallel blocks with one shared LayerNorm, interleaved partial rotary.

Attention and MLP both read ``ln_1(h)`` (``norm_mlp=None``) and add to the same residual.
Rotary pairs dimensions (2m, 2m+1) (``rotate_every_two``) over the first ``rotary_dim`` of
each head, base 10000, from the model's own sine/cosine table. The LM head has a bias.
"""

from __future__ import annotations

from geomlens.models.families.base import Family
from geomlens.models.families.common import dense_mlp, separate_heads
from geomlens.models.families.rope import default_rope_only

GPTJ = Family(
    name="gptj",
    model_types=("gptj",),
    features=("interleaved partial rotary", "shared norm", "head bias"),
    auto_class="causal-lm",
    handles=frozenset({"rotary_dim"}),
    options={"rope_parameters": default_rope_only, "rope_scaling": default_rope_only},
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
    rotary_interleaved=True,
)
