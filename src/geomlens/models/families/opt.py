"""OPT family: pre-LayerNorm decoder blocks, learned positions with a table offset of 2.

The decoder sits under ``model.decoder``; row ``t + 2`` of ``embed_positions`` is position
t. The MLP is ``fc1``/``fc2`` directly in the block (``fc1`` is the MLP's hook site; Hugging
Face flattens its input to [B*T, d]). The post-norm variant (``do_layer_norm_before=False``,
OPT-350m) and the projected embedding (``word_embed_proj_dim``) are not mapped.
"""

from __future__ import annotations

from typing import Any

from geomlens.models.families.base import Family, falsy, one_of
from geomlens.models.families.common import activation_of, bias_of, separate_heads
from geomlens.models.view import MlpView, linear_in_out


def opt_mlp(fc1: Any, config: Any, layer: Any) -> MlpView:
    """``fc1`` -> activation -> the sibling ``fc2``."""
    return MlpView(
        W_in=linear_in_out(fc1),
        W_gate=None,
        W_out=linear_in_out(layer.fc2),
        b_in=bias_of(fc1),
        b_out=bias_of(layer.fc2),
        activation=activation_of(config),
        module=fc1,
    )


def no_projection(config: Any) -> list[str]:
    """The embedding must have the model's width (no ``project_in``/``project_out``)."""
    dim = getattr(config, "word_embed_proj_dim", None)
    if dim is None or dim == config.hidden_size:
        return []
    return [f"word_embed_proj_dim={dim!r} (handled: equal to hidden_size {config.hidden_size})"]


OPT = Family(
    name="opt",
    model_types=("opt",),
    features=("position offset 2",),
    auto_class="causal-lm",
    handles=frozenset({"enable_bias", "word_embed_proj_dim"}),
    options={
        "do_layer_norm_before": one_of(True),
        "_remove_final_layer_norm": falsy,
        "layer_norm_elementwise_affine": one_of(True),
    },
    heads=separate_heads(o="out_proj"),
    mlp_view=opt_mlp,
    base=("model.decoder", "decoder"),
    pos_embed="embed_positions",
    pos_offset=2,
    final_norm="final_layer_norm",
    sites=("v_proj", "out_proj"),
    norm_attn="self_attn_layer_norm",
    norm_mlp="final_layer_norm",
    mlp="fc1",
    norm_kind="layernorm",
    position="learned",
    checks=no_projection,
)
