"""``ModelView``: one read-only view of any supported model, the same for every family.

The view wraps the Hugging Face modules; it never reimplements the forward pass. Weights
are exposed in one convention: vectors are rows, so a projection is ``x @ W`` with
``W`` of shape [d_in, d_out]. Per-head weights are computed on access (grouped-query
K/V expanded to the query heads), so a view costs no memory until asked.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import torch
from torch import nn

from geomlens.errors import GeomlensError
from geomlens.models.threads import forward_lock

NormKind = Literal["layernorm", "rmsnorm", "identity"]
PositionKind = Literal["learned", "sinusoidal", "rotary", "alibi", "t5-relative", "not modelled"]
Tier = Literal["full", "hidden-state"]
"""How much of a model the view reads: ``full`` (a declared family: every weight, checked
block by block) or ``hidden-state`` (``models.hidden_tier``: embeddings, the residual
stream, the final norm where found, and the readout; no block's mixing is modelled)."""


@dataclass(frozen=True)
class NormView:
    """A LayerNorm or RMSNorm: ``module(x)`` is the model's own computation.

    Attributes:
        kind: "layernorm" (centre, then scale), "rmsnorm" (scale only) or "identity" (no
            norm where a layout has one: ModernBERT's first block reads the normalised
            embedding as it is; ``BlockView`` reports such a norm as absent).
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
    """The feed-forward block as ``out = coefficients(x) @ W_out + b_out``.

    A dense MLP has ``coefficients(x) = act(x @ W_gate) * (x @ W_in + b_in)`` when gated
    (the activation applies to the gate) and ``act(x @ W_in + b_in)`` otherwise. A mixture
    of experts is the same shape, wider: its coefficients are every expert's coefficients,
    each multiplied by the router's weight for that expert (zero where it is not chosen), and
    ``W_out`` stacks the experts' output rows, so each row of ``W_out`` is one sub-update.
    An expert with an output bias (GPT-OSS) adds one more coefficient, its router weight,
    whose row of ``W_out`` is that bias. Where the router scales the experts' inputs instead
    (``scale_inputs``: Llama 4), expert e's coefficients are those of ``weight_e * x``.

    Attributes:
        W_in: [d, d_mlp]; W_gate: [d, d_mlp] or None; W_out: [d_mlp, d] (MoE: the experts'
            rows, each expert's output bias as one more row).
        b_in: [d_mlp] or None; b_out: [d] or None.
        activation: the activation's config name (e.g. "silu", "gelu").
        module: the Hugging Face MLP (or MoE) module; its first input is ``x``.
        experts: for a mixture of experts, one dense ``MlpView`` per expert; else ().
        router: for a mixture of experts, ``x [..., d] -> weights [..., E]``; else None.
        b_gate: [d_mlp] the gate projection's bias, or None.
        glu: (gate, up) -> coefficients, replacing ``act(gate) * up`` for a gated unit
            that is not one activation times the up projection (GPT-OSS's clamped SwiGLU
            ``(clamp(up) + 1) * g * sigmoid(alpha * g)``, ``g = clamp(gate)``), or None.
        scale_inputs: a mixture whose router weights multiply each expert's input, not its
            coefficients (Llama 4).
    """

    W_in: torch.Tensor | None
    W_gate: torch.Tensor | None
    W_out: torch.Tensor
    b_in: torch.Tensor | None
    b_out: torch.Tensor | None
    activation: str
    module: nn.Module
    experts: tuple[MlpView, ...] = ()
    router: Callable[[torch.Tensor], torch.Tensor] | None = field(default=None, repr=False)
    b_gate: torch.Tensor | None = None
    glu: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None = field(
        default=None, repr=False
    )
    scale_inputs: bool = False

    def coefficients(self, x: torch.Tensor) -> torch.Tensor:
        """The weights of the rows of ``W_out``: [..., d] -> [..., d_mlp] (MoE: every
        expert's, plus one per expert output bias)."""
        if self.router is not None:
            weights = self.router(x)
            parts = []
            for i, e in enumerate(self.experts):
                w = weights[..., i, None]
                if self.scale_inputs:
                    parts.append(e.coefficients(x * w.to(x.dtype)))
                else:
                    parts.append(e.coefficients(x) * w)
                if e.b_out is not None:
                    parts.append(w.to(parts[-1].dtype))
            return torch.cat(parts, dim=-1)
        assert self.W_in is not None
        x = x.to(self.W_in.dtype)
        up = x @ self.W_in
        if self.b_in is not None:
            up = up + self.b_in
        if self.W_gate is None:
            from transformers.activations import ACT2FN  # on first use: keeps imports light

            return ACT2FN[self.activation](up)
        gate = x @ self.W_gate
        if self.b_gate is not None:
            gate = gate + self.b_gate
        if self.glu is not None:
            return self.glu(gate, up)
        from transformers.activations import ACT2FN

        return ACT2FN[self.activation](gate) * up

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        """The MLP's contribution to the residual stream (before any output norm)."""
        out = self.coefficients(x) @ self.W_out
        return out if self.b_out is None else out + self.b_out


@dataclass(frozen=True)
class PositionScheme:
    """How the model encodes position.

    Attributes:
        kind: "learned" (absolute embedding table), "sinusoidal" (a fixed absolute table:
            XGLM, DistilBERT's option), "rotary", "alibi" or "t5-relative".
        rope_theta: rotary base; rotary_dim: how many of d_head rotate; rope_type: Hugging
        Face's rope type ("default", "linear", "yarn", "longrope", "llama3", ...).
        n_buckets, max_distance, bidirectional: T5 relative-bias bucket parameters.
        relative_bias: [n_buckets, n_heads] T5 bias table of the first block, or None.
    """

    kind: PositionKind
    rope_theta: float | None = None
    rotary_dim: int | None = None
    rope_type: str | None = None
    n_buckets: int | None = None
    max_distance: int | None = None
    bidirectional: bool | None = None
    relative_bias: torch.Tensor | None = None


@dataclass(frozen=True)
class Rotary:
    """Rotary position embedding of one block, applied to the first ``dim`` of each head.

    The frequencies are Hugging Face's own (read from the model's rotary module, which
    computes them with transformers' rope initialisation functions for every rope type);
    the view never derives them from a formula of its own. Angles are ``position *
    inv_freq`` in float32, as Hugging Face computes them; cos and sin are multiplied by
    ``attention_scaling`` (YaRN's and LongRoPE's mscale, 1 otherwise).

    Attributes:
        inv_freq: [dim / 2] float32 inverse frequencies (pair m turns by inv_freq[m] per
            position); ``dim = 2 * len(inv_freq)`` of each head rotates.
        attention_scaling: the factor on cos and sin (so q . k over the rotated dimensions
            is multiplied by its square).
        interleaved: pairs (2m, 2m+1) rotate together (GPT-J, Cohere) instead of
            (m, m + dim/2) (Hugging Face's ``rotate_half``, used by Llama and most others).
        rope_type: Hugging Face's rope type ("default", "linear", "yarn", "llama3", ...).
        theta: the rope base the config names (shown to users; the frequencies are
            ``inv_freq``).
        by_length: for rope types whose frequencies depend on the sequence length
            ("longrope", "dynamic"): length -> the Rotary Hugging Face uses for inputs of
            that many positions (it refuses lengths whose numbers it cannot reproduce);
            None when the frequencies are the same at every length.
    """

    inv_freq: torch.Tensor = field(repr=False)
    attention_scaling: float = 1.0
    interleaved: bool = False
    rope_type: str = "default"
    theta: float | None = None
    by_length: Callable[[int], Rotary] | None = field(default=None, repr=False, compare=False)

    @property
    def dim(self) -> int:
        """How many dimensions of each head rotate."""
        return 2 * int(self.inv_freq.shape[0])

    def at(self, length: int | None) -> Rotary:
        """The rotary Hugging Face applies to an input of ``length`` positions (itself for
        length-independent rope types, or when ``length`` is None: the model's frequencies
        as initialised, which hold for inputs within its original context)."""
        if self.by_length is None or length is None:
            return self
        return self.by_length(length)

    def _angles(self, positions: torch.Tensor) -> torch.Tensor:
        """[T] positions -> [T, dim/2] float64 angles, multiplied in float32 as HF does."""
        inv = self.inv_freq.detach().float().cpu()
        return (positions.float()[:, None] * inv[None, :]).double()

    def _pairs(self) -> tuple[torch.Tensor, torch.Tensor]:
        m = torch.arange(self.dim // 2)
        return (2 * m, 2 * m + 1) if self.interleaved else (m, m + self.dim // 2)

    def rotation(self, d_head: int, offset: int, length: int | None = None) -> torch.Tensor:
        """[d_head, d_head] float64 R with rope(q, i) . rope(k, j) = q R k^T for i - j =
        offset, in an input of ``length`` positions (see ``at``); the rotated block carries
        ``attention_scaling ** 2``."""
        rotary = self.at(length)
        ang = rotary._angles(torch.tensor([offset]))[0]
        a, b = rotary._pairs()
        R = torch.eye(d_head, dtype=torch.float64)
        s2 = rotary.attention_scaling**2
        c, s = torch.cos(ang) * s2, torch.sin(ang) * s2
        R[a, a], R[b, b] = c, c
        R[a, b], R[b, a] = s, -s
        return R

    def apply(self, x: torch.Tensor, start: int = 0) -> torch.Tensor:
        """Rotate ``x`` [..., T, d_head] as positions start..start+T-1 (same dtype), with
        the frequencies of an input of ``start + T`` positions."""
        T = x.shape[-2]
        rotary = self.at(start + T)
        ang = rotary._angles(torch.arange(start, start + T)).to(x.device)
        scale = rotary.attention_scaling
        cos = (torch.cos(ang).float() * scale).to(x.dtype)
        sin = (torch.sin(ang).float() * scale).to(x.dtype)
        a, b = rotary._pairs()
        a, b = a.to(x.device), b.to(x.device)
        xa, xb = x[..., a], x[..., b]
        out = x.clone()
        out[..., a] = xa * cos - xb * sin
        out[..., b] = xb * cos + xa * sin
        return out


@dataclass(frozen=True)
class AttentionView:
    """How one block's attention turns its (normalised) input into scores, from view weights.

    ``scores(x)`` are the pre-softmax, pre-mask scores ``softcap(scale * q . k + bias)``;
    ``probabilities(x)`` apply the mask (causal, sliding window, chunks) and the softmax
    (with the heads' sink logits, where the model has them). Both are
    checked against Hugging Face's own attention weights for every family (tests).

    Attributes:
        module: the Hugging Face attention module.
        value_in: a module whose first input is the value projection's input X.
        output: the output projection; its output is O = sum_h A_h X W_vo,h + b_O.
        heads_fn: -> per-head weights (GQA expanded).
        scale: the factor q . k is multiplied by.
        causal: whether keys after the query are masked.
        window: sliding-window width (keys with i - j >= window masked), or None.
        softcap: logit soft-capping ``c * tanh(s / c)``, or None.
        rotary: the rotary embedding, or None.
        qk_norm: a norm applied to the projected queries and keys (q_norm, k_norm) as the
            model applies it (per head or over all heads), or None. It makes q . k
            nonlinear in the input.
        bias_fn: T -> [H, T, T] additive score bias by position (ALiBi, T5 buckets), or None.
        query_scale: T -> [T] factors multiplying the scores of query positions 0..T-1 (a
            per-position temperature on the queries: Llama 4's NoPE layers), or None. The
            scores stay bilinear in the input for each query position.
        chunk: chunked attention: a query attends only to keys of its own block of
            ``chunk`` positions (i // chunk == j // chunk; Llama 4), or None.
        sinks: [H] a per-head sink logit (GPT-OSS): one more softmax column per query that
            takes probability mass but adds no value, so the probabilities over the real
            keys sum to less than 1; or None.
    """

    module: nn.Module
    value_in: nn.Module
    output: nn.Module
    heads_fn: Callable[[], HeadWeights] = field(repr=False)
    scale: float
    causal: bool
    window: int | None = None
    softcap: float | None = None
    rotary: Rotary | None = None
    qk_norm: Callable[[torch.Tensor, torch.Tensor], tuple[torch.Tensor, torch.Tensor]] | None = (
        field(default=None, repr=False)
    )
    bias_fn: Callable[[int], torch.Tensor] | None = field(default=None, repr=False)
    query_scale: Callable[[int], torch.Tensor] | None = field(default=None, repr=False)
    chunk: int | None = None
    sinks: torch.Tensor | None = field(default=None, repr=False)

    def heads(self) -> HeadWeights:
        return self.heads_fn()

    @property
    def linear_qk(self) -> bool:
        """Whether q and k are affine in the block's normalised input (no q/k norms)."""
        return self.qk_norm is None

    def project_qk(
        self, x: torch.Tensor, heads: HeadWeights | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Queries and keys before rotation: [B, T, d] -> two [B, H, T, d_head] (x's dtype)."""
        w = heads or self.heads()

        def project(W: torch.Tensor, b: torch.Tensor | None) -> torch.Tensor:
            out = torch.einsum("btd,hde->bhte", x, W.to(x.dtype))
            return out if b is None else out + b.to(x.dtype)[None, :, None, :]

        q, k = project(w.W_Q, w.b_Q), project(w.W_K, w.b_K)
        if self.qk_norm is not None:
            q, k = self.qk_norm(q, k)
        return q, k

    def rotate(self, q: torch.Tensor, k: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Rotary applied to queries and keys [..., T, d_head] at positions 0..T-1."""
        if self.rotary is None:
            return q, k
        return self.rotary.apply(q), self.rotary.apply(k)

    def bias(self, length: int) -> torch.Tensor | None:
        """[H, T, T] additive position bias (relative form), or None."""
        return None if self.bias_fn is None else self.bias_fn(length)

    def finish_scores(self, dots: torch.Tensor) -> torch.Tensor:
        """From rotated q . k [..., H, T, T] to the scores: scale (and the query positions'
        ``query_scale``), position bias, soft-cap."""
        s = dots * self.scale
        if self.query_scale is not None:
            s = s * self.query_scale(dots.shape[-2]).to(s.device, s.dtype)[:, None]
        b = self.bias(dots.shape[-1])
        if b is not None:
            s = s + b.to(s.device, s.dtype)
        if self.softcap is not None:
            s = self.softcap * torch.tanh(s / self.softcap)
        return s

    def scores(self, x: torch.Tensor, heads: HeadWeights | None = None) -> torch.Tensor:
        """[B, T, d] normalised input -> [B, H, T, T] pre-softmax, pre-mask scores
        (``heads``: the block's weights, if already at hand)."""
        q, k = self.rotate(*self.project_qk(x, heads))
        return self.finish_scores(q @ k.transpose(-1, -2))

    def mask(self, length: int) -> torch.Tensor:
        """[T, T] bool: which (query, key) pairs attend."""
        i, j = torch.arange(length)[:, None], torch.arange(length)[None, :]
        allowed = torch.ones(length, length, dtype=torch.bool)
        if self.causal:
            allowed &= j <= i
        if self.window is not None:
            allowed &= (i - j < self.window) & (j - i < self.window)
        if self.chunk is not None:
            allowed &= i // self.chunk == j // self.chunk
        return allowed

    def probabilities(self, x: torch.Tensor, heads: HeadWeights | None = None) -> torch.Tensor:
        """[B, T, d] normalised input -> [B, H, T, T] attention probabilities (with
        ``sinks``, the softmax includes each head's sink column, then drops it)."""
        s = self.scores(x, heads)
        allowed = self.mask(s.shape[-1]).to(s.device)
        s = s.masked_fill(~allowed, float("-inf"))
        if self.sinks is None:
            return s.softmax(-1)
        sink = self.sinks.to(s.device, s.dtype)[:, None, None].expand(*s.shape[:-1], 1)
        return torch.cat([s, sink], dim=-1).softmax(-1)[..., :-1]


@dataclass(frozen=True)
class FactorisedEmbedding:
    """An embedding narrower than the model, normalised at its own width and then projected
    (ALBERT, ELECTRA-small): block 0 reads, for token ``i`` at position ``t``,

        ``norm(tokens[i] * scale + positions[t] + token_type) @ W + b``.

    The norm sits between the position and the projection, so no [vocab, d] table plus a
    position table gives this sum; ``ModelView.block_input`` computes it exactly.

    Attributes:
        tokens: [vocab, e] the token table as stored; scale: its factor.
        positions: [n_ctx, e] learned positions (row t = position t), or None.
        token_type: [e] the row of token type 0 (added to every token), or None.
        norm: the norm at width ``e``, or None.
        W: [e, d] the projection (row convention); b: [d] its bias, or None.
    """

    tokens: torch.Tensor = field(repr=False)
    scale: float
    positions: torch.Tensor | None = field(repr=False)
    token_type: torch.Tensor | None = field(repr=False)
    norm: NormView | None
    W: torch.Tensor = field(repr=False)
    b: torch.Tensor | None = field(repr=False)

    def __call__(self, ids: torch.Tensor, positions: torch.Tensor | None = None) -> torch.Tensor:
        """[...] token ids (and their [...] positions, or none) -> [..., d] block-0 input."""
        x = self.tokens[ids] * self.scale if self.scale != 1.0 else self.tokens[ids]
        if self.token_type is not None:
            x = x + self.token_type
        if positions is not None and self.positions is not None:
            x = x + self.positions[positions]
        if self.norm is not None:
            x = self.norm(x)
        x = x @ self.W
        return x if self.b is None else x + self.b


Layout = Literal["pre", "post", "parallel", "sandwich", "post-sublayer"]
"""Where a block's norms sit.

- ``pre``: ``h + Attn(N1 h)``, then ``+ MLP(N2 .)``.
- ``post``: ``N1(h + Attn h)``, then ``N2(. + MLP .)`` (BERT).
- ``parallel``: ``h + Attn(N1 h) + MLP(N2 h)``; N2 may be the same norm as N1 (GPT-J).
- ``sandwich``: pre, and each sub-block's output is normalised again before it joins the
  residual (``extra_norms["post_attn"]``, ``["post_mlp"]``; Gemma 2 and 3).
- ``post-sublayer``: ``h + N1(Attn h)``, then ``+ N2(MLP .)`` (OLMo 2).
"""


@dataclass(frozen=True)
class BlockView:
    """One transformer block.

    Attributes:
        index: block number (its output is hidden-state layer ``index + 1``).
        module: the Hugging Face block; attention: its attention module.
        norm_attn, norm_mlp: the norms of the attention and MLP sub-blocks; ``layout``
            says where they sit (``attn_input_norm``/``mlp_input_norm`` give the norm, if
            any, that the sub-block's input passes through).
        layout: see ``Layout``.
        attn: scores, probabilities, rotary and hook sites of the attention, from the view.
        extra_norms: other norms of the block by name (sandwich output norms
            ``post_attn``/``post_mlp``, q/k norms ``q_norm``/``k_norm``, T5's ``final``,
            an encoder-decoder's ``cross_attn``).
        residual_scale: the factor each sub-block's output is multiplied by before it joins
            the residual stream (Granite's ``residual_multiplier``; 1 elsewhere).
        mixing: None where the block's token mixing is the bilinear softmax attention
            ``attn`` describes; else why it is not modelled ("mixes tokens by a state-space
            scan, not a bilinear softmax attention"): ``attn``, ``heads()``, ``mlp()`` and
            the norms are then placeholders that no analysis may read.
    """

    index: int
    module: nn.Module
    attention: nn.Module
    norm_attn: NormView
    norm_mlp: NormView
    layout: Layout
    attn: AttentionView
    mlp_fn: Callable[[], MlpView] = field(repr=False)
    extra_norms: dict[str, NormView] = field(default_factory=dict)
    residual_scale: float = 1.0
    mixing: str | None = None

    @property
    def placement(self) -> Literal["pre", "post"]:
        """ "pre" when the attention input is normalised inside the block, else "post"."""
        return "pre" if self.layout in ("pre", "parallel", "sandwich") else "post"

    @property
    def attn_input_norm(self) -> NormView | None:
        """The norm the attention's input passes through inside the block, or None."""
        pre = self.placement == "pre" and self.norm_attn.kind != "identity"
        return self.norm_attn if pre else None

    @property
    def mlp_input_norm(self) -> NormView | None:
        """The norm the MLP's input passes through inside the block, or None."""
        pre = self.placement == "pre" and self.norm_mlp.kind != "identity"
        return self.norm_mlp if pre else None

    def heads(self) -> HeadWeights:
        """Per-head W_Q/W_K/W_V/W_O (computed on each call; cache it if reused)."""
        return self.attn.heads()

    def mlp(self) -> MlpView:
        return self.mlp_fn()


@dataclass(frozen=True)
class DecoderBlockView(BlockView):
    """A decoder block of an encoder-decoder: its self-attention as in ``BlockView``, plus
    cross-attention.

    Attributes:
        cross_attention: the cross-attention module (queries from the decoder, keys and
            values from the encoder output); its norm is ``extra_norms["cross_attn"]`` (before
            it in pre-norm layouts, after its residual in post-norm ones). Its scores are
            ``attn.scale * q . k`` with no position bias.
    """

    cross_attention: nn.Module | None = None
    cross_heads_fn: Callable[[], HeadWeights] | None = field(default=None, repr=False)

    def cross_heads(self) -> HeadWeights:
        """Per-head W_Q/W_K/W_V/W_O of the cross-attention (W_K, W_V read the encoder output)."""
        if self.cross_heads_fn is None:
            raise GeomlensError(f"decoder block {self.index} has no cross-attention.")
        return self.cross_heads_fn()


@dataclass(frozen=True)
class ModelView:
    """A uniform read-only view of a loaded model.

    Attributes:
        name: what the user asked for (bundled name, HF id or path).
        family: the family adapter's name (``geomlens models --families`` lists them).
        model: the full Hugging Face model; tokenizer: its tokenizer.
        base: the module whose forward produces the hidden states (no LM head).
        W_E: [vocab, d] each token's part of block 0's input: the token table as stored,
            plus token type 0's row where the model adds one (BERT and its kin); for a
            factorised embedding (``factorised``), the token's whole block-0 input without a
            position. ``embedding_scale`` multiplies it on input.
        W_pos: [n_ctx, d] learned absolute positions (row t is position t, any table offset
            already removed), or None (also for a factorised embedding, whose positions are
            added before its norm).
        W_U: [d, vocab] unembedding; tied: whether it is W_E^T or the stored token table's
            transpose (an encoder without a language-model head reads with the token
            table as stored, which BERT's masked-LM decoder shares; with a factorised
            embedding, with W_E^T). ``unembed`` adds ``b_U``, the decoder-output scale and
            the final soft-capping where the model has them.
        head_transform: the language-model head's own module between the readout norm and
            W_U (a BERT-style dense, activation and norm), or None; ``unembed`` calls it
            first (the hidden-state tier finds it; no declared family has one).
        final_norm: the norm before the unembedding (None for post-norm encoders).
        embedding_norm: a norm applied to the embedding sum before block 0 (BERT), or None.
            Block 0 reads ``embedding_norm(W_E[i] * embedding_scale + W_pos[t])``
            (``block_input``).
        factorised: a narrower embedding normalised and projected before block 0 (ALBERT,
            ELECTRA-small), or None.
        blocks: the blocks of the main stack (T5: the encoder; see ``decoder_blocks``).
        n_ctx: the largest number of positions the model accepts (None if unbounded).
        source: where the weights were read from (a folder or GGUF file).
        encoder_final_norm: for encoder-decoders, the encoder stack's final norm (the
            view's ``final_norm`` is the decoder's), else None.
        decoder_start_token_id: for encoder-decoders, the decoder's first input token.
        load_check: what the on-load check measured (``models.check.LoadCheck``), for a
            view made by ``load_model``; None for a view built directly.
        tier: "full" (a declared family) or "hidden-state" (``models.hidden_tier``).
        input_fn: for the hidden-state tier, ``ids [..., T] -> [..., T, d]`` the input
            Hugging Face's block 0 receives (read from the model's own forward pass);
            None where ``block_input`` builds it from the declared embedding.
        identity: for a view made by ``load_model``, what it remembers of its weights
            (``models.identity.HeldIdentity``): whether it was given in memory and the
            weights' hash at load, which tells an edited view from its files; else None.
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
    b_U: torch.Tensor | None = None
    unembedding_scale: float = 1.0
    logit_softcap: float | None = None
    head_transform: Callable[[torch.Tensor], torch.Tensor] | None = field(
        default=None, repr=False, compare=False
    )
    encoder_final_norm: NormView | None = None
    decoder_start_token_id: int | None = None
    factorised: FactorisedEmbedding | None = None
    load_check: Any = field(default=None, repr=False, compare=False)
    tier: Tier = "full"
    input_fn: Callable[[torch.Tensor], torch.Tensor] | None = field(
        default=None, repr=False, compare=False
    )
    identity: Any = field(default=None, repr=False, compare=False)

    def block_input(self, ids: torch.Tensor, positions: torch.Tensor | None = None) -> torch.Tensor:
        """The exact input of block 0 (hidden-state layer 0) for token ids at positions.

        Args:
            ids: [..., T] token ids.
            positions: [T] or [..., T] position indices (0 = the first token, any table
                offset already removed); None: 0..T-1.

        Returns:
            [..., T, d] in the weights' dtype: everything the model adds before block 0
            (token table, token type 0, scale, learned positions, embedding norm or the
            factorised embedding's norm and projection), checked against Hugging Face's own
            block-0 input on every load (``models.check``).
        """
        ids = ids.to(self.W_E.device)
        if self.input_fn is not None:
            if positions is not None and not torch.equal(
                positions.cpu(), torch.arange(ids.shape[-1]).expand_as(positions.cpu())
            ):
                raise GeomlensError(
                    f"{self.name} is read in the hidden-state tier, whose block-0 input comes "
                    "from the model's own forward pass at positions 0..T-1 only."
                )
            return self.input_fn(ids)
        if positions is None:
            positions = torch.arange(ids.shape[-1], device=ids.device)
        positions = positions.to(ids.device)
        if self.factorised is not None:
            return self.factorised(ids, positions)
        x = self.W_E[ids]
        if self.embedding_scale != 1.0:
            x = x * self.embedding_scale
        if self.W_pos is not None:
            x = x + self.W_pos[positions]
        return x if self.embedding_norm is None else self.embedding_norm(x)

    def decoder_start(self) -> int:
        """The token an encoder-decoder's decoder starts from (Hugging Face's shift of the
        labels); refused in one sentence for a model whose config names none."""
        if self.decoder_start_token_id is None:
            raise GeomlensError(
                f"{self.name} has no decoder start token: its config.json needs "
                "decoder_start_token_id (T5 uses its padding token, 0)."
            )
        return self.decoder_start_token_id

    @property
    def is_seq2seq(self) -> bool:
        """Whether the model is an encoder-decoder (the main stack is the encoder)."""
        return bool(self.decoder_blocks)

    @property
    def kind(self) -> str:
        """ "decoder" (decoder-only), "encoder" (encoder-only) or "encoder-decoder"."""
        if self.is_seq2seq:
            return "encoder-decoder"
        return "encoder" if self.is_encoder else "decoder"

    @property
    def generates(self) -> bool:
        """Whether the model generates text (decoder-only and encoder-decoder models)."""
        return self.kind != "encoder"

    @property
    def readout_norm(self) -> NormView | None:
        """The norm that puts main-stack vectors where the unembedding reads them.

        The final norm for decoders, the encoder's own final norm for encoder-decoders,
        None for post-norm encoders (BERT), whose block outputs are already normalised.
        """
        return self.encoder_final_norm if self.is_seq2seq else self.final_norm

    def readout_differs(self) -> str | None:
        """Why the view's readout (``logits``) is not the model's own, in words that follow
        "the readout is not available for this model:", where its on-load check found its
        logits different from Hugging Face's (a hidden-state-tier model whose LM head does
        more than the view reads); None where they were equal or not compared."""
        check = self.load_check
        if getattr(check, "readout_equal", None) is not False:
            return None
        error = (getattr(check, "max_error", None) or {}).get("logits")
        by = "" if error is None else f" by {error:.2g} of the largest logit"
        return f"its logits differ from Hugging Face's{by} (checked on load)"

    def not_modelled(self) -> dict[int, str]:
        """Block index -> why its token mixing is not modelled (empty for the full tier)."""
        return {b.index: b.mixing for b in self.blocks if b.mixing is not None}

    def unembed(self, x: torch.Tensor, dtype: torch.dtype | None = None) -> torch.Tensor:
        """Logits from vectors already through the readout norm: [..., d] -> [..., vocab],
        computed in ``dtype`` (default: the unembedding's own)."""
        dtype = dtype or self.W_U.dtype
        x = self.transformed(x)
        if self.unembedding_scale != 1.0:
            x = x * self.unembedding_scale
        logits = x.to(dtype) @ self.W_U.to(dtype)
        if self.b_U is not None:
            logits = logits + self.b_U.to(dtype)
        if self.logit_softcap is not None:
            logits = self.logit_softcap * torch.tanh(logits / self.logit_softcap)
        return logits

    def transformed(self, x: torch.Tensor) -> torch.Tensor:
        """``x`` through the head's own transform (``head_transform``), where it has one."""
        if self.head_transform is None:
            return x
        with torch.inference_mode():
            return self.head_transform(x.to(self.W_E.dtype))

    def logits(self, h: torch.Tensor) -> torch.Tensor:
        """The model's logits from its last hidden-state layer ``h`` [..., d] (final norm
        applied here); equal to Hugging Face's logits (tested for every family)."""
        if self.final_norm is not None:
            h = self.final_norm(h.to(self.W_E.dtype))
        return self.unembed(h)

    @property
    def n_hidden_layers(self) -> int:
        """Hidden-state layers: the embedding output plus one per block."""
        return self.n_layers + 1

    @property
    def tied(self) -> bool:
        """Whether W_U is the same storage as W_E or as the model's own token table (tied
        embeddings; BERT's W_E adds token type 0 to the table its readout shares)."""
        ptr = self.W_U.data_ptr()
        table = getattr(self.model, "get_input_embeddings", lambda: None)()
        stored = getattr(table, "weight", None)
        return ptr == self.W_E.data_ptr() or (stored is not None and ptr == stored.data_ptr())

    @property
    def device(self) -> torch.device:
        return self.W_E.device

    @property
    def lock(self) -> threading.RLock:
        """The model's forward lock (``models.threads``): held from a hooked pass's first
        hook to its last, so threads sharing this view (or another view of the same
        model) take turns."""
        return forward_lock(self.base)

    def describe(self) -> dict[str, Any]:
        """A JSON-able summary (for manifests and ``geomlens models``)."""
        return {
            "family": self.family,
            "tier": self.tier,
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


def encoder_output(memory: torch.Tensor) -> Any:
    """``memory`` [B, S, d] as the encoder output an encoder-decoder's forward takes.

    Imported on first use: transformers' output classes take about 0.7 s to import, which
    a command refused before any forward pass should not pay."""
    from transformers.modeling_outputs import BaseModelOutput

    return BaseModelOutput(last_hidden_state=memory)


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


def norm_view(
    module: Any,
    kind: NormKind,
    eps_attr: str | None = None,
    offset: float = 0.0,
    default_eps: float | None = None,
) -> NormView:
    """Build a NormView from a norm module (``offset`` = 1 for Gemma's ``1 + w`` gain).

    The epsilon is read from ``eps_attr``, or else the first of ``eps``,
    ``variance_epsilon``, ``epsilon`` the module has, else ``default_eps`` (a module that
    fixes it in its code, OLMo's). A norm without a gain (OLMo's) has gamma = 1.
    """
    gain = getattr(module, "weight", None)
    if gain is None:
        gain = torch.ones(tuple(module.normalized_shape)[-1])
    weight = gain.detach() + offset
    bias = getattr(module, "bias", None)
    names = (eps_attr,) if eps_attr else ("eps", "variance_epsilon", "epsilon")
    eps = next((getattr(module, n) for n in names if hasattr(module, n)), default_eps)
    if eps is None:
        raise AttributeError(f"{type(module).__name__} names no epsilon")
    return NormView(
        kind=kind,
        weight=weight,
        bias=None if bias is None else bias.detach(),
        eps=float(eps),
        module=module,
    )


def identity_norm(module: nn.Module, size: int) -> NormView:
    """The ``NormView`` of a place where a layout's norm is the identity (``nn.Identity``)."""
    return NormView(kind="identity", weight=torch.ones(size), bias=None, eps=0.0, module=module)


def get_path(root: nn.Module, path: str) -> Any:
    """Follow a dotted attribute path ("model.layers") from a module."""
    obj: Any = root
    for part in path.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            where = "" if obj is root else f" ({type(obj).__name__} has no {part})"
            raise AttributeError(f"{type(root).__name__} has no {path}{where}") from None
    return obj
