"""Position kernels: T5 relative biases and empirical kernels by relative offset.

The offset of a query at position i and a key at position j is ``delta = i - j`` (0 = the
token itself, positive = earlier keys). Singh (2023, appendix A) reads T5's learned
relative bias as a kernel over delta, and for any model the mean attention by delta; a
head has a *negative self-bias* when its kernel at delta = 0 is below the mean of deltas
1-4, and *far-position amplification* when its mean over far offsets (32 <= |delta| <= 63)
exceeds its mean over middle offsets (8 <= |delta| <= 31). Encoder-decoders get kernels of
the encoder's and decoder's self-attention and of the cross-attention (decoder query i,
encoder key j). See docs/walk.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import torch

from geomlens.errors import GeomlensError
from geomlens.models.view import ModelView
from geomlens.stats.base import check_state
from geomlens.stats.rounding import sig

Array = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

N_OFFSETS = 64
"""Offsets 0..63 (and -63..-1 for bidirectional models) of the saved kernels."""

SELF_BIAS_OFFSETS = (1, 2, 3, 4)

FAR_OFFSETS = (32, 63)
"""|delta| range (inclusive) of the far offsets of the far-position test."""

MIDDLE_OFFSETS = (8, 31)
"""|delta| range (inclusive) of the middle offsets it compares them with."""


# --------------------------------------------------------------------------- model biases


@dataclass(frozen=True)
class BiasKernel:
    """One stack's additive position bias (T5 buckets, ALiBi) as a function of delta = i - j.

    Attributes:
        stack: "main" (decoder-only or encoder-only), "encoder" or "decoder".
        kind: the position scheme ("t5-relative", "alibi").
        offsets: [n] deltas, ascending.
        buckets: [n] offsets that share one bias share a number (T5's buckets; ALiBi gives
            every offset its own).
        bias: [H, n] the bias added to every head's logits at that delta.
        bidirectional: whether keys after the query are attended (and biased).
    """

    stack: str
    kind: str
    offsets: IntArray
    buckets: IntArray
    bias: Array
    bidirectional: bool

    def to_dict(self) -> dict[str, Any]:
        return {
            "stack": self.stack,
            "kind": self.kind,
            "bidirectional": self.bidirectional,
            "offsets": [int(x) for x in self.offsets],
            "buckets": [int(x) for x in self.buckets],
            "bias": [[sig(x) for x in row] for row in self.bias],
        }

    def scores(self) -> dict[str, Any]:
        """The table scored per head like an empirical kernel: negative self-bias and
        far-position amplification (keys after the query left out where they are masked)."""
        neg = negative_self_bias(self.bias, self.offsets)
        return {
            "stack": self.stack,
            "negative_self_bias_fraction": sig(neg.mean()),
            "negative_self_bias_heads": [int(h) for h in np.nonzero(neg)[0]],
            **far_position_dict(self.bias, self.offsets, not self.bidirectional),
        }


def bias_kernel(block: Any, stack: str, kind: str, max_offset: int = N_OFFSETS - 1) -> BiasKernel:
    """Read a block's position bias per offset from the view (``block.attn.bias``).

    Returns:
        The kernel; ``bias[h, delta]`` equals the view's bias ``[h, i, i - delta]``.
    """
    T = 2 * max_offset + 1
    full = block.attn.bias(T)
    if full is None:
        raise GeomlensError(f"the {stack} attention has no position bias.")
    i = max_offset
    offsets = torch.arange(-max_offset, max_offset + 1)
    bias = full.detach().double().cpu()[:, i, i - offsets]  # [H, n]
    _, buckets = torch.unique(bias.float(), dim=1, return_inverse=True)
    return BiasKernel(
        stack=stack,
        kind=kind,
        offsets=offsets.numpy().astype(np.int64),
        buckets=buckets.numpy().astype(np.int64),
        bias=bias.numpy(),
        bidirectional=not block.attn.causal,
    )


def bias_kernels(view: ModelView, max_offset: int = N_OFFSETS - 1) -> list[BiasKernel]:
    """The position-bias kernels of every stack whose attention adds one (T5, ALiBi)."""
    stacks = [("encoder" if view.is_seq2seq else "main", view.blocks)]
    if view.decoder_blocks:
        stacks.append(("decoder", view.decoder_blocks))
    return [
        bias_kernel(blocks[0], name, view.position.kind, max_offset)
        for name, blocks in stacks
        if blocks and blocks[0].attn.bias_fn is not None
    ]


# --------------------------------------------------------------------------- empirical


def kernel_offsets(causal: bool, n_offsets: int = N_OFFSETS) -> IntArray:
    """The offsets of an empirical kernel: 0..n-1, or -(n-1)..n-1 for bidirectional models."""
    lo = 0 if causal else -(n_offsets - 1)
    return np.arange(lo, n_offsets, dtype=np.int64)


def query_start(causal: bool, length: int, n_offsets: int = N_OFFSETS) -> int:
    """First query averaged in a causal kernel: min(n_offsets, T // 2); 1 if bidirectional.

    A causal query i has i + 1 keys, so early rows carry large weights at small offsets
    (row 0 puts all of its weight on delta = 0). Averaging the same queries at every offset
    keeps the kernel a function of the offset alone.
    """
    return 1 if not causal else max(1, min(n_offsets, length // 2))


class KernelAccumulator:
    """Mean attention weight (and pre-softmax score) per layer, head and offset.

    For offset delta the mean runs over windows and the pairs (i, j = i - delta) with both
    i >= 1 and j >= 1: position 0 is left out, as query and as key, because it draws the
    "attention sink" (most of many heads' weight) whatever the offset. For causal models
    only queries i >= max(query_start, delta + 1) count.

    An ``Accumulator`` (``stats.base``): ``update(layer, attn, logits)`` per layer of each
    batch (layer 0 counts the windows and pairs), ``merge``, ``state_dict``/
    ``load_state_dict`` (the sums and counts; the shape, ``causal`` and ``n_offsets`` are
    constructor arguments) and ``finalize()``.
    """

    def __init__(self, n_layers: int, n_heads: int, causal: bool, n_offsets: int = N_OFFSETS):
        self.causal = causal
        self.offsets = kernel_offsets(causal, n_offsets)
        self.n_offsets = n_offsets
        shape = (n_layers, n_heads, len(self.offsets))
        self.attn_sum = np.zeros(shape)
        self.logit_sum = np.zeros(shape)
        self.count = np.zeros(shape[2])
        self.has_logits = np.zeros(n_layers, dtype=bool)
        self.windows = 0
        self.length: int | None = None

    def _diagonals(self, x: torch.Tensor, T: int) -> tuple[list[int], torch.Tensor, list[int]]:
        """Per kept offset: sums over [B, ., i] of x[..., i, i - delta] -> [H, n], counts."""
        q0 = query_start(self.causal, T, self.n_offsets)
        sums, counts, kept = [], [], []
        for idx, delta in enumerate(self.offsets):
            if abs(int(delta)) >= T:
                continue
            d = int(delta)
            # diag[..., m] = x[..., i, i - d] with i = m + max(d, 0).
            diag = torch.diagonal(x, offset=-d, dim1=-2, dim2=-1)  # [B, H, T - |d|]
            first_i = max(q0, d + 1) if self.causal else max(1, d + 1)
            diag = diag[..., first_i - max(d, 0) :]
            if diag.shape[-1] == 0:
                continue
            sums.append(diag.double().sum((0, -1)))
            counts.append(int(diag.shape[0] * diag.shape[-1]))
            kept.append(idx)
        return kept, torch.stack(sums, -1), counts

    def update(self, layer: int, attn: torch.Tensor, logits: torch.Tensor | None = None) -> None:
        """Add one layer's attention of a batch of windows.

        Args:
            layer: block index.
            attn: [B, H, T, T] attention probabilities.
            logits: [B, H, T, T] pre-softmax, pre-mask scores, or None.
        """
        T = int(attn.shape[-1])
        if self.length is None:
            self.length = T
        kept, sums, counts = self._diagonals(attn, T)
        self.attn_sum[layer][:, kept] += sums.cpu().numpy()
        if layer == 0:
            self.count[kept] += counts
            self.windows += int(attn.shape[0])
        if logits is not None:
            _, lsums, _ = self._diagonals(logits, T)
            self.logit_sum[layer][:, kept] += lsums.cpu().numpy()
            self.has_logits[layer] = True

    def _check_same(self, other: KernelAccumulator) -> None:
        """Refuse to merge kernels of other shapes, offsets, window lengths or scores."""
        same = self.causal == other.causal and np.array_equal(self.offsets, other.offsets)
        if self.attn_sum.shape != other.attn_sum.shape or not same:
            raise GeomlensError(
                "cannot merge position kernels of different shapes: [layers, heads, offsets] "
                f"{list(other.attn_sum.shape)} (causal={other.causal}) into "
                f"{list(self.attn_sum.shape)} (causal={self.causal})."
            )
        if None not in (self.length, other.length) and self.length != other.length:
            raise GeomlensError(
                f"cannot merge position kernels of windows of {other.length} tokens into "
                f"those of {self.length} tokens: the queries averaged depend on the length."
            )
        if self.windows and other.windows and (self.has_logits != other.has_logits).any():
            raise GeomlensError(
                "cannot merge position kernels with pre-softmax scores for other layers: "
                f"{other.has_logits.tolist()} into {self.has_logits.tolist()}."
            )

    def merge(self, other: KernelAccumulator) -> KernelAccumulator:
        """Add a kernel filled on other windows (in place) and return self.

        Sums, counts and windows add; an accumulator that has seen no window merges with
        any. Raises GeomlensError when the shapes, offsets or window lengths differ, or
        when both have seen windows but only one has pre-softmax scores for some layer.
        """
        self._check_same(other)
        self.attn_sum += other.attn_sum
        self.logit_sum += other.logit_sum
        self.count += other.count
        self.has_logits |= other.has_logits
        self.windows += other.windows
        if self.length is None:
            self.length = other.length
        return self

    def state_spec(self) -> dict[str, tuple[tuple[int, ...], torch.dtype]]:
        """Name, shape and dtype of every tensor of ``state_dict()``."""
        shape = tuple(int(n) for n in self.attn_sum.shape)
        return {
            "causal": ((), torch.bool),
            "offsets": ((shape[2],), torch.int64),
            "attn_sum": (shape, torch.float64),
            "logit_sum": (shape, torch.float64),
            "count": ((shape[2],), torch.float64),
            "has_logits": ((shape[0],), torch.bool),
            "windows": ((), torch.int64),
            "length": ((), torch.int64),
        }

    def state_dict(self) -> dict[str, torch.Tensor]:
        """Sums (float64), counts, the layers with scores, windows and the window length
        (-1 before the first update), as copies; ``causal`` and ``offsets`` to check a load."""
        arrays = {
            "offsets": self.offsets,
            "attn_sum": self.attn_sum,
            "logit_sum": self.logit_sum,
            "count": self.count,
            "has_logits": self.has_logits,
        }
        state = {k: torch.from_numpy(np.array(v, copy=True)) for k, v in arrays.items()}
        state["causal"] = torch.tensor(self.causal)
        state["windows"] = torch.tensor(self.windows, dtype=torch.int64)
        state["length"] = torch.tensor(
            -1 if self.length is None else self.length, dtype=torch.int64
        )
        return state

    def load_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        """Restore ``state_dict()`` exactly.

        Raises:
            GeomlensError: when it was saved with another shape, ``causal`` or ``n_offsets``.
        """
        check_state(state, self.state_spec(), "position-kernel")
        saved = state["offsets"].cpu().numpy()
        if bool(state["causal"]) != self.causal or not np.array_equal(saved, self.offsets):
            raise GeomlensError(
                f"the saved position-kernel state (causal={bool(state['causal'])}, offsets "
                f"{int(saved[0])}..{int(saved[-1])}) does not match this accumulator "
                f"(causal={self.causal}, offsets {int(self.offsets[0])}..{int(self.offsets[-1])})."
            )
        for name in ("attn_sum", "logit_sum", "count", "has_logits"):
            setattr(self, name, state[name].cpu().numpy().copy())
        self.windows = int(state["windows"])
        self.length = None if int(state["length"]) < 0 else int(state["length"])

    @classmethod
    def from_state_dict(cls, state: dict[str, torch.Tensor]) -> KernelAccumulator:
        """A new accumulator holding ``state`` (its shape and offsets read from it)."""
        n_layers, n_heads, _ = state["attn_sum"].shape
        n_offsets = int(state["offsets"][-1]) + 1
        acc = cls(int(n_layers), int(n_heads), bool(state["causal"]), n_offsets=n_offsets)
        acc.load_state_dict(state)
        return acc

    def finalize(self) -> EmpiricalKernel:
        n = np.where(self.count > 0, self.count, np.nan)
        logits = self.logit_sum / n if self.has_logits.all() else None
        T = self.length or 0
        return EmpiricalKernel(
            offsets=self.offsets,
            attn=self.attn_sum / n,
            logits=logits,
            causal=self.causal,
            n_windows=self.windows,
            length=T,
            query_start=query_start(self.causal, T, self.n_offsets),
        )


@dataclass(frozen=True)
class EmpiricalKernel:
    """Mean attention (and pre-softmax score) by offset, per layer and head.

    Attributes:
        offsets: [n] deltas = i - j.
        attn: [L, H, n] mean attention weight at each delta (nan where no pair exists).
        logits: [L, H, n] mean pre-softmax score, or None where the model's logits are not
            available (families ``attention_parts.real_logits`` does not handle).
        causal: whether keys after the query are masked.
        n_windows, length: the windows averaged.
        query_start: first query averaged (causal models; 1 for bidirectional ones).
    """

    offsets: IntArray
    attn: Array
    logits: Array | None
    causal: bool
    n_windows: int
    length: int
    query_start: int

    def negative_self_bias(self, which: str = "attn") -> npt.NDArray[np.bool_]:
        """[L, H] heads whose kernel at delta 0 is below the mean of deltas 1-4."""
        k = self.attn if which == "attn" else self.logits
        if k is None:
            raise GeomlensError("no pre-softmax kernel was computed for this model.")
        return negative_self_bias(k, self.offsets)

    def to_dict(self) -> dict[str, Any]:
        """Negative self-bias fractions per layer and overall; kernels go to a side file."""
        out: dict[str, Any] = {
            "causal": self.causal,
            "n_windows": self.n_windows,
            "length": self.length,
            "query_start": self.query_start,
            "offsets_saved": [int(self.offsets[0]), int(self.offsets[-1])],
        }
        for which in ("attn", "logits"):
            if which == "logits" and self.logits is None:
                out["negative_self_bias_logits"] = None
                continue
            neg = self.negative_self_bias(which)
            suffix = "" if which == "attn" else "_logits"
            out[f"negative_self_bias_fraction{suffix}"] = sig(neg.mean())
            out[f"negative_self_bias_fraction_per_layer{suffix}"] = [sig(x) for x in neg.mean(1)]
            out[f"negative_self_bias_heads{suffix}"] = [
                [int(l), int(h)] for l, h in zip(*np.nonzero(neg), strict=True)
            ]
        k0 = self.attn[:, :, list(self.offsets).index(0)]
        out["mean_attention_at_offset_0_per_layer"] = [sig(x) for x in k0.mean(1)]
        return out

    def far_position(self) -> dict[str, Any]:
        """Far-position amplification of the attention kernel and, with the suffix
        ``_logits``, of the pre-softmax kernel (``far_position_dict``)."""
        out = far_position_dict(self.attn, self.offsets, self.causal)
        if self.logits is not None:
            logits = far_position_dict(self.logits, self.offsets, self.causal)
            out.update({f"{k}_logits": v for k, v in logits.items() if "offsets" not in k})
        return out


def negative_self_bias(kernel: Array, offsets: IntArray) -> npt.NDArray[np.bool_]:
    """[..., ] True where kernel[..., delta=0] < mean(kernel[..., delta in 1..4]).

    Args:
        kernel: [..., n] a kernel over ``offsets``.
        offsets: [n] its deltas (must include 0..4).
    """
    pos = {int(d): i for i, d in enumerate(offsets)}
    missing = [d for d in (0, *SELF_BIAS_OFFSETS) if d not in pos]
    if missing:
        raise GeomlensError(f"the kernel lacks offsets {missing} needed for the self-bias test.")
    near = kernel[..., [pos[d] for d in SELF_BIAS_OFFSETS]].mean(-1)
    return np.asarray(kernel[..., pos[0]] < near)


def _offset_mask(offsets: IntArray, bounds: tuple[int, int], causal: bool) -> npt.NDArray[np.bool_]:
    """[n] offsets with bounds[0] <= |delta| <= bounds[1] (delta >= 0 only when causal)."""
    mag = np.abs(offsets)
    inside = (mag >= bounds[0]) & (mag <= bounds[1])
    return inside & (offsets >= 0) if causal else inside


def far_amplification(
    kernel: Array, offsets: IntArray, causal: bool = False
) -> npt.NDArray[np.bool_] | None:
    """[...] True where the kernel's mean over far offsets exceeds its mean over middle ones.

    far = mean of kernel[..., delta] over 32 <= |delta| <= 63, middle = the same over
    8 <= |delta| <= 31 (both signs where present; delta >= 0 only for ``causal`` kernels,
    whose later keys are masked); offsets without data (nan) are left out.

    Args:
        kernel: [..., n] a kernel over ``offsets``.
        offsets: [n] its deltas.
        causal: whether only delta >= 0 counts.

    Returns:
        The test per head, or None when the kernel has no far or no middle offset with data
        (windows shorter than 33 tokens).
    """
    finite = np.isfinite(kernel).all(axis=tuple(range(kernel.ndim - 1)))
    far = _offset_mask(offsets, FAR_OFFSETS, causal) & finite
    middle = _offset_mask(offsets, MIDDLE_OFFSETS, causal) & finite
    if not far.any() or not middle.any():
        return None
    return np.asarray(kernel[..., far].mean(-1) > kernel[..., middle].mean(-1))


def far_position_dict(kernel: Array, offsets: IntArray, causal: bool) -> dict[str, Any]:
    """The far-position test of a kernel [..., n] as metrics: the fraction of heads, the
    heads (index tuples), or None and the reason when it cannot be computed."""
    amp = far_amplification(kernel, offsets, causal)
    out: dict[str, Any] = {"far_offsets": list(FAR_OFFSETS), "middle_offsets": list(MIDDLE_OFFSETS)}
    if amp is None:
        longest = int(
            np.abs(offsets[np.isfinite(kernel).all(axis=tuple(range(kernel.ndim - 1)))]).max()
        )
        out["far_amplification_fraction"] = None
        out["far_amplification_heads"] = None
        out["far_amplification_reason"] = (
            f"no far offsets (|delta| >= {FAR_OFFSETS[0]}) with data: the longest offset "
            f"measured is {longest}; use windows of at least {FAR_OFFSETS[0] + 2} tokens."
        )
        return out
    out["far_amplification_fraction"] = sig(amp.mean())
    out["far_amplification_heads"] = [
        [int(i) for i in ix] for ix in zip(*np.nonzero(amp), strict=True)
    ]
    out["far_amplification_reason"] = None
    return out


# --------------------------------------------------------------------------- scores


def cross_scores(block: Any, x: torch.Tensor, encoded: torch.Tensor) -> torch.Tensor:
    """A decoder block's cross-attention scores, in float64: [B, H, T, S].

    ``scale * q_i . k_j`` with q from the cross-attention's (normalised) input ``x``
    [B, T, d] and k from the encoder's output ``encoded`` [B, S, d]; the scale is the
    block's self-attention scale (1 for T5). No position bias: T5's cross-attention has none.
    """
    w = block.cross_heads()
    with torch.inference_mode():

        def project(v: torch.Tensor, W: torch.Tensor, b: torch.Tensor | None) -> torch.Tensor:
            out = torch.einsum("btd,hde->bhte", v.double().cpu(), W.double().cpu())
            return out if b is None else out + b.double().cpu()[None, :, None, :]

        q, k = project(x, w.W_Q, w.b_Q), project(encoded, w.W_K, w.b_K)
        return block.attn.scale * (q @ k.transpose(-1, -2))
