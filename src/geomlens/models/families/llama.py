"""Llama family (SmolLM2): pre-RMSNorm blocks, rotary positions, grouped-query attention."""

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
    expand_kv,
    linear_in_out,
    norm_view,
    split_heads_in,
    split_heads_out,
)


def rope_settings(config: Any) -> dict[str, Any]:
    """The rotary parameters, from ``rope_parameters`` (transformers 5) or ``rope_scaling``."""
    params = dict(getattr(config, "rope_parameters", None) or {})
    scaling = getattr(config, "rope_scaling", None) or {}
    params.setdefault("rope_type", scaling.get("rope_type", scaling.get("type", "default")))
    params.setdefault("rope_theta", getattr(config, "rope_theta", 10000.0))
    return params


def default_rope(value: Any) -> str | None:
    """Accept ``rope_parameters``/``rope_scaling`` only without scaling (rope_type default)."""
    value = value or {}
    kind = value.get("rope_type", value.get("type", "default"))
    return None if kind == "default" else "handled: rope_type 'default' (no rope scaling)"


def attention_heads(attn: Any, n_heads: int, n_kv: int) -> HeadWeights:
    """Per-head weights of q/k/v/o ``nn.Linear`` projections (Llama/Gemma naming)."""

    def bias(linear: Any) -> Any:
        return None if linear.bias is None else linear.bias.detach()

    return HeadWeights(
        W_Q=split_heads_in(linear_in_out(attn.q_proj), n_heads),
        W_K=expand_kv(split_heads_in(linear_in_out(attn.k_proj), n_kv), n_heads),
        W_V=expand_kv(split_heads_in(linear_in_out(attn.v_proj), n_kv), n_heads),
        W_O=split_heads_out(linear_in_out(attn.o_proj), n_heads),
        b_Q=bias_heads(bias(attn.q_proj), n_heads),
        b_K=_expand_bias(bias_heads(bias(attn.k_proj), n_kv), n_heads),
        b_V=_expand_bias(bias_heads(bias(attn.v_proj), n_kv), n_heads),
        b_O=bias(attn.o_proj),
    )


def _expand_bias(b: Any, n_heads: int) -> Any:
    return None if b is None else expand_kv(b, n_heads)


def gated_mlp(mlp: Any, activation: str) -> MlpView:
    """A gated MLP with gate_proj/up_proj/down_proj (Llama/Gemma naming)."""

    def bias(linear: Any) -> Any:
        return None if linear.bias is None else linear.bias.detach()

    return MlpView(
        W_in=linear_in_out(mlp.up_proj),
        W_gate=linear_in_out(mlp.gate_proj),
        W_out=linear_in_out(mlp.down_proj),
        b_in=bias(mlp.up_proj),
        b_out=bias(mlp.down_proj),
        activation=activation,
        module=mlp,
    )


def build_llama(model: Any, tokenizer: Any, name: str, source: str) -> ModelView:
    config = model.config
    base = model.model
    n_heads, n_kv = config.num_attention_heads, config.num_key_value_heads
    d_head = getattr(config, "head_dim", None) or config.hidden_size // n_heads
    blocks = []
    for i, layer in enumerate(base.layers):
        blocks.append(
            BlockView(
                index=i,
                module=layer,
                attention=layer.self_attn,
                norm_attn=norm_view(layer.input_layernorm, "rmsnorm", "variance_epsilon"),
                norm_mlp=norm_view(layer.post_attention_layernorm, "rmsnorm", "variance_epsilon"),
                placement="pre",
                heads_fn=partial(attention_heads, layer.self_attn, n_heads, n_kv),
                mlp_fn=partial(gated_mlp, layer.mlp, config.hidden_act),
            )
        )
    rope = rope_settings(config)
    W_E = base.embed_tokens.weight.detach()
    W_U = model.lm_head.weight.detach().T
    return ModelView(
        name=name,
        family="llama",
        model=model,
        tokenizer=tokenizer,
        base=base,
        config=config,
        n_layers=config.num_hidden_layers,
        d_model=config.hidden_size,
        n_heads=n_heads,
        n_kv_heads=n_kv,
        d_head=d_head,
        n_ctx=config.max_position_embeddings,
        W_E=W_E,
        W_pos=None,
        W_U=W_U,
        final_norm=norm_view(base.norm, "rmsnorm", "variance_epsilon"),
        blocks=tuple(blocks),
        position=PositionScheme(
            kind="rotary",
            rope_theta=float(rope["rope_theta"]),
            rotary_dim=int(d_head * rope.get("partial_rotary_factor", 1.0)),
        ),
        is_encoder=False,
        source=source,
    )


LLAMA = Family(
    name="llama",
    model_types=("llama",),
    options={
        "rope_parameters": default_rope,
        "rope_scaling": default_rope,
        "pretraining_tp": one_of(1, None),
        "attention_dropout": one_of(0.0, 0),
        "sliding_window": falsy,
        "mlp_bias": falsy,
    },
    auto_class="causal-lm",
    build=build_llama,
)
