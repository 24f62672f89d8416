"""``ModelView``: one read-only view of any supported model, the same for every family.

The view wraps the Hugging Face modules; it never reimplements the forward pass. Weights
are exposed in one convention: vectors are rows, so a projection is ``x @ W`` with
``W`` of shape [d_in, d_out]. Per-head weights are computed on access (grouped-query
K/V expanded to the query heads), so a view costs no memory until asked.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import torch
from torch import nn

NormKind = Literal["layernorm", "rmsnorm"]
PositionKind = Literal["learned", "rotary", "alibi", "t5-relative"]


@dataclass(frozen=True)
class NormView:
    """A LayerNorm or RMSNorm: ``module(x)`` is the model's own computation.

    Attributes:
        kind: "layernorm" (centre, then scale) or "rmsnorm" (scale only).
        weight: [d] the effective gain gamma (Gemma's ``1 + w`` already added).
        bias: [d] beta, or None.
        eps: the epsilon added to the variance.
        module: the Hugging Face module.
    """

    kind: NormKind
    weight: torch.Tensor
    bias: torch.Tensor | None
    eps: float
    module: nn.Module

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return self.module(x)


@dataclass(frozen=True)
class HeadWeights:
    """Per-head attention weights, grouped-query K/V expanded to the query heads.

    Attributes:
        W_Q, W_K, W_V: [n_heads, d, d_head].
        W_O: [n_heads, d_head, d].
        b_Q, b_K, b_V: [n_heads, d_head] or None.
        b_O: [d] or None.
    """

    W_Q: torch.Tensor
    W_K: torch.Tensor
    W_V: torch.Tensor
    W_O: torch.Tensor
    b_Q: torch.Tensor | None
    b_K: torch.Tensor | None
    b_V: torch.Tensor | None
    b_O: torch.Tensor | None


@dataclass(frozen=True)
class MlpView:
    """The feed-forward block: ``out = act(x @ W_in + b_in) [* (x @ W_gate)] @ W_out + b_out``.

    Attributes:
        W_in: [d, d_mlp]; W_gate: [d, d_mlp] for gated MLPs (the activation is applied to
            the gate: ``act(x @ W_gate) * (x @ W_in)``), else None; W_out: [d_mlp, d].
        activation: the activation's config name (e.g. "silu", "gelu").
    """

    W_in: torch.Tensor
    W_gate: torch.Tensor | None
    W_out: torch.Tensor
    b_in: torch.Tensor | None
    b_out: torch.Tensor | None
    activation: str
    module: nn.Module


@dataclass(frozen=True)
class PositionScheme:
    """How the model encodes position.

    Attributes:
        kind: "learned" (absolute embedding table), "rotary", "alibi" or "t5-relative".
        rope_theta: rotary base; rotary_dim: how many of d_head rotate.
        n_buckets, max_distance, bidirectional: T5 relative-bias bucket parameters.
        relative_bias: [n_buckets, n_heads] T5 bias table of the first block, or None.
    """

    kind: PositionKind
    rope_theta: float | None = None
    rotary_dim: int | None = None
    n_buckets: int | None = None
    max_distance: int | None = None
    bidirectional: bool | None = None
    relative_bias: torch.Tensor | None = None


@dataclass(frozen=True)
class BlockView:
    """One transformer block.

    Attributes:
        index: block number (its output is hidden-state layer ``index + 1``).
        module: the Hugging Face block; attention: its attention module.
        norm_attn, norm_mlp: the two norms around attention and MLP. For pre-norm blocks
            they normalise the input of each sub-block; for post-norm (BERT) they
            normalise the residual sum after it (``placement`` says which).
        extra_norms: other norms of the block by name (Gemma's post-attention and
            post-feed-forward norms, per-head ``q_norm``/``k_norm``).
    """

    index: int
    module: nn.Module
    attention: nn.Module
    norm_attn: NormView
    norm_mlp: NormView
    placement: Literal["pre", "post"]
    heads_fn: Callable[[], HeadWeights] = field(repr=False)
    mlp_fn: Callable[[], MlpView] = field(repr=False)
    extra_norms: dict[str, NormView] = field(default_factory=dict)

    def heads(self) -> HeadWeights:
        """Per-head W_Q/W_K/W_V/W_O (computed on each call; cache it if reused)."""
        return self.heads_fn()

    def mlp(self) -> MlpView:
        return self.mlp_fn()


@dataclass(frozen=True)
class ModelView:
    """A uniform read-only view of a loaded model.

    Attributes:
        name: what the user asked for (bundled name, HF id or path).
        family: "llama", "bert", "gpt2", "t5" or "gemma3".
        model: the full Hugging Face model; tokenizer: its tokenizer.
        base: the module whose forward produces the hidden states (no LM head).
        W_E: [vocab, d] token embedding (as stored; ``embedding_scale`` multiplies it on input).
        W_pos: [n_ctx, d] learned absolute positions, or None.
        W_U: [d, vocab] unembedding; tied: whether it is W_E^T.
        final_norm: the norm before the unembedding (None for post-norm encoders).
        embedding_norm: a norm applied to the embedding sum before block 0 (BERT), or None.
        blocks: the blocks of the main stack (T5: the encoder; see ``decoder_blocks``).
        n_ctx: the largest number of positions the model accepts (None if unbounded).
        source: where the weights were read from (a folder or GGUF file).
    """

    name: str
    family: str
    model: nn.Module
    tokenizer: Any
    base: nn.Module
    config: Any
    n_layers: int
    d_model: int
    n_heads: int
    n_kv_heads: int
    d_head: int
    n_ctx: int | None
    W_E: torch.Tensor
    W_pos: torch.Tensor | None
    W_U: torch.Tensor
    final_norm: NormView | None
    blocks: tuple[BlockView, ...]
    position: PositionScheme
    is_encoder: bool
    source: str
    embedding_scale: float = 1.0
    embedding_norm: NormView | None = None
    decoder_blocks: tuple[BlockView, ...] = ()

    @property
    def n_hidden_layers(self) -> int:
        """Hidden-state layers: the embedding output plus one per block."""
        return self.n_layers + 1

    @property
    def tied(self) -> bool:
        """Whether W_U is the same storage as W_E (tied embeddings)."""
        return self.W_U.data_ptr() == self.W_E.data_ptr()

    @property
    def device(self) -> torch.device:
        return self.W_E.device

    def describe(self) -> dict[str, Any]:
        """A JSON-able summary (for manifests and ``geomlens models``)."""
        return {
            "family": self.family,
            "n_layers": self.n_layers,
            "d_model": self.d_model,
            "n_heads": self.n_heads,
            "n_kv_heads": self.n_kv_heads,
            "d_head": self.d_head,
            "n_ctx": self.n_ctx,
            "vocab": int(self.W_E.shape[0]),
            "position": self.position.kind,
            "tied": self.tied,
            "is_encoder": self.is_encoder,
        }


def linear_in_out(module: Any) -> torch.Tensor:
    """The weight of an ``nn.Linear`` in the row convention: [d_in, d_out]."""
    return module.weight.detach().T


def split_heads_in(w: torch.Tensor, n_heads: int) -> torch.Tensor:
    """[d, n_heads * d_head] -> [n_heads, d, d_head]."""
    d, width = w.shape
    return w.reshape(d, n_heads, width // n_heads).permute(1, 0, 2)


def split_heads_out(w: torch.Tensor, n_heads: int) -> torch.Tensor:
    """[n_heads * d_head, d] -> [n_heads, d_head, d]."""
    width, d = w.shape
    return w.reshape(n_heads, width // n_heads, d)


def expand_kv(w: torch.Tensor, n_heads: int) -> torch.Tensor:
    """Repeat grouped K/V heads [n_kv, ...] so query head h reads kv head h // (n_heads/n_kv)."""
    n_kv = w.shape[0]
    return w if n_kv == n_heads else w.repeat_interleave(n_heads // n_kv, dim=0)


def bias_heads(b: torch.Tensor | None, n_heads: int) -> torch.Tensor | None:
    """[n_heads * d_head] -> [n_heads, d_head] (None stays None)."""
    return None if b is None else b.detach().reshape(n_heads, -1)


def norm_view(module: Any, kind: NormKind, eps_attr: str = "eps", offset: float = 0.0) -> NormView:
    """Build a NormView from a norm module (``offset`` = 1 for Gemma's ``1 + w`` gain)."""
    weight = module.weight.detach() + offset
    bias = getattr(module, "bias", None)
    return NormView(
        kind=kind,
        weight=weight,
        bias=None if bias is None else bias.detach(),
        eps=float(getattr(module, eps_attr)),
        module=module,
    )


def get_path(root: nn.Module, path: str) -> Any:
    """Follow a dotted attribute path ("model.layers") from a module."""
    obj: Any = root
    for part in path.split("."):
        obj = getattr(obj, part)
    return obj
