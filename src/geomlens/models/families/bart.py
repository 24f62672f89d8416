"""BART family (BART, mBART): encoder-decoders with learned positions, LayerNorms and
cross-attention.

The main stack (``ModelView.blocks``, ``base``) is the encoder; ``decoder_blocks`` are the
decoder's blocks (``DecoderBlockView``), each with its cross-attention (``encoder_attn``,
norm ``encoder_attn_layer_norm``). Tokens are embedded by ``shared`` times ``embed_scale``
(sqrt(d) with ``scale_embedding``), positions by a learned table whose row ``t + 2`` is
position t, and the sum is normalised (``layernorm_embedding``) before block 0.

BART's blocks are post-norm (``N1(h + Attn h)``, then ``N(. + Cross .)``, then
``N2(. + MLP .)``) and its stacks end without a norm; mBART's are pre-norm and each stack
ends with ``layer_norm``. The logits are ``lm_head`` plus ``final_logits_bias``.
"""

from __future__ import annotations

from dataclasses import replace
from functools import partial
from typing import Any

from geomlens.models.families.base import Dims, Family, block_view, falsy, make_norm
from geomlens.models.families.common import separate_heads
from geomlens.models.families.opt import opt_mlp
from geomlens.models.view import BlockView, DecoderBlockView, ModelView, PositionScheme

bart_heads = separate_heads(o="out_proj")


def bart_dims(config: Any) -> Dims:
    return Dims(
        n_layers=config.encoder_layers,
        d_model=config.d_model,
        n_heads=config.encoder_attention_heads,
        n_kv_heads=config.encoder_attention_heads,
        d_head=config.d_model // config.encoder_attention_heads,
        n_ctx=config.max_position_embeddings,
    )


def same_shape(config: Any) -> list[str]:
    """The view has one head count and width for both stacks."""
    enc, dec = config.encoder_attention_heads, config.decoder_attention_heads
    if enc == dec:
        return []
    return [f"decoder_attention_heads={dec!r} (handled: equal to encoder_attention_heads {enc})"]


def decoder_block(family: Family, config: Any, dims: Dims, index: int, layer: Any) -> BlockView:
    """A decoder block: the generic block (causal), plus its cross-attention."""
    causal = replace(family, is_encoder=False)
    plain = block_view(causal, config, dims, index, layer)
    fields = {f: getattr(plain, f) for f in plain.__dataclass_fields__}
    cross = make_norm(family, layer.encoder_attn_layer_norm, dims.d_model)
    fields["extra_norms"] = {**plain.extra_norms, "cross_attn": cross}
    return DecoderBlockView(
        **fields,
        cross_attention=layer.encoder_attn,
        cross_heads_fn=partial(bart_heads, layer.encoder_attn, dims),
    )


def start_token(model: Any) -> int | None:
    token = getattr(model.config, "decoder_start_token_id", None)
    if token is None:
        token = getattr(getattr(model, "generation_config", None), "decoder_start_token_id", None)
    return None if token is None else int(token)


def build_bart(family: Family, model: Any, tokenizer: Any, name: str, source: str) -> ModelView:
    """The view of a ``BartForConditionalGeneration`` (or ``BartModel``) or mBART's."""
    config = model.config
    base = getattr(model, "model", model)
    encoder, decoder = base.encoder, base.decoder
    dims = bart_dims(config)
    blocks = [block_view(family, config, dims, i, la) for i, la in enumerate(encoder.layers)]
    dec = [decoder_block(family, config, dims, i, la) for i, la in enumerate(decoder.layers)]
    W_E = base.shared.weight.detach()
    lm_head = getattr(model, "lm_head", None)
    bias = getattr(model, "final_logits_bias", None)
    table = encoder.embed_positions
    pre = family.layout == "pre"
    return ModelView(
        name=name,
        family=family.name,
        model=model,
        tokenizer=tokenizer,
        base=encoder,
        config=config,
        n_layers=dims.n_layers,
        d_model=dims.d_model,
        n_heads=dims.n_heads,
        n_kv_heads=dims.n_kv_heads,
        d_head=dims.d_head,
        n_ctx=dims.n_ctx,
        W_E=W_E,
        W_pos=table.weight.detach()[table.offset :],
        W_U=W_E.T if lm_head is None else lm_head.weight.detach().T,
        b_U=None if bias is None else bias.detach()[0],
        embedding_scale=float(encoder.embed_tokens.embed_scale),
        embedding_norm=make_norm(family, encoder.layernorm_embedding, dims.d_model),
        final_norm=make_norm(family, decoder.layer_norm, dims.d_model) if pre else None,
        encoder_final_norm=make_norm(family, encoder.layer_norm, dims.d_model) if pre else None,
        blocks=tuple(blocks),
        decoder_blocks=tuple(dec),
        position=PositionScheme(kind="learned"),
        is_encoder=True,
        source=source,
        decoder_start_token_id=start_token(model),
    )


def _bart_family(name: str, model_type: str, layout: str, features: tuple[str, ...]) -> Family:
    family = Family(
        name=name,
        model_types=(model_type,),
        features=features,
        auto_class="seq2seq-lm",
        options={"add_cross_attention": falsy},
        handles=frozenset({"scale_embedding"}),
        heads=bart_heads,
        mlp_view=opt_mlp,
        attention="self_attn",
        sites=("v_proj", "out_proj"),
        norm_attn="self_attn_layer_norm",
        norm_mlp="final_layer_norm",
        mlp="fc1",
        layout=layout,  # type: ignore[arg-type]
        norm_kind="layernorm",
        position="learned",
        is_encoder=True,
        checks=same_shape,
    )
    return replace(family, builder=partial(build_bart, family))


BART = _bart_family(
    "bart", "bart", "post", ("encoder-decoder", "post-norm", "cross-attention", "logits bias")
)
MBART = _bart_family(
    "mbart", "mbart", "pre", ("encoder-decoder", "pre-norm", "cross-attention", "logits bias")
)
