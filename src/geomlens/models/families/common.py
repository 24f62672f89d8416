"""Weight readers shared by family adapters: separate or fused Q/K/V/O, dense and gated MLPs.

Each returns the view's row convention (``x @ W``, W of shape [d_in, d_out]); grouped K/V
heads are expanded to the query heads.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from geomlens.models.families.base import AttentionSettings, Dims
from geomlens.models.view import (
    HeadWeights,
    MlpView,
    bias_heads,
    expand_kv,
    get_path,
    linear_in_out,
    split_heads_in,
    split_heads_out,
)


def bias_of(module: Any) -> torch.Tensor | None:
    b = getattr(module, "bias", None)
    return None if b is None else b.detach()


def heads_from(
    W_Q: torch.Tensor,
    W_K: torch.Tensor,
    W_V: torch.Tensor,
    W_O: torch.Tensor,
    biases: tuple[Any, Any, Any, Any],
    dims: Dims,
) -> HeadWeights:
    """Per-head weights from [d, H*dh] / [d, kv*dh] / [H*dh, d] matrices and flat biases."""
    H, kv = dims.n_heads, dims.n_kv_heads
    b_Q, b_K, b_V, b_O = biases

    def kv_bias(b: Any) -> Any:
        return None if b is None else expand_kv(bias_heads(b, kv), H)  # type: ignore[arg-type]

    return HeadWeights(
        W_Q=split_heads_in(W_Q, H),
        W_K=expand_kv(split_heads_in(W_K, kv), H),
        W_V=expand_kv(split_heads_in(W_V, kv), H),
        W_O=split_heads_out(W_O, H),
        b_Q=bias_heads(b_Q, H),
        b_K=kv_bias(b_K),
        b_V=kv_bias(b_V),
        b_O=b_O,
    )


def separate_heads(
    q: str = "q_proj", k: str = "k_proj", v: str = "v_proj", o: str = "o_proj"
) -> Callable[[Any, Dims], HeadWeights]:
    """Heads of an attention module with one ``nn.Linear`` per projection."""

    def heads(attn: Any, dims: Dims) -> HeadWeights:
        mq, mk, mv, mo = (get_path(attn, p) for p in (q, k, v, o))
        W = [linear_in_out(m) for m in (mq, mk, mv, mo)]
        biases = (bias_of(mq), bias_of(mk), bias_of(mv), bias_of(mo))
        return heads_from(W[0], W[1], W[2], W[3], biases, dims)

    return heads


def split_fused(
    w: torch.Tensor, b: torch.Tensor | None, layout: str, dims: Dims
) -> tuple[Any, ...]:
    """Split a fused QKV [d, width] (and bias) into Q, K, V matrices and biases.

    Layouts: "contiguous" (all of Q, then K, then V; GPT-2, Phi-3), "per-head" (head by
    head, [q_h, k_h, v_h]; GPT-NeoX, BLOOM), "grouped" (per KV group: its queries, then
    one K and one V; Falcon's new architecture), "codegen" (four model-parallel shards,
    each [q, v, k] of a quarter of the width; CodeGen).
    """
    H, kv, dh = dims.n_heads, dims.n_kv_heads, dims.d_head
    d = w.shape[0]
    cols = torch.arange(w.shape[1])
    if layout == "contiguous":
        q_idx, k_idx, v_idx = cols[: H * dh], cols[H * dh : (H + kv) * dh], cols[(H + kv) * dh :]
    elif layout == "per-head":
        grid = cols.reshape(H, 3, dh)
        q_idx, k_idx, v_idx = (grid[:, i].reshape(-1) for i in range(3))
    elif layout == "grouped":
        grid = cols.reshape(kv, H // kv + 2, dh)
        q_idx = grid[:, :-2].reshape(-1)
        k_idx, v_idx = grid[:, -2].reshape(-1), grid[:, -1].reshape(-1)
    elif layout == "codegen":
        grid = cols.reshape(4, 3, -1)
        q_idx, v_idx, k_idx = (grid[:, i].reshape(-1) for i in range(3))
    else:
        raise ValueError(f"unknown fused layout {layout!r}")
    assert w.shape == (d, len(q_idx) + len(k_idx) + len(v_idx))
    mats = tuple(w[:, i] for i in (q_idx, k_idx, v_idx))
    biases = (None, None, None) if b is None else tuple(b[i] for i in (q_idx, k_idx, v_idx))
    return mats + biases


def fused_heads(qkv: str, o: str, layout: str) -> Callable[[Any, Dims], HeadWeights]:
    """Heads of an attention module with one fused ``nn.Linear`` for Q, K and V."""

    def heads(attn: Any, dims: Dims) -> HeadWeights:
        fused, out = get_path(attn, qkv), get_path(attn, o)
        W_Q, W_K, W_V, b_Q, b_K, b_V = split_fused(
            linear_in_out(fused), bias_of(fused), layout, dims
        )
        return heads_from(W_Q, W_K, W_V, linear_in_out(out), (b_Q, b_K, b_V, bias_of(out)), dims)

    return heads


def activation_of(config: Any) -> str:
    for name in (
        "hidden_act",
        "hidden_activation",
        "activation_function",
        "dense_act_fn",
        "activation",
    ):
        value = getattr(config, name, None)
        if isinstance(value, str):
            return value
    raise AttributeError("config names no activation")


def gated_mlp(
    gate: str = "gate_proj", up: str = "up_proj", down: str = "down_proj"
) -> Callable[..., MlpView]:
    """``act(x W_gate) * (x W_in)`` then ``W_out`` (Llama naming by default)."""

    def mlp_view(mlp: Any, config: Any, layer: Any = None) -> MlpView:
        g, u, o = (get_path(mlp, p) for p in (gate, up, down))
        return MlpView(
            W_in=linear_in_out(u),
            W_gate=linear_in_out(g),
            W_out=linear_in_out(o),
            b_in=bias_of(u),
            b_out=bias_of(o),
            activation=activation_of(config),
            module=mlp,
        )

    return mlp_view


def dense_mlp(
    fc_in: str, fc_out: str, conv1d: bool = False, activation: str | None = None
) -> Callable[..., MlpView]:
    """``act(x W_in + b_in) W_out + b_out``; ``conv1d``: GPT-2's weights already [in, out];
    ``activation``: a fixed activation name for configs that name none (BLOOM)."""

    def weight(m: Any) -> torch.Tensor:
        return m.weight.detach() if conv1d else linear_in_out(m)

    def mlp_view(mlp: Any, config: Any, layer: Any = None) -> MlpView:
        i, o = get_path(mlp, fc_in), get_path(mlp, fc_out)
        return MlpView(
            W_in=weight(i),
            W_gate=None,
            W_out=weight(o),
            b_in=bias_of(i),
            b_out=bias_of(o),
            activation=activation or activation_of(config),
            module=mlp,
        )

    return mlp_view


def config_window(config: Any, dims: Dims, index: int, attention: Any) -> AttentionSettings:
    """The config's one sliding window, in every layer (Mistral, Mixtral, Phi-3)."""
    return AttentionSettings(window=getattr(config, "sliding_window", None))


def module_window(config: Any, dims: Dims, index: int, attention: Any) -> AttentionSettings:
    """The attention module's own sliding window (None on full-attention layers)."""
    return AttentionSettings(window=getattr(attention, "sliding_window", None))


def across_heads(norm: Any, x: torch.Tensor, n: int, layout: str = "heads") -> torch.Tensor:
    """Apply a q/k ``norm`` to the n distinct heads of x [B, H, T, dh] (grouped-query K
    expanded to H heads), then expand back.

    Layouts of the norm's input: "heads" ([B, n, T, dh], Hugging Face's transposed heads;
    a per-head weight applies head by head), "tokens" ([B, T, n, dh]: Cohere's), "joined"
    ([B, T, n * dh]: one norm over all heads, OLMo 2's).
    """
    group = x.shape[1] // n
    x = x[:, ::group]  # one copy of each grouped K/V head
    B, _, T, dh = x.shape
    if layout == "heads":
        y = norm(x)
    elif layout == "tokens":
        y = norm(x.transpose(1, 2)).transpose(1, 2)
    elif layout == "joined":
        y = norm(x.transpose(1, 2).reshape(B, T, n * dh)).reshape(B, T, n, dh).transpose(1, 2)
    else:
        raise ValueError(f"unknown q/k norm layout {layout!r}")
    return y.repeat_interleave(group, dim=1)


def qk_norms(q: str = "q_norm", k: str = "k_norm", layout: str = "heads") -> Any:
    """Settings with the attention module's q/k norms (paths ``q``, ``k``), applied as the
    model applies them (``across_heads``)."""

    def settings(config: Any, dims: Dims, index: int, attention: Any) -> AttentionSettings:
        qn, kn, H, kv = (
            get_path(attention, q),
            get_path(attention, k),
            dims.n_heads,
            dims.n_kv_heads,
        )
        return AttentionSettings(
            qk_norm=lambda x, y: (across_heads(qn, x, H, layout), across_heads(kn, y, kv, layout))
        )

    return settings
