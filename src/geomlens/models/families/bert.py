"""BERT family (MiniLM), RoBERTa and its copies: post-LayerNorm encoder blocks, learned
positions.

``BertAttention`` holds the self-attention and its output projection, residual and norm, so
the block's ``attention`` returns ``LayerNorm(h + attention)``. RoBERTa's position table
starts after its padding index: row ``pad + 1`` is position 0; XLM-RoBERTa, CamemBERT and
data2vec-text are RoBERTa's modules under other names. Every token receives token type 0's
row, which the view's W_E includes. ELECTRA is BERT's, with its normalised embedding
projected to the model's width where ``embedding_size`` differs (``embeddings_project``): a
``FactorisedEmbedding``, whose position-free output is the view's W_E.
"""

from __future__ import annotations

from typing import Any

from geomlens.models.families.base import Family, falsy, one_of, with_options
from geomlens.models.families.common import activation_of, separate_heads
from geomlens.models.view import MlpView, linear_in_out


def bert_mlp(intermediate: Any, config: Any, layer: Any) -> MlpView:
    """``intermediate.dense`` -> activation -> the sibling ``output.dense``."""
    return MlpView(
        W_in=linear_in_out(layer.intermediate.dense),
        W_gate=None,
        W_out=linear_in_out(layer.output.dense),
        b_in=layer.intermediate.dense.bias.detach(),
        b_out=layer.output.dense.bias.detach(),
        activation=activation_of(config),
        module=intermediate,
    )


BERT = Family(
    name="bert",
    model_types=("bert",),
    features=("post-norm encoder",),
    auto_class="base",
    options={
        "position_embedding_type": one_of("absolute", None),
        "is_decoder": falsy,
        "add_cross_attention": falsy,
        "chunk_size_feed_forward": one_of(0, None),
    },
    heads=separate_heads("self.query", "self.key", "self.value", "output.dense"),
    mlp_view=bert_mlp,
    base=("bert", "roberta"),
    embed="embeddings.word_embeddings",
    pos_embed="embeddings.position_embeddings",
    embedding_norm="embeddings.LayerNorm",
    token_type="embeddings.token_type_embeddings",
    layers="encoder.layer",
    final_norm=None,
    lm_head=None,
    attention="attention",
    sites=("self.value", "output.dense"),
    norm_attn="attention.output.LayerNorm",
    norm_mlp="output.LayerNorm",
    mlp="intermediate",
    layout="post",
    norm_kind="layernorm",
    position="learned",
    is_encoder=True,
)


def roberta_offset(model: Any, config: Any) -> dict[str, Any]:
    """RoBERTa counts positions from ``pad_token_id + 1``."""
    base = getattr(model, "roberta", model)
    table = base.embeddings.position_embeddings.weight.detach()
    return {"W_pos": table[config.pad_token_id + 1 :]}


ROBERTA = with_options(
    BERT,
    name="roberta",
    model_types=("roberta",),
    features=("post-norm encoder", "position offset pad + 1"),
    finish=roberta_offset,
)


def roberta_copy(name: str, model_type: str, base: str) -> Family:
    """A family whose modules are RoBERTa's under another name."""
    return with_options(
        ROBERTA,
        name=name,
        model_types=(model_type,),
        base=(base, "roberta"),
        finish=lambda model, config: roberta_offset_at(model, config, base),
    )


def roberta_offset_at(model: Any, config: Any, base: str) -> dict[str, Any]:
    """``roberta_offset`` for a model whose base sits under ``base``."""
    root = getattr(model, base, model)
    table = root.embeddings.position_embeddings.weight.detach()
    return {"W_pos": table[config.pad_token_id + 1 :]}


XLM_ROBERTA = roberta_copy("xlm-roberta", "xlm-roberta", "roberta")
CAMEMBERT = roberta_copy("camembert", "camembert", "roberta")
DATA2VEC_TEXT = roberta_copy("data2vec-text", "data2vec-text", "data2vec_text")


def electra_variant(config: Any) -> dict[str, Any]:
    """An embedding narrower than the model is normalised, then projected
    (``embeddings_project``, present only then)."""
    if config.embedding_size == config.hidden_size:
        return {}
    return {"embedding_projection": "embeddings_project"}


ELECTRA = with_options(
    BERT,
    name="electra",
    model_types=("electra",),
    features=("post-norm encoder", "projected embedding"),
    base=("electra",),
    handles=frozenset({"embedding_size"}),
    variant=electra_variant,
)
