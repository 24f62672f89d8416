"""GPT-NeoX family (Pythia): fused per-head QKV, partial rotary, parallel or sequential.

``query_key_value`` holds, head by head, [q_h, k_h, v_h]. Rotary (rotate-half) covers
``partial_rotary_factor`` (legacy ``rotary_pct``) of each head. ``use_parallel_residual``
picks ``h + Attn(N1 h) + MLP(N2 h)`` (Pythia) or the sequential pre-norm block.
"""

from __future__ import annotations

from typing import Any

from geomlens.models.families.base import Family, known_rope
from geomlens.models.families.common import dense_mlp, fused_heads


def neox_layout(config: Any) -> dict[str, Any]:
    return {"layout": "parallel" if config.use_parallel_residual else "pre"}


GPT_NEOX = Family(
    name="gpt_neox",
    model_types=("gpt_neox",),
    features=("fused QKV", "partial rotary"),
    auto_class="causal-lm",
    handles=frozenset(
        {
            "attention_bias",
            "partial_rotary_factor",
            "rotary_emb_base",
            "rotary_pct",
            "use_parallel_residual",
        }
    ),
    options={"rope_parameters": known_rope, "rope_scaling": known_rope},
    heads=fused_heads("query_key_value", "dense", "per-head"),
    mlp_view=dense_mlp("dense_h_to_4h", "dense_4h_to_h"),
    base=("gpt_neox",),
    embed="embed_in",
    final_norm="final_layer_norm",
    attention="attention",
    sites=("query_key_value", "dense"),
    norm_kind="layernorm",
    variant=neox_layout,
)
