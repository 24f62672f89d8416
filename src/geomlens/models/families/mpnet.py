"""MPNet family (all-mpnet-base-v2): BERT's post-LayerNorm encoder blocks with learned
absolute positions plus a T5-style bucketed relative position bias on every score.

The encoder computes the bias once (``MPNetEncoder.compute_position_bias``: 32 buckets,
half per direction, log-spaced up to distance 128, one table ``relative_attention_bias``
[buckets, heads]) and adds it to the scaled scores of every layer; the view's ``attn.bias``
is that same tensor, so the attention split keeps it as its own part. Positions count from
``padding_idx + 1`` (the embedding's fixed padding index 1) as RoBERTa's do; there is no
token-type table.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import torch

from geomlens.models.families.base import (
    AttentionSettings,
    Dims,
    Family,
    build_view,
    find_base,
    one_of,
    standard_dims,
)
from geomlens.models.families.bert import bert_mlp
from geomlens.models.families.common import separate_heads
from geomlens.models.view import ModelView, PositionScheme

BUCKETS, MAX_DISTANCE = 32, 128
"""What ``compute_position_bias`` uses, whatever ``relative_attention_num_buckets`` says
(the config's value only sizes the table)."""


def mpnet_dims(config: Any) -> Dims:
    """Sizes; the usable context is the position table less the rows before position 0."""
    dims = standard_dims(config)
    return replace(dims, n_ctx=config.max_position_embeddings - 2)


def relative_bias(encoder: Any) -> Any:
    """T -> [H, T, T]: the bias the encoder adds to every layer's scores."""

    def bias(length: int) -> torch.Tensor:
        table = encoder.relative_attention_bias.weight
        probe = torch.empty(1, length, 0, device=table.device)
        with torch.inference_mode():
            return encoder.compute_position_bias(probe)[0].detach()

    return bias


def build_mpnet(model: Any, tokenizer: Any, name: str, source: str) -> ModelView:
    """The generic view with the encoder's relative bias in every block, positions counted
    from ``padding_idx + 1``."""
    base = find_base(model, MPNET.base)
    encoder, embeddings = base.encoder, base.embeddings
    bias = relative_bias(encoder)

    def settings(config: Any, dims: Dims, index: int, attention: Any) -> AttentionSettings:
        return AttentionSettings(bias_fn=bias)

    family = replace(MPNET, builder=None, settings=settings)
    view = build_view(family, model, tokenizer, name, source)
    table = embeddings.position_embeddings.weight.detach()
    return replace(
        view,
        W_pos=table[embeddings.padding_idx + 1 :],
        position=PositionScheme(
            kind="learned",
            n_buckets=BUCKETS,
            max_distance=MAX_DISTANCE,
            bidirectional=True,
            relative_bias=encoder.relative_attention_bias.weight.detach()[:BUCKETS],
        ),
    )


MPNET = Family(
    name="mpnet",
    model_types=("mpnet",),
    features=("post-norm encoder", "position offset pad + 1", "shared T5-style relative bias"),
    auto_class="base",
    handles=frozenset({"relative_attention_num_buckets"}),
    # the embedding restarts its position count at token id 1 whatever the config says; the
    # on-load probe avoids the config's padding token, so the two must agree
    options={"pad_token_id": one_of(1)},
    heads=separate_heads("attn.q", "attn.k", "attn.v", "attn.o"),
    mlp_view=bert_mlp,
    base=("mpnet",),
    embed="embeddings.word_embeddings",
    pos_embed="embeddings.position_embeddings",
    embedding_norm="embeddings.LayerNorm",
    layers="encoder.layer",
    final_norm=None,
    lm_head=None,
    attention="attention",
    sites=("attn.v", "attn.o"),
    norm_attn="attention.LayerNorm",
    norm_mlp="output.LayerNorm",
    mlp="intermediate",
    layout="post",
    norm_kind="layernorm",
    position="learned",
    is_encoder=True,
    dims=mpnet_dims,
    builder=build_mpnet,
)
