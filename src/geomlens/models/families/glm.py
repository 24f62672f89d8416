"""GLM families (GLM-4 9B and its predecessor ``glm``): Llama blocks with a fused gate/up
MLP and interleaved partial rotary.

``mlp.gate_up_proj`` holds the gate rows, then the up rows; rotary pairs dimensions
(2m, 2m+1) over ``partial_rotary_factor`` of each head (the model's rotary module gives
one frequency per pair). GLM-4 also normalises each sub-block's output before it joins the
residual (``post_self_attn_layernorm``, ``post_mlp_layernorm``: the sandwich layout).
"""

from __future__ import annotations

from geomlens.models.families.base import ROTARY_OPTIONS, Family, with_options
from geomlens.models.families.common import separate_heads
from geomlens.models.families.phi3 import phi3_mlp

GLM = Family(
    name="glm",
    model_types=("glm",),
    features=("GQA", "fused gate/up", "interleaved partial rotary", "QKV biases"),
    auto_class="causal-lm",
    handles=frozenset({"attention_bias", "partial_rotary_factor"}),
    options={**ROTARY_OPTIONS},
    heads=separate_heads(),
    mlp_view=phi3_mlp,
    rotary_interleaved=True,
)

GLM4 = with_options(
    GLM,
    name="glm4",
    model_types=("glm4",),
    features=("GQA", "fused gate/up", "interleaved partial rotary", "sandwich norms"),
    extra_norms={"post_attn": "post_self_attn_layernorm", "post_mlp": "post_mlp_layernorm"},
    layout="sandwich",
)
