"""ModernBERT family: pre-LayerNorm encoder blocks, fused QKV, a GLU MLP, local/global
rotary attention.

The embedding is normalised (``embeddings.norm``) before block 0, whose attention reads
it as it is (its ``attn_norm`` is the identity); the other blocks normalise their input.
``Wqkv`` holds all of Q, then K, then V; ``mlp.Wi`` produces [input, gate], the MLP being
``Wo(act(input) * gate)``. Layers listed as ``sliding_attention`` attend within
``sliding_window`` positions on either side and rotate with the local rotary set; the
others with the global one. The stack ends with ``final_norm``.
"""

from __future__ import annotations

from typing import Any

from geomlens.models.families.base import Family, falsy
from geomlens.models.families.common import activation_of, bias_of, fused_heads, module_window
from geomlens.models.families.gemma3 import known_layer_types, rope_layer_type
from geomlens.models.families.rope import known_rope
from geomlens.models.view import MlpView, linear_in_out


def modernbert_mlp(mlp: Any, config: Any, layer: Any = None) -> MlpView:
    """``Wo(act(x W_i,input) * (x W_i,gate))``: the activated half is the view's gate."""
    fused = linear_in_out(mlp.Wi)  # [d, 2 * ff]; no bias (``mlp_bias`` is refused)
    ff = fused.shape[1] // 2
    return MlpView(
        W_in=fused[:, ff:],
        W_gate=fused[:, :ff],
        W_out=linear_in_out(mlp.Wo),
        b_in=None,
        b_out=bias_of(mlp.Wo),
        activation=activation_of(config),
        module=mlp,
    )


MODERNBERT = Family(
    name="modernbert",
    model_types=("modernbert",),
    features=("pre-norm encoder", "fused QKV", "GLU MLP", "local/global rotary"),
    auto_class="base",
    handles=frozenset(
        {
            "attention_bias",
            "deterministic_flash_attn",
            "global_attn_every_n_layers",
            "global_rope_theta",
            "local_attention",
            "local_rope_theta",
            "mlp_bias",
            "norm_bias",
            "reference_compile",
            "repad_logits_with_grad",
            "sliding_window",
        }
    ),
    options={
        "rope_parameters": known_rope,
        "layer_types": known_layer_types,
        "mlp_bias": falsy,
    },
    heads=fused_heads("Wqkv", "Wo", "contiguous"),
    mlp_view=modernbert_mlp,
    embed="embeddings.tok_embeddings",
    embedding_norm="embeddings.norm",
    layers="layers",
    final_norm="final_norm",
    lm_head=None,
    attention="attn",
    sites=("Wqkv", "Wo"),
    norm_attn="attn_norm",
    norm_mlp="mlp_norm",
    norm_kind="layernorm",
    is_encoder=True,
    settings=module_window,
    rope_layer=rope_layer_type,
)
