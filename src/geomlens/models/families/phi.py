"""Phi family (Phi-1, Phi-1.5, Phi-2): parallel blocks with one shared LayerNorm.

Attention and MLP both read ``input_layernorm(h)``. Q/K/V and the output ``dense`` have
biases, rotary (rotate-half) covers ``partial_rotary_factor`` of each head, and the LM head
has a bias. Per-head q/k LayerNorms (``qk_layernorm``) are not mapped.
"""

from __future__ import annotations

from geomlens.models.families.base import Family, falsy, known_rope
from geomlens.models.families.common import dense_mlp, separate_heads

PHI = Family(
    name="phi",
    model_types=("phi",),
    features=("partial rotary", "shared norm", "head bias"),
    auto_class="causal-lm",
    handles=frozenset({"partial_rotary_factor"}),
    options={"rope_parameters": known_rope, "rope_scaling": known_rope, "qk_layernorm": falsy},
    heads=separate_heads(o="dense"),
    mlp_view=dense_mlp("fc1", "fc2"),
    final_norm="final_layernorm",
    sites=("v_proj", "dense"),
    norm_mlp=None,
    layout="parallel",
    norm_kind="layernorm",
)
