"""T5 family: encoder-decoder, pre-RMSNorm blocks, bucketed relative position biases.

The main stack (``ModelView.blocks``, ``base``) is the encoder; ``decoder_blocks`` are the
decoder's blocks seen through their self-attention, each also carrying its cross-attention
(``T5DecoderBlockView``). T5 does not scale query-key scores by 1/sqrt(d_head), and with
``scale_decoder_outputs`` (originally: tied embeddings) the decoder output is multiplied by
``d_model ** -0.5`` before ``lm_head``; ``W_U`` is ``lm_head`` as stored (see docs/models.md).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import torch

from geomlens.models.families.base import Dims, Family, with_options
from geomlens.models.families.common import separate_heads
from geomlens.models.view import (
    AttentionView,
    BlockView,
    DecoderBlockView,
    MlpView,
    ModelView,
    NormView,
    PositionScheme,
    linear_in_out,
    norm_view,
)

T5DecoderBlockView = DecoderBlockView
"""A T5 decoder block (the view's ``DecoderBlockView``; T5's cross-attention is
``EncDecAttention``, its norm the layer's own ``layer_norm``)."""


t5_heads = separate_heads("q", "k", "v", "o")


def t5_mlp(dense: Any, config: Any, layer: Any = None) -> MlpView:
    """``DenseReluDense``: ``wi`` (plain) or ``wi_0`` (gate, activated) and ``wi_1`` (gated)."""
    gated = hasattr(dense, "wi_0")
    return MlpView(
        W_in=linear_in_out(dense.wi_1 if gated else dense.wi),
        W_gate=linear_in_out(dense.wi_0) if gated else None,
        W_out=linear_in_out(dense.wo),
        b_in=None,
        b_out=None,
        activation=config.dense_act_fn,
        module=dense,
    )


def _rms(module: Any) -> NormView:
    return norm_view(module, "rmsnorm", "variance_epsilon")


def relative_bias(stack: Any) -> Callable[[int], torch.Tensor]:
    """T -> [H, T, T] the stack's bucketed relative position bias (its first block's table)."""
    first = stack.block[0].layer[0].SelfAttention

    def bias(length: int) -> torch.Tensor:
        with torch.inference_mode():
            return first.compute_bias(length, length)[0].detach()

    return bias


def t5_attention(attn: Any, dims: Dims, causal: bool, bias: Any) -> AttentionView:
    """T5 attention: unscaled q . k plus the stack's relative bias (none for cross-attention)."""
    return AttentionView(
        module=attn,
        value_in=attn.v,
        output=attn.o,
        heads_fn=partial(t5_heads, attn, dims),
        scale=1.0,
        causal=causal,
        bias_fn=bias,
    )


def t5_blocks(stack: Any, config: Any, dims: Dims, causal: bool) -> list[BlockView]:
    """Views of one T5 stack's blocks.

    The last block's ``extra_norms["final"]`` is the stack's ``final_layer_norm``, applied to
    the stack's output.
    """
    blocks: list[BlockView] = []
    last = len(stack.block) - 1
    bias = relative_bias(stack)
    for i, block in enumerate(stack.block):
        self_layer, ff_layer = block.layer[0], block.layer[-1]
        extra = {"final": _rms(stack.final_layer_norm)} if i == last else {}
        dense = ff_layer.DenseReluDense
        common: dict[str, Any] = dict(
            index=i,
            module=block,
            attention=self_layer.SelfAttention,
            norm_attn=_rms(self_layer.layer_norm),
            norm_mlp=_rms(ff_layer.layer_norm),
            layout="pre",
            attn=t5_attention(self_layer.SelfAttention, dims, causal, bias),
            mlp_fn=partial(t5_mlp, dense, config),
        )
        if len(block.layer) == 3:
            cross = block.layer[1]
            blocks.append(
                T5DecoderBlockView(
                    **common,
                    extra_norms={"cross_attn": _rms(cross.layer_norm), **extra},
                    cross_attention=cross.EncDecAttention,
                    cross_heads_fn=partial(t5_heads, cross.EncDecAttention, dims),
                )
            )
        else:
            blocks.append(BlockView(**common, extra_norms=extra))
    return blocks


def unembedding_scale(config: Any) -> float:
    """The factor T5 multiplies the decoder output by before ``lm_head``: d^-0.5 or 1.

    transformers 5 records it as ``scale_decoder_outputs``; earlier versions scale when
    ``tie_word_embeddings`` is set.
    """
    scaled = getattr(config, "scale_decoder_outputs", None)
    if scaled is None:
        scaled = getattr(config, "tie_word_embeddings", True)
    return float(config.d_model) ** -0.5 if scaled else 1.0


def max_positions(config: Any) -> int | None:
    """The longest input T5 accepts: ``n_positions`` where the config records it (512 in
    every released checkpoint), else None.

    The bucketed relative bias is defined at any length, but the model was trained at this
    length and its tokenizer's ``model_max_length`` says the same; longer inputs are refused
    as for any model with a position limit.
    """
    n = getattr(config, "n_positions", None)
    return int(n) if n else None


def start_token(model: Any) -> int | None:
    """The decoder's first input: the config's ``decoder_start_token_id`` (T5: the padding
    token), else the generation config's, else None."""
    token = getattr(model.config, "decoder_start_token_id", None)
    if token is None:
        token = getattr(getattr(model, "generation_config", None), "decoder_start_token_id", None)
    return None if token is None else int(token)


def build_t5(
    model: Any,
    tokenizer: Any,
    name: str,
    source: str,
    family: str = "t5",
    scaled_output: bool = True,
) -> ModelView:
    """The view of a ``T5ForConditionalGeneration`` (or ``T5Model``/``T5EncoderModel``; mT5's
    alike, named ``family``, whose decoder output is never scaled: ``scaled_output``)."""
    config = model.config
    encoder = model.encoder
    decoder = getattr(model, "decoder", None)
    dims = Dims(
        n_layers=config.num_layers,
        d_model=config.d_model,
        n_heads=config.num_heads,
        n_kv_heads=config.num_heads,
        d_head=config.d_kv,
        n_ctx=max_positions(config),
    )
    blocks = t5_blocks(encoder, config, dims, causal=False)
    decoder_blocks = [] if decoder is None else t5_blocks(decoder, config, dims, causal=True)
    W_E = model.shared.weight.detach()
    lm_head = getattr(model, "lm_head", None)
    W_U = W_E.T if lm_head is None else lm_head.weight.detach().T
    final_stack = encoder if decoder is None else decoder
    first_attention = encoder.block[0].layer[0].SelfAttention
    return ModelView(
        name=name,
        family=family,
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
        W_pos=None,
        W_U=W_U,
        unembedding_scale=unembedding_scale(config)
        if decoder is not None and scaled_output
        else 1.0,
        final_norm=_rms(final_stack.final_layer_norm),
        encoder_final_norm=None if decoder is None else _rms(encoder.final_layer_norm),
        blocks=tuple(blocks),
        position=PositionScheme(
            kind="t5-relative",
            n_buckets=config.relative_attention_num_buckets,
            max_distance=config.relative_attention_max_distance,
            bidirectional=True,
            relative_bias=first_attention.relative_attention_bias.weight.detach(),
        ),
        is_encoder=True,
        source=source,
        decoder_blocks=tuple(decoder_blocks),
        decoder_start_token_id=None if decoder is None else start_token(model),
    )


T5 = Family(
    name="t5",
    model_types=("t5",),
    features=("encoder-decoder", "gated FFN (v1.1, Flan-T5)", "untied head", "cross-attention"),
    # Every T5 config option changes only sizes, the activation or the gating, all of which
    # the view reads from the modules; nothing is refused.
    auto_class="seq2seq-lm",
    options={},
    handles=frozenset(
        {
            "feed_forward_proj",
            "is_gated_act",
            "relative_attention_num_buckets",
            "relative_attention_max_distance",
            "scale_decoder_outputs",
        }
    ),
    position="t5-relative",
    is_encoder=True,
    builder=build_t5,
)

MT5 = with_options(
    T5,
    name="mt5",
    model_types=("mt5",),
    features=("encoder-decoder", "gated FFN", "untied head", "cross-attention", "multilingual"),
    builder=partial(build_t5, family="mt5", scaled_output=False),
)
"""mT5: T5 v1.1's modules (gated-GELU FFN, untied head) under other class names; its
decoder output goes to ``lm_head`` unscaled."""
