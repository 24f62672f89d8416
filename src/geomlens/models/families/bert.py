"""BERT family (MiniLM): post-LayerNorm encoder blocks, learned absolute positions."""

from __future__ import annotations

from functools import partial
from typing import Any

from geomlens.models.families.base import Family, falsy, one_of
from geomlens.models.view import (
    BlockView,
    HeadWeights,
    MlpView,
    ModelView,
    PositionScheme,
    bias_heads,
    linear_in_out,
    norm_view,
    split_heads_in,
    split_heads_out,
)


def bert_heads(layer: Any, n_heads: int) -> HeadWeights:
    self_attn, out = layer.attention.self, layer.attention.output
    return HeadWeights(
        W_Q=split_heads_in(linear_in_out(self_attn.query), n_heads),
        W_K=split_heads_in(linear_in_out(self_attn.key), n_heads),
        W_V=split_heads_in(linear_in_out(self_attn.value), n_heads),
        W_O=split_heads_out(linear_in_out(out.dense), n_heads),
        b_Q=bias_heads(self_attn.query.bias, n_heads),
        b_K=bias_heads(self_attn.key.bias, n_heads),
        b_V=bias_heads(self_attn.value.bias, n_heads),
        b_O=out.dense.bias.detach(),
    )


def bert_mlp(layer: Any, activation: str) -> MlpView:
    return MlpView(
        W_in=linear_in_out(layer.intermediate.dense),
        W_gate=None,
        W_out=linear_in_out(layer.output.dense),
        b_in=layer.intermediate.dense.bias.detach(),
        b_out=layer.output.dense.bias.detach(),
        activation=activation,
        module=layer.intermediate,
    )


def build_bert(model: Any, tokenizer: Any, name: str, source: str) -> ModelView:
    config: Any = model.config
    base: Any = getattr(model, "bert", model)
    n_heads = config.num_attention_heads
    blocks = []
    for i, layer in enumerate(base.encoder.layer):
        blocks.append(
            BlockView(
                index=i,
                module=layer,
                attention=layer.attention,
                norm_attn=norm_view(layer.attention.output.LayerNorm, "layernorm"),
                norm_mlp=norm_view(layer.output.LayerNorm, "layernorm"),
                placement="post",
                heads_fn=partial(bert_heads, layer, n_heads),
                mlp_fn=partial(bert_mlp, layer, config.hidden_act),
            )
        )
    W_E = base.embeddings.word_embeddings.weight.detach()
    decoder = getattr(getattr(getattr(model, "cls", None), "predictions", None), "decoder", None)
    W_U = W_E.T if decoder is None else decoder.weight.detach().T
    return ModelView(
        name=name,
        family="bert",
        model=model,
        tokenizer=tokenizer,
        base=base,
        config=config,
        n_layers=config.num_hidden_layers,
        d_model=config.hidden_size,
        n_heads=n_heads,
        n_kv_heads=n_heads,
        d_head=config.hidden_size // n_heads,
        n_ctx=config.max_position_embeddings,
        W_E=W_E,
        W_pos=base.embeddings.position_embeddings.weight.detach(),
        W_U=W_U,
        final_norm=None,
        embedding_norm=norm_view(base.embeddings.LayerNorm, "layernorm"),
        blocks=tuple(blocks),
        position=PositionScheme(kind="learned"),
        is_encoder=True,
        source=source,
    )


BERT = Family(
    name="bert",
    model_types=("bert",),
    options={
        "position_embedding_type": one_of("absolute", None),
        "is_decoder": falsy,
        "add_cross_attention": falsy,
        "chunk_size_feed_forward": one_of(0, None),
    },
    auto_class="base",
    build=build_bert,
)
