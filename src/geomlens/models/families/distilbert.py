"""DistilBERT family: BERT's post-LayerNorm blocks under other names.

Each block is ``N1(h + Attn(h))`` then ``N2(. + MLP(.))`` with ``sa_layer_norm`` and
``output_layer_norm``; ``q_lin``/``k_lin``/``v_lin``/``out_lin`` project, ``ffn.lin1``/
``ffn.lin2`` form the MLP. Positions are a learned table, or a fixed sinusoidal one with
``sinusoidal_pos_embds``; there are no token types.
"""

from __future__ import annotations

from typing import Any

from geomlens.models.families.base import Family
from geomlens.models.families.common import dense_mlp, separate_heads


def distilbert_variant(config: Any) -> dict[str, Any]:
    return {"position": "sinusoidal" if config.sinusoidal_pos_embds else "learned"}


DISTILBERT = Family(
    name="distilbert",
    model_types=("distilbert",),
    features=("post-norm encoder", "sinusoidal option"),
    auto_class="base",
    handles=frozenset({"sinusoidal_pos_embds"}),
    heads=separate_heads("q_lin", "k_lin", "v_lin", "out_lin"),
    mlp_view=dense_mlp("lin1", "lin2"),
    base=("distilbert",),
    embed="embeddings.word_embeddings",
    pos_embed="embeddings.position_embeddings",
    embedding_norm="embeddings.LayerNorm",
    layers="transformer.layer",
    final_norm=None,
    lm_head=None,
    attention="attention",
    sites=("v_lin", "out_lin"),
    norm_attn="sa_layer_norm",
    norm_mlp="output_layer_norm",
    mlp="ffn",
    layout="post",
    norm_kind="layernorm",
    position="learned",
    is_encoder=True,
    variant=distilbert_variant,
)
