"""Attention logits split by the position/context decomposition of the block input.

A block's input hidden states decompose as ``h[c,t] = mu + pos[t] + ctx[c] + resid[c,t]``
(Song & Zhong, 2023). The pre-softmax logits of every head,
``L[c,h,i,j] = scale * q[c,h,i] . k[c,h,j]``, are bilinear in the normalised input once the
norm's per-token scale is fixed, so they split exactly into pos-pos, pos-ctx, ctx-pos,
ctx-ctx and "rest". By default "ctx" is the paper's context vector cvec[c, t] = ctx[c] +
resid[c, t] ("cvec includes the residual term already"), so "rest" holds only the terms
with mu, a norm bias or a projection bias; ``context="ctx"`` (geomlens's variant) keeps
resid out of the context part and in "rest". The parts add up to the model's own logits
(checked here in float64). See docs/attention.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import numpy.typing as npt
import torch

from geomlens.errors import GeomlensError
from geomlens.models.view import BlockView, HeadWeights, ModelView
from geomlens.stats.decomposition import DecompositionStats

Array = npt.NDArray[np.float64]

PARTS = ("pos_pos", "pos_ctx", "ctx_pos", "ctx_ctx", "rest")
"""Names of the logit parts (query side first, key side second)."""

CONTEXTS = ("cvec", "ctx")
"""What the context part is: the paper's cvec = ctx + resid (default), or ctx alone."""

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
        heatmaps: [P, nb, nb] mean over contexts of |part| for ``heatmap_head``, nan where
            masked (j > i for causal models). nb = T for T <= ``HEATMAP_MAX`` (256); longer
            windows are averaged over square bins of ``heatmap_bin`` positions per side
            (over a bin's unmasked pairs), so nb = ceil(T / heatmap_bin) <= 256.
        max_rel_error: max |sum of parts - real logits| / max |real logits| over every
            (c, h, i, j), or nan when not checked.
        causal: whether the model masks future keys.
        skip_first: whether position 0 was left out of the decomposition (its rows and
            columns are then not in the variances).
        n_contexts: C; n_positions: T (all positions the model saw).
        heatmap_bin: side of the heatmaps' square bins in positions (1: one pixel a pair).
        context: "cvec" (the context part holds ctx + resid, the paper's) or "ctx".
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
    heatmap_bin: int = 1
    context: str = "cvec"

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
            "context": self.context,
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
    for every family in tests/models/test_families.py).
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

PART_BLOCK_BYTES = 16 * 2**20
"""Budget of one query block in ``attention_parts``: the float64 parts [B, rows, T, P] of
one head for ``rows`` query rows stay under it (at least one row). A block and at most one
same-sized temporary exist at once, so the split's working set is about twice this,
whatever T and the number of heads."""

HEATMAP_MAX = 256
"""Heatmaps of windows longer than this are averaged over square bins, at most this many
bins per side (unchanged for T <= HEATMAP_MAX)."""


@dataclass(frozen=True)
class _Inputs:
    """A batch of windows through the norm.

    Attributes:
        pos, ctx, other: [B, T, d] float64 normalised parts (they sum to the normalised
            input; ``ctx`` holds the residual too when the context is cvec, ``other``
            holds mu, the norm bias and otherwise the residual).
        real: [B, T, d] float64 the normalised input as the model computes it (the norm
            module in its own dtype): what the exactness check starts from.
    """

    pos: torch.Tensor
    ctx: torch.Tensor
    other: torch.Tensor
    real: torch.Tensor


def _split_inputs(
    view: ModelView,
    layer: int,
    hidden: torch.Tensor,
    stats: DecompositionStats,
    contexts: Sequence[int] | npt.NDArray[np.integer] | None,
    context: str = "cvec",
) -> _Inputs:
    """Decompose [B, T, d] block inputs by ``stats`` and pass the parts through the norm
    (``context``: "cvec" puts resid in the context part, "ctx" in the other part)."""
    if context not in CONTEXTS:
        raise GeomlensError(f"context must be one of {', '.join(CONTEXTS)} (got {context!r})")
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
    if context == "cvec":  # the paper's context vector: ctx + resid
        n_ctx, other = n_ctx + n_res, n_mu
    else:
        other = n_mu + n_res
    other = other + (0.0 if beta is None else beta)
    norm = block.attn_input_norm
    with torch.inference_mode():
        raw = hidden.to(dev)
        real = raw if norm is None else norm.module(raw.to(norm.weight.dtype))
    return _Inputs(pos=n_pos, ctx=n_ctx, other=other, real=real.double())


def _head_qk(
    block: BlockView, inputs: _Inputs, w: HeadWeights, heads: slice
) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """Rotated queries and keys of each part for the heads ``heads``, in float64.

    Returns:
        (q, k): "pos", "ctx", "oth" -> [B, g, T, e] (the projection biases in "oth"); k also
        has "all" = the sum of the three (the keys the "rest" part's queries meet).
    """
    dev = inputs.pos.device
    W_Q, W_K = w.W_Q[heads].double().to(dev), w.W_K[heads].double().to(dev)
    parts = {"pos": inputs.pos, "ctx": inputs.ctx, "oth": inputs.other}
    q = {a: _project(x, W_Q) for a, x in parts.items()}
    k = {a: _project(x, W_K) for a, x in parts.items()}
    if w.b_Q is not None:
        q["oth"] = q["oth"] + w.b_Q[heads].double().to(dev)[None, :, None, :]
    if w.b_K is not None:
        k["oth"] = k["oth"] + w.b_K[heads].double().to(dev)[None, :, None, :]
    for a in parts:
        q[a], k[a] = block.attn.rotate(q[a], k[a])
    k["all"] = k["pos"] + k["ctx"] + k["oth"]
    return q, k


def _row_scale(block: BlockView, length: int, rows: slice, device: Any) -> float | torch.Tensor:
    """The factor on the scores of the query rows ``rows``: the block's scale, times the
    per-position query factors ([rows, 1] float64) where it has them (Llama 4's NoPE
    layers), so the parts still sum to the scores."""
    attn = block.attn
    if attn.query_scale is None:
        return attn.scale
    return attn.scale * attn.query_scale(length)[rows].double().to(device)[:, None]


def _parts_of_rows(
    q: dict[str, torch.Tensor],
    k: dict[str, torch.Tensor],
    rows: slice,
    scale: float | torch.Tensor,
    bias: torch.Tensor | None,
) -> dict[str, torch.Tensor]:
    """The logit parts of the query rows ``rows`` (all keys): name -> [B, g, rows, T].

    ``q``/``k`` come from ``_head_qk``; ``bias`` is the position bias of those heads and
    rows, [g, rows, T] float64, or None.
    """

    def dot(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        """[B, g, T, e] x [B, g, T, e] -> [B, g, rows, T] scaled dot products."""
        return (a[..., rows, :] @ b.transpose(-1, -2)) * scale

    out = {
        "pos_pos": dot(q["pos"], k["pos"]),
        "pos_ctx": dot(q["pos"], k["ctx"]),
        "ctx_pos": dot(q["ctx"], k["pos"]),
        "ctx_ctx": dot(q["ctx"], k["ctx"]),
        "rest": dot(q["oth"], k["all"]) + dot(q["pos"] + q["ctx"], k["oth"]),
    }
    if bias is not None:
        out[BIAS_PART] = bias[None].expand_as(out["rest"])
    return out


def split_logits(
    view: ModelView,
    layer: int,
    hidden: torch.Tensor,
    stats: DecompositionStats,
    contexts: Sequence[int] | npt.NDArray[np.integer] | None = None,
    context: str = "cvec",
) -> dict[str, torch.Tensor]:
    """The logit parts of every head for a batch of windows, in float64, all at once.

    For inspection and tests: each part is a whole [C, H, T, T] tensor. ``attention_parts``
    streams the same parts over heads and query blocks instead.

    Args:
        view: the model.
        layer: block index; ``stats`` must be of hidden-state layer ``layer``.
        hidden: [C, T, d] the block's input for the windows of ``stats`` (or a subset).
        stats: the decomposition of hidden-state layer ``layer`` over the same windows.
        contexts: which rows of ``stats.ctx`` the rows of ``hidden`` are (default: all, in
            order).
        context: "cvec" (the paper's: the context part holds ctx + resid) or "ctx".

    Returns:
        part name (``parts_of(block)``) -> [C, H, T, T] float64; the parts sum to
        ``real_logits``. Positions the decomposition skipped get pos = 0 (their positional
        part falls into resid). A position bias is its own part, ``BIAS_PART``.
    """
    block = view.blocks[layer]
    inputs = _split_inputs(view, layer, hidden, stats, contexts, context)
    q, k = _head_qk(block, inputs, block.heads(), slice(None))
    bias = block.attn.bias(int(hidden.shape[1]))
    if bias is not None:
        bias = bias.to(view.device).double()
    scale = _row_scale(block, int(hidden.shape[1]), slice(None), view.device)
    return _parts_of_rows(q, k, slice(None), scale, bias)


def pair_mask(view: ModelView, length: int, positions: npt.NDArray[np.integer]) -> torch.Tensor:
    """[T, T] bool: pairs (i, j) counted in the variances (kept positions; j <= i if causal)."""
    kept = torch.zeros(length, dtype=torch.bool)
    kept[torch.as_tensor(positions)] = True
    mask = kept[:, None] & kept[None, :]
    if not view.is_encoder:
        mask &= torch.ones(length, length, dtype=torch.bool).tril()
    return mask


def heatmap_bin(length: int) -> int:
    """Side of the square bins of a heatmap of T = ``length``: ceil(T / HEATMAP_MAX)."""
    return -(-length // HEATMAP_MAX)


def _bin_rows(out: torch.Tensor, x: torch.Tensor, start: int, size: int) -> None:
    """Add [P, rows, T] values of query rows start.. into [P, nb, nb] square-bin sums."""
    P, n, T = x.shape
    nb = out.shape[-1]
    if nb * size > T:
        x = torch.nn.functional.pad(x, (0, nb * size - T))
    cols = x.reshape(P, n, nb, size).sum(-1)  # [P, rows, nb]
    which = torch.arange(start, start + n, device=x.device) // size
    out.index_add_(1, which, cols)


class _Moments:
    """Per-head sums over the counted pairs, filled one (head, query block) at a time.

    s1 [H, P], s2 [H, P, P] (second moments of the parts), c2 [H, P] (squares of the
    row-centred parts), count (pairs per head), the binned |part| sums of one head and
    the largest errors of the exactness check; all float64.
    """

    def __init__(self, H: int, P: int, mask: torch.Tensor, heat_mask: torch.Tensor) -> None:
        """Zero sums for H heads and P parts; ``mask`` [T, T] the counted pairs,
        ``heat_mask`` [T, T] the pairs shown in the heatmaps (j <= i if causal)."""
        dev, T, f64 = mask.device, int(mask.shape[0]), torch.float64
        self.mask, self.heat_mask, self.size = mask, heat_mask, heatmap_bin(T)
        self.n_rows = mask.sum(-1, keepdim=True).clamp(min=1)  # [T, 1] kept keys per row
        self.count = 0.0
        self.s1 = torch.zeros(H, P, dtype=f64, device=dev)
        self.s2 = torch.zeros(H, P, P, dtype=f64, device=dev)
        self.c2 = torch.zeros(H, P, dtype=f64, device=dev)
        nb = -(-T // self.size)
        self.heat = torch.zeros(P, nb, nb, dtype=f64, device=dev)
        self.heat_count = torch.zeros(1, nb, nb, dtype=f64, device=dev)
        for start in range(0, T, HEATMAP_MAX):
            rows = heat_mask[start : start + HEATMAP_MAX].double()[None]
            _bin_rows(self.heat_count, rows, start, self.size)
        self.max_err, self.max_real = 0.0, 0.0
        self.causal = not bool(heat_mask.all())

    @classmethod
    def of(cls, view: ModelView, P: int, T: int, stats: DecompositionStats) -> _Moments:
        """Zero sums for the view's heads: the pairs of ``pair_mask`` counted, every pair
        (encoders) or j <= i (causal models) in the heatmaps."""
        mask = pair_mask(view, T, np.asarray(stats.positions)).to(view.device)
        heat_mask = torch.ones(T, T, dtype=torch.bool, device=view.device)
        moments = cls(view.n_heads, P, mask, heat_mask if view.is_encoder else heat_mask.tril())
        moments.causal = not view.is_encoder
        return moments

    def add(
        self, head: int, rows: slice, stack: torch.Tensor, real: torch.Tensor | None, heat: bool
    ) -> None:
        """Add one block: ``stack`` [B, rows, T, P] the parts of head ``head`` for the query
        rows ``rows`` (overwritten: centred in place, so that at most one copy of a block
        exists beside it), ``real`` [B, rows, T] the model's scores (or None: no check),
        ``heat``: whether this is the heatmap head."""
        mask = self.mask[rows]  # [rows, T]
        if real is not None:
            self.max_err = max(self.max_err, float((stack.sum(-1) - real).abs().max()))
            self.max_real = max(self.max_real, float(real.abs().max()))
        if heat:
            part_abs = (stack.abs().sum(0) * self.heat_mask[rows, :, None]).permute(2, 0, 1)
            _bin_rows(self.heat, part_abs, int(rows.start), self.size)
        vals = stack[:, mask]  # [B, N, P]
        if head == 0:
            self.count += vals.shape[0] * vals.shape[1]
        self.s1[head] += vals.sum((0, 1))
        self.s2[head] += torch.einsum("bnp,bnq->pq", vals, vals)
        del vals
        row_mean = (stack * mask[None, :, :, None]).sum(2, keepdim=True)
        centred = stack.sub_(row_mean.div_(self.n_rows[None, rows, :, None]))  # in place
        self.c2[head] += centred[:, mask].pow_(2).sum((0, 1))

    def shares(self) -> tuple[Array, Array, Array, Array]:
        """(share, share_cov, share_centred [H, P], logit_var [H]) from the sums."""
        mean = self.s1 / self.count
        cov = self.s2 / self.count - mean[:, :, None] * mean[:, None, :]
        var = torch.diagonal(cov, dim1=1, dim2=2)
        logit_var = cov.sum((1, 2))
        var_c = self.c2 / self.count
        return (
            (var / var.sum(1, keepdim=True)).cpu().numpy(),
            (cov.sum(2) / logit_var[:, None]).cpu().numpy(),
            (var_c / var_c.sum(1, keepdim=True)).cpu().numpy(),
            logit_var.cpu().numpy(),
        )

    def result(
        self,
        layer: int,
        parts: tuple[str, ...],
        heatmap_head: int,
        skip_first: bool,
        check: bool,
        n_contexts: int,
    ) -> AttentionParts:
        """The summary of the sums (``attention_parts``'s result)."""
        share, share_cov, share_centred, logit_var = self.shares()
        return AttentionParts(
            layer=layer,
            parts=parts,
            share=share,
            share_cov=share_cov,
            share_centred=share_centred,
            logit_var=logit_var,
            heatmap_head=heatmap_head,
            heatmaps=self.heatmaps(n_contexts),
            max_rel_error=self.max_rel_error() if check else float("nan"),
            causal=self.causal,
            skip_first=skip_first,
            n_contexts=n_contexts,
            n_positions=int(self.mask.shape[0]),
            heatmap_bin=self.size,
        )

    def max_rel_error(self) -> float:
        """max |sum of parts - real| / max |real| (nan when the scores are all zero)."""
        return self.max_err / self.max_real if self.max_real > 0 else float("nan")

    def heatmaps(self, n_contexts: int) -> Array:
        """[P, nb, nb] mean |part| per bin over contexts and the bin's unmasked pairs (nan
        for a bin with none)."""
        nan = torch.full_like(self.heat, float("nan"))
        mean = torch.where(self.heat_count > 0, self.heat / (n_contexts * self.heat_count), nan)
        return mean.cpu().numpy()


def _stream_head(
    block: BlockView,
    inputs: _Inputs,
    w: HeadWeights,
    head: int,
    rows: int,
    bias: torch.Tensor | None,
    moments: _Moments,
    names: tuple[str, ...],
    check: bool,
    heat: bool,
) -> None:
    """Split one head's logits for a batch of windows, ``rows`` query rows at a time.

    Holds the head's queries and keys ([B, T, e] per part) and one block of parts
    ([B, rows, T, P] float64); ``bias`` is the block's [H, T, T] position bias or None.
    """
    hs, dev = slice(head, head + 1), inputs.pos.device
    q, k = _head_qk(block, inputs, w, hs)
    if check:
        b_Q, b_K = (None if b is None else b[hs] for b in (w.b_Q, w.b_K))
        sub = replace(w, W_Q=w.W_Q[hs], W_K=w.W_K[hs], b_Q=b_Q, b_K=b_K)
        real_q, real_k = block.attn.rotate(*block.attn.project_qk(inputs.real, sub))
    T = int(inputs.pos.shape[1])
    for start in range(0, T, rows):
        r = slice(start, min(T, start + rows))
        b = None if bias is None else bias[hs, r].to(dev).double()  # [1, rows, T]
        scale = _row_scale(block, T, r, dev)
        parts = _parts_of_rows(q, k, r, scale, b)
        stack = torch.stack([parts[p][:, 0] for p in names], dim=-1)  # [B, rows, T, P]
        del parts
        real = None
        if check:
            real = (real_q[:, 0, r] @ real_k[:, 0].transpose(-1, -2)) * scale
            real = real if b is None else real + b[0]
        moments.add(head, r, stack, real, heat)


def attention_parts(
    view: ModelView,
    layer: int,
    hidden: torch.Tensor,
    stats: DecompositionStats,
    contexts: Sequence[int] | npt.NDArray[np.integer] | None = None,
    heatmap_head: int = 0,
    batch_size: int = 16,
    check: bool = True,
    block_bytes: int = PART_BLOCK_BYTES,
    context: str = "cvec",
) -> AttentionParts:
    """Split one block's attention logits into position/context parts and summarise them.

    Streams: for each batch of windows, each head and each block of query rows, the parts
    of those rows are computed and added to the per-head sums, so no [B, H, T, T] tensor
    is ever held (docs/attention.md, "Memory").

    Args:
        view: the model (any family whose attention scores are bilinear in the input).
        layer: block index; its input is hidden-state layer ``layer``.
        hidden: [C, T, d] the block's input for the windows of ``stats`` (or a subset).
        stats: the decomposition of hidden-state layer ``layer`` over the same windows.
        contexts: rows of ``stats.ctx`` matching the rows of ``hidden`` (default all).
        heatmap_head: the head whose mean |part| heatmaps are kept.
        batch_size: windows split at once.
        check: compare the sum of the parts with the model's scores (``max_rel_error``).
        block_bytes: budget of one query block's float64 parts [batch, rows, T, P].
        context: "cvec" (the paper's: the context part holds ctx + resid) or "ctx" (resid
            goes to "rest").

    Returns:
        The per-head shares, heatmaps and the exactness check.
    """
    block = view.blocks[layer]
    _check_supported(view, block)
    C, T = int(hidden.shape[0]), int(hidden.shape[1])
    idx = np.arange(stats.n_contexts) if contexts is None else np.asarray(contexts)
    names = parts_of(block)
    moments = _Moments.of(view, len(names), T, stats)
    bias = block.attn.bias(T)  # [H, T, T] in the view's dtype, sliced per head and block
    w = block.heads()
    with torch.inference_mode():
        for start in range(0, C, batch_size):
            sl = slice(start, start + batch_size)
            inputs = _split_inputs(view, layer, hidden[sl], stats, idx[sl], context)
            rows = max(1, block_bytes // (int(inputs.pos.shape[0]) * T * len(names) * 8))
            for head in range(view.n_heads):
                heat = head == heatmap_head
                _stream_head(block, inputs, w, head, rows, bias, moments, names, check, heat)
    result = moments.result(layer, names, heatmap_head, stats.skip_first, check, C)
    return replace(result, context=context)
