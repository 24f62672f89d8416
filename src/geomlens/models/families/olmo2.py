"""OLMo 2 family: norms after each sub-block, q/k RMSNorms over all heads at once.

A block is ``h + N1(Attn h)``, then ``+ N2(MLP .)`` (``layout="post-sublayer"``, N1 =
``post_attention_layernorm``, N2 = ``post_feedforward_layernorm``): the sub-blocks read
the raw residual. ``q_norm`` and ``k_norm`` normalise the whole projected query [H*dh]
and key [kv*dh] before the heads are split, so the view's per-head (GQA-expanded)
queries and keys are joined back for them.
"""

from __future__ import annotations

from geomlens.models.families.base import ROTARY_OPTIONS, Family
from geomlens.models.families.common import gated_mlp, qk_norms, separate_heads

OLMO2 = Family(
    name="olmo2",
    model_types=("olmo2",),
    features=("GQA", "q/k norms over all heads"),
    auto_class="causal-lm",
    handles=frozenset({"attention_bias"}),
    options={
        **ROTARY_OPTIONS,
    },
    heads=separate_heads(),
    mlp_view=gated_mlp(),
    norm_attn="post_attention_layernorm",
    norm_mlp="post_feedforward_layernorm",
    extra_norms={"q_norm": "self_attn.q_norm", "k_norm": "self_attn.k_norm"},
    layout="post-sublayer",
    settings=qk_norms(layout="joined"),
)
