"""Attention logits split by the position/context decomposition of the block input.

A block's input hidden states decompose as ``h[c,t] = mu + pos[t] + ctx[c] + resid[c,t]``
(Song & Zhong, 2023). The pre-softmax logits of every head,
``L[c,h,i,j] = scale * q[c,h,i] . k[c,h,j]``, are bilinear in the normalised input once the
norm's per-token scale is fixed, so they split exactly into pos-pos, pos-ctx, ctx-pos,
ctx-ctx and "rest" (every term with mu, resid, a norm bias or a projection bias). The
parts add up to the model's own logits (checked here in float64). See docs/attention.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import torch

from geomlens.errors import GeomlensError
from geomlens.models.view import BlockView, ModelView
from geomlens.stats.decomposition import DecompositionStats

Array = npt.NDArray[np.float64]

PARTS = ("pos_pos", "pos_ctx", "ctx_pos", "ctx_ctx", "rest")
"""Names of the logit parts (query side first, key side second)."""

BIAS_PART = "pos_bias"
"""The sixth part of models whose attention adds a position bias (T5 buckets, ALiBi): a
function of (i, j) alone, the same in every window."""


def parts_of(block: BlockView) -> tuple[str, ...]:
    """The logit parts of a block: ``PARTS``, plus ``BIAS_PART`` where a bias is added."""
    return PARTS + ((BIAS_PART,) if block.attn.bias_fn is not None else ())


@dataclass(frozen=True)
class AttentionParts:
    """The split of one block's attention logits, summarised per head.

    Variances run over (c, i, j) with i, j both kept positions of the decomposition and
    j <= i for causal models (all pairs for encoders).

    Attributes:
        layer: block index (its input is hidden-state layer ``layer``).
        parts: names of the P parts (``parts_of``), the last axis of the share arrays.
        share: [H, P] var(part) / sum over parts of var(part) (primary; nonnegative).
        share_cov: [H, P] cov(part, logits) / var(logits); sums to 1 exactly per head.
        share_centred: [H, P] like ``share`` after subtracting from each part its mean over
            the keys of each query row (only what changes the softmax).
        logit_var: [H] variance of the real logits over the same pairs.
        heatmap_head: the head of ``heatmaps``.
        heatmaps: [P, T, T] mean over contexts of |part| for ``heatmap_head`` (nan where
            masked: j > i for causal models).
        max_rel_error: max |sum of parts - real logits| / max |real logits| over every
            (c, h, i, j), or nan when not checked.
        causal: whether the model masks future keys.
        skip_first: whether position 0 was left out of the decomposition (its rows and
            columns are then not in the variances).
        n_contexts: C; n_positions: T (all positions the model saw).
    """

    layer: int
    parts: tuple[str, ...]
    share: Array
    share_cov: Array
    share_centred: Array
    logit_var: Array
    heatmap_head: int
    heatmaps: Array
    max_rel_error: float
    causal: bool
    skip_first: bool
    n_contexts: int
    n_positions: int

    def to_dict(self) -> dict[str, Any]:
        """JSON-able numbers (heatmaps left out)."""

        def clean(a: Array) -> Any:
            return [[None if not np.isfinite(x) else float(x) for x in row] for row in a]

        return {
            "layer": self.layer,
            "parts": list(self.parts),
            "share": clean(self.share),
            "share_cov": clean(self.share_cov),
            "share_centred": clean(self.share_centred),
            "logit_var": [float(x) for x in self.logit_var],
            "max_rel_error": None if not np.isfinite(self.max_rel_error) else self.max_rel_error,
            "causal": self.causal,
            "skip_first": self.skip_first,
            "n_contexts": self.n_contexts,
            "n_positions": self.n_positions,
        }


# --------------------------------------------------------------------------- helpers


def _check_supported(view: ModelView, block: BlockView) -> None:
    """Refuse blocks whose scores are not bilinear in the normalised input."""
    attn = block.attn
    problems = []
    if not attn.linear_qk:
        problems.append("q/k norms (not linear)")
    if attn.softcap is not None:
        problems.append("soft-capped scores (not linear)")
    if problems:
        raise GeomlensError("attention parts cannot split this model: " + "; ".join(problems))


def _normalise_parts(
    block: BlockView, h: torch.Tensor, parts: Sequence[torch.Tensor]
) -> tuple[list[torch.Tensor], torch.Tensor | None]:
    """Pass each part through the norm linearised at the real per-token scale.

    Args:
        block: the block (its attention input norm, if any).
        h: [C, T, d] float64 real block input (sets the scale).
        parts: tensors broadcastable to [C, T, d] that sum to h.

    Returns:
        The normalised parts ([C, T, d] each) and the norm bias beta ([d]) or None.
    """
    norm = block.attn_input_norm
    if norm is None:
        return [p.expand_as(h) for p in parts], None
    gamma = norm.weight.double().to(h.device)
    if norm.kind == "rmsnorm":
        s = torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + norm.eps)
        return [gamma * s * p for p in parts], None
    s = torch.rsqrt(h.var(-1, unbiased=False, keepdim=True) + norm.eps)
    out = [gamma * s * (p - p.mean(-1, keepdim=True)) for p in parts]
    beta = None if norm.bias is None else norm.bias.double().to(h.device)
    return out, beta


def _project(x: torch.Tensor, W: torch.Tensor) -> torch.Tensor:
    """[C, T, d] x [H, d, e] -> [C, H, T, e]."""
    return torch.einsum("ctd,hde->chte", x, W)


# --------------------------------------------------------------------------- reference


def block_scores(view: ModelView, layer: int, hidden: torch.Tensor) -> torch.Tensor:
    """The main stack's block ``layer``'s scores from its input (``self_scores``).

    Args:
        view: the model.
        layer: block index.
        hidden: [C, T, d] the block's input (hidden-state layer ``layer``).

    Returns:
        [C, H, T, T] float64 scores.
    """
    return self_scores(view.blocks[layer], hidden)


def self_scores(block: BlockView, hidden: torch.Tensor) -> torch.Tensor:
    """A block's pre-softmax, pre-mask self-attention scores from its input, in float64,
    for any family and any stack (rotary, ALiBi or T5 bias, soft-capping and q/k norms
    included): [B, T, d] -> [B, H, T, T].

    The norm module runs as the model runs it (its own dtype); the queries and keys come
    from the view's per-head weights in float64 (checked against Hugging Face's attention
    for every family in tests/test_families.py).
    """
    norm = block.attn_input_norm
    device = block.attn.heads().W_Q.device
    with torch.inference_mode():
        h = hidden.to(device)
        x = h if norm is None else norm.module(h.to(norm.weight.dtype))
        return block.attn.scores(x.double())


def real_logits(view: ModelView, layer: int, hidden: torch.Tensor) -> torch.Tensor:
    """``block_scores`` of a block whose scores ``scale * q_i . k_j`` the split handles
    (a ``GeomlensError`` otherwise): the reference the parts must add up to."""
    _check_supported(view, view.blocks[layer])
    return block_scores(view, layer, hidden)


# --------------------------------------------------------------------------- the split


def split_logits(
    view: ModelView,
    layer: int,
    hidden: torch.Tensor,
    stats: DecompositionStats,
    contexts: Sequence[int] | npt.NDArray[np.integer] | None = None,
) -> dict[str, torch.Tensor]:
    """The logit parts of every head for a batch of windows, in float64.

    Args:
        view: the model.
        layer: block index; ``stats`` must be of hidden-state layer ``layer``.
        hidden: [C, T, d] the block's input for the windows of ``stats`` (or a subset).
        stats: the decomposition of hidden-state layer ``layer`` over the same windows.
        contexts: which rows of ``stats.ctx`` the rows of ``hidden`` are (default: all, in
            order).

    Returns:
        part name (``parts_of(block)``) -> [C, H, T, T] float64; the parts sum to
        ``real_logits``. Positions the decomposition skipped get pos = 0 (their positional
        part falls into resid). A position bias is its own part, ``BIAS_PART``.
    """
    block = view.blocks[layer]
    _check_supported(view, block)
    if stats.layer != layer:
        raise GeomlensError(f"stats are of hidden-state layer {stats.layer}, not {layer}")
    dev = view.device
    h = hidden.to(dev).double()
    C, T, d = h.shape
    idx = np.arange(stats.n_contexts) if contexts is None else np.asarray(contexts)
    if len(idx) != C:
        raise GeomlensError(f"{C} windows of hidden states but {len(idx)} context indices")
    positions = np.asarray(stats.positions)
    if positions.max() >= T:
        raise GeomlensError(f"stats cover positions up to {positions.max()}, windows have {T}")
    mu = torch.as_tensor(stats.mean, dtype=torch.float64, device=dev)
    pos = torch.zeros(T, d, dtype=torch.float64, device=dev)
    pos[torch.as_tensor(positions, device=dev)] = torch.as_tensor(stats.pos, device=dev).double()
    ctx = torch.as_tensor(stats.ctx[idx], dtype=torch.float64, device=dev)[:, None, :]
    resid = h - mu - pos - ctx

    (n_mu, n_pos, n_ctx, n_res), beta = _normalise_parts(block, h, [mu, pos, ctx, resid])
    other = n_mu + n_res + (0.0 if beta is None else beta)

    w = block.heads()
    W_Q, W_K = w.W_Q.double().to(dev), w.W_K.double().to(dev)
    q_pos, q_ctx, q_oth = _project(n_pos, W_Q), _project(n_ctx, W_Q), _project(other, W_Q)
    k_pos, k_ctx, k_oth = _project(n_pos, W_K), _project(n_ctx, W_K), _project(other, W_K)
    if w.b_Q is not None:
        q_oth = q_oth + w.b_Q.double().to(dev)[None, :, None, :]
    if w.b_K is not None:
        k_oth = k_oth + w.b_K.double().to(dev)[None, :, None, :]
    rotate = block.attn.rotate
    q_pos, k_pos = rotate(q_pos, k_pos)
    q_ctx, k_ctx = rotate(q_ctx, k_ctx)
    q_oth, k_oth = rotate(q_oth, k_oth)
    scale = block.attn.scale

    def dot(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return (a @ b.transpose(-1, -2)) * scale

    k_all = k_pos + k_ctx + k_oth
    out = {
        "pos_pos": dot(q_pos, k_pos),
        "pos_ctx": dot(q_pos, k_ctx),
        "ctx_pos": dot(q_ctx, k_pos),
        "ctx_ctx": dot(q_ctx, k_ctx),
        "rest": dot(q_oth, k_all) + dot(q_pos + q_ctx, k_oth),
    }
    bias = block.attn.bias(T)
    if bias is not None:
        out[BIAS_PART] = bias.to(dev).double()[None].expand_as(out["rest"])
    return out


def pair_mask(view: ModelView, length: int, positions: npt.NDArray[np.integer]) -> torch.Tensor:
    """[T, T] bool: pairs (i, j) counted in the variances (kept positions; j <= i if causal)."""
    kept = torch.zeros(length, dtype=torch.bool)
    kept[torch.as_tensor(positions)] = True
    mask = kept[:, None] & kept[None, :]
    if not view.is_encoder:
        mask &= torch.ones(length, length, dtype=torch.bool).tril()
    return mask


def attention_parts(
    view: ModelView,
    layer: int,
    hidden: torch.Tensor,
    stats: DecompositionStats,
    contexts: Sequence[int] | npt.NDArray[np.integer] | None = None,
    heatmap_head: int = 0,
    batch_size: int = 16,
    check: bool = True,
) -> AttentionParts:
    """Split one block's attention logits into position/context parts and summarise them.

    Args:
        view: the model (any family whose attention scores are bilinear in the input).
        layer: block index; its input is hidden-state layer ``layer``.
        hidden: [C, T, d] the block's input for the windows of ``stats`` (or a subset).
        stats: the decomposition of hidden-state layer ``layer`` over the same windows.
        contexts: rows of ``stats.ctx`` matching the rows of ``hidden`` (default all).
        heatmap_head: the head whose mean |part| heatmaps are kept.
        batch_size: windows split at once (memory: 5 x batch x H x T x T float64).
        check: compare the sum of the parts with ``real_logits`` (``max_rel_error``).

    Returns:
        The per-head shares, heatmaps and the exactness check.
    """
    C, T = int(hidden.shape[0]), int(hidden.shape[1])
    idx = np.arange(stats.n_contexts) if contexts is None else np.asarray(contexts)
    mask = pair_mask(view, T, np.asarray(stats.positions)).to(view.device)
    n_rows = mask.sum(-1, keepdim=True).clamp(min=1)
    names = parts_of(view.blocks[layer])
    n_parts, H = len(names), view.n_heads
    count = 0.0
    s1 = torch.zeros(H, n_parts, dtype=torch.float64)
    s2 = torch.zeros(H, n_parts, n_parts, dtype=torch.float64)
    c2 = torch.zeros(H, n_parts, dtype=torch.float64)
    heat = torch.zeros(n_parts, T, T, dtype=torch.float64)
    max_err, max_real = 0.0, 0.0
    for start in range(0, C, batch_size):
        sl = slice(start, start + batch_size)
        split = split_logits(view, layer, hidden[sl], stats, idx[sl])
        stack = torch.stack([split[p] for p in names], dim=-1)  # [B, H, T, T, parts]
        if check:
            real = real_logits(view, layer, hidden[sl])
            max_err = max(max_err, float((stack.sum(-1) - real).abs().max()))
            max_real = max(max_real, float(real.abs().max()))
        heat += stack[:, heatmap_head].abs().sum(0).permute(2, 0, 1).cpu()
        vals = stack[:, :, mask]  # [B, H, N, 5]
        count += vals.shape[0] * vals.shape[2]
        s1 += vals.sum((0, 2)).cpu()
        s2 += torch.einsum("bhnp,bhnq->hpq", vals, vals).cpu()
        m = mask[None, None, :, :, None]
        row_mean = (stack * m).sum(3, keepdim=True) / n_rows[None, None, :, :, None]
        centred = ((stack - row_mean) * m)[:, :, mask]
        c2 += centred.pow(2).sum((0, 2)).cpu()
    mean = s1 / count
    cov = s2 / count - mean[:, :, None] * mean[:, None, :]
    var = torch.diagonal(cov, dim1=1, dim2=2)
    logit_var = cov.sum((1, 2))
    share = var / var.sum(1, keepdim=True)
    share_cov = cov.sum(2) / logit_var[:, None]
    var_c = c2 / count
    share_centred = var_c / var_c.sum(1, keepdim=True)
    heatmaps = (heat / C).numpy()
    if not view.is_encoder:
        upper = ~np.tril(np.ones((T, T), dtype=bool))
        heatmaps[:, upper] = np.nan
    return AttentionParts(
        layer=layer,
        parts=names,
        share=share.numpy(),
        share_cov=share_cov.numpy(),
        share_centred=share_centred.numpy(),
        logit_var=logit_var.numpy(),
        heatmap_head=heatmap_head,
        heatmaps=heatmaps,
        max_rel_error=max_err / max_real if check and max_real > 0 else float("nan"),
        causal=not view.is_encoder,
        skip_first=stats.skip_first,
        n_contexts=C,
        n_positions=T,
    )
