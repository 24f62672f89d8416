"""ALBERT family: post-LayerNorm encoder blocks that share their weights, a factorised
embedding.

Every block applies the same layer group (``num_hidden_groups`` groups shared among
``num_hidden_layers`` blocks; released checkpoints: one). So that each block has a module
of its own to hook, the view gives every block its own copy of its group's module tree
holding the group's very parameters (no weight is copied), and tells the encoder there
are as many groups as blocks; Hugging Face's forward is unchanged (the on-load check
confirms it). The embedding (``embedding_size`` wide: tokens, positions and token type 0)
is normalised at that width, then projected to the model's width
(``encoder.embedding_hidden_mapping_in``): a ``FactorisedEmbedding``, whose position-free
output is the view's W_E; there is no embedding norm at the model's width.
"""

from __future__ import annotations

import copy
from dataclasses import replace
from typing import Any

from torch import nn

from geomlens.models.families.base import Family, build_view, one_of
from geomlens.models.families.common import activation_of, bias_of, separate_heads
from geomlens.models.view import MlpView, ModelView, linear_in_out


def albert_mlp(ffn: Any, config: Any, group: Any) -> MlpView:
    """``ffn`` -> activation -> the sibling ``ffn_output`` (of the group's one layer)."""
    out = group.albert_layers[0].ffn_output
    return MlpView(
        W_in=linear_in_out(ffn),
        W_gate=None,
        W_out=linear_in_out(out),
        b_in=bias_of(ffn),
        b_out=bias_of(out),
        activation=activation_of(config),
        module=ffn,
    )


def tied_copy(module: nn.Module) -> nn.Module:
    """A copy of ``module``'s tree whose parameters, buffers and configs are the original's
    (so that switching the model's attention implementation reaches the copy too)."""
    shared: list[Any] = [*module.parameters(), *module.buffers()]
    shared += [m.config for m in module.modules() if hasattr(m, "config")]
    memo: dict[int, Any] = {id(t): t for t in shared}
    return copy.deepcopy(module, memo)


def unshare_layers(model: Any) -> None:
    """Give each of the encoder's ``num_hidden_layers`` calls its own group module."""
    base = getattr(model, "albert", model)
    encoder, config = base.encoder, base.config
    L, G = config.num_hidden_layers, config.num_hidden_groups
    groups = encoder.albert_layer_groups
    if len(groups) == L:
        return
    per_group = L / G
    encoder.albert_layer_groups = nn.ModuleList(
        [tied_copy(groups[int(i / per_group)]) for i in range(L)]
    )
    config.num_hidden_groups = L


def build_albert(model: Any, tokenizer: Any, name: str, source: str) -> ModelView:
    unshare_layers(model)
    return build_view(replace(ALBERT, builder=None), model, tokenizer, name, source)


ALBERT = Family(
    name="albert",
    model_types=("albert",),
    features=("post-norm encoder", "shared layers", "factorised embedding"),
    auto_class="base",
    handles=frozenset({"embedding_size", "num_hidden_groups"}),
    options={"inner_group_num": one_of(1), "position_embedding_type": one_of("absolute", None)},
    heads=separate_heads("query", "key", "value", "dense"),
    mlp_view=albert_mlp,
    base=("albert",),
    embed="embeddings.word_embeddings",
    pos_embed="embeddings.position_embeddings",
    token_type="embeddings.token_type_embeddings",
    embedding_norm="embeddings.LayerNorm",
    embedding_projection="encoder.embedding_hidden_mapping_in",
    layers="encoder.albert_layer_groups",
    final_norm=None,
    lm_head=None,
    attention="albert_layers.0.attention",
    sites=("value", "dense"),
    norm_attn="albert_layers.0.attention.LayerNorm",
    norm_mlp="albert_layers.0.full_layer_layer_norm",
    mlp="albert_layers.0.ffn",
    layout="post",
    norm_kind="layernorm",
    position="learned",
    is_encoder=True,
    builder=build_albert,
)
