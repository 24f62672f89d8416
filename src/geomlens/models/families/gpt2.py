"""GPT-2 family: pre-LayerNorm decoder blocks, learned absolute positions, fused QKV."""

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
    norm_view,
    split_heads_in,
    split_heads_out,
)


def gpt2_heads(attn: Any, n_heads: int) -> HeadWeights:
    """Per-head weights of GPT-2's fused ``c_attn`` and ``c_proj`` (Conv1D: already [in, out])."""
    d = attn.c_proj.weight.shape[1]
    W_Q, W_K, W_V = attn.c_attn.weight.detach().split(d, dim=1)
    b_Q, b_K, b_V = attn.c_attn.bias.detach().split(d)
    return HeadWeights(
        W_Q=split_heads_in(W_Q, n_heads),
        W_K=split_heads_in(W_K, n_heads),
        W_V=split_heads_in(W_V, n_heads),
        W_O=split_heads_out(attn.c_proj.weight.detach(), n_heads),
        b_Q=bias_heads(b_Q, n_heads),
        b_K=bias_heads(b_K, n_heads),
        b_V=bias_heads(b_V, n_heads),
        b_O=attn.c_proj.bias.detach(),
    )


def gpt2_mlp(mlp: Any, activation: str) -> MlpView:
    """GPT-2's ``c_fc`` -> activation -> ``c_proj`` (Conv1D weights are already [in, out])."""
    return MlpView(
        W_in=mlp.c_fc.weight.detach(),
        W_gate=None,
        W_out=mlp.c_proj.weight.detach(),
        b_in=mlp.c_fc.bias.detach(),
        b_out=mlp.c_proj.bias.detach(),
        activation=activation,
        module=mlp,
    )


def build_gpt2(model: Any, tokenizer: Any, name: str, source: str) -> ModelView:
    """The view of a ``GPT2LMHeadModel`` (or a bare ``GPT2Model``)."""
    config = model.config
    base = getattr(model, "transformer", model)
    n_heads = config.n_head
    blocks = []
    for i, block in enumerate(base.h):
        blocks.append(
            BlockView(
                index=i,
                module=block,
                attention=block.attn,
                norm_attn=norm_view(block.ln_1, "layernorm"),
                norm_mlp=norm_view(block.ln_2, "layernorm"),
                placement="pre",
                heads_fn=partial(gpt2_heads, block.attn, n_heads),
                mlp_fn=partial(gpt2_mlp, block.mlp, config.activation_function),
            )
        )
    W_E = base.wte.weight.detach()
    lm_head = getattr(model, "lm_head", None)
    W_U = W_E.T if lm_head is None else lm_head.weight.detach().T
    return ModelView(
        name=name,
        family="gpt2",
        model=model,
        tokenizer=tokenizer,
        base=base,
        config=config,
        n_layers=config.n_layer,
        d_model=config.n_embd,
        n_heads=n_heads,
        n_kv_heads=n_heads,
        d_head=config.n_embd // n_heads,
        n_ctx=config.n_positions,
        W_E=W_E,
        W_pos=base.wpe.weight.detach(),
        W_U=W_U,
        final_norm=norm_view(base.ln_f, "layernorm"),
        blocks=tuple(blocks),
        position=PositionScheme(kind="learned"),
        is_encoder=False,
        source=source,
    )


GPT2 = Family(
    name="gpt2",
    model_types=("gpt2",),
    options={
        # The view assumes scores scaled by 1/sqrt(d_head), the same in every layer.
        "scale_attn_weights": one_of(True),
        "scale_attn_by_inverse_layer_idx": falsy,
        # Cross-attention blocks have no place in the view.
        "add_cross_attention": falsy,
    },
    auto_class="causal-lm",
    build=build_gpt2,
)
