"""XGLM family: pre-LayerNorm decoder blocks (OPT's layout) with sinusoidal positions.

The token embedding is multiplied by sqrt(d) (``scale_embedding``); positions come from a
fixed sinusoidal table whose row ``t + 2`` is position t; ``fc1``/``fc2`` sit directly in
the block (``fc1`` is the MLP's hook site).
"""

from __future__ import annotations

from typing import Any

from geomlens.models.families.base import Family, falsy
from geomlens.models.families.common import separate_heads
from geomlens.models.families.opt import opt_mlp


def xglm_finish(model: Any, config: Any) -> dict[str, Any]:
    base = model.model
    table = base.embed_positions
    return {
        "embedding_scale": float(base.embed_tokens.embed_scale),
        "W_pos": table.weights.detach()[table.offset :],
    }


XGLM = Family(
    name="xglm",
    model_types=("xglm",),
    features=("sinusoidal positions", "embedding scale"),
    auto_class="causal-lm",
    handles=frozenset({"scale_embedding"}),
    options={"add_cross_attention": falsy},
    heads=separate_heads(o="out_proj"),
    mlp_view=opt_mlp,
    final_norm="layer_norm",
    sites=("v_proj", "out_proj"),
    norm_attn="self_attn_layer_norm",
    norm_mlp="final_layer_norm",
    mlp="fc1",
    norm_kind="layernorm",
    position="sinusoidal",
    finish=xglm_finish,
)
