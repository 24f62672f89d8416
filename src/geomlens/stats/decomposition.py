"""Streaming statistics for the position/context decomposition of hidden states.

For C contexts x T positions, the balanced decomposition
``h[c,t] = mu + pos[t] + ctx[c] + resid[c,t]`` needs only first moments per position
and per context, the total sum of squares, and (for spectral norms of the uncentred
states) the second-moment matrix ``sum h h^T``. All sums are float64.
"""

from __future__ import annotations

import functools
import math
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from geomlens.errors import GeomlensError, short_list
from geomlens.stats.base import CapturedBatch

_COUNTING = threading.Lock()
"""Held while ``variances_clamped`` is added to (layers are analysed in threads)."""


@dataclass(frozen=True)
class DecompositionStats:
    """Finalized decomposition of one layer's hidden states.

    Attributes:
        layer: hidden-state layer (0 = embedding output).
        mean: [d] the global mean mu.
        pos: [T', d] positional part, mean over contexts minus mu (T' = T or T-1).
        ctx: [C, d] context part, mean over positions minus mu.
        total_ss: sum over (c,t) of |h - mu|^2.
        second_moment: [d, d] uncentred ``sum h h^T`` over all used (c,t), or None.
        second_sketch: [d, r] ``second_moment @ sketch_basis(d, r)``, or None: what a
            resample keeps of the second moments (``resample`` fills it, ``finalize``
            has the matrix itself).
        n_contexts: C.
        positions: the positions kept (0..T-1, or 1..T-1 when the first is skipped).
        skip_first: whether position 0 was dropped.
        clamped: whether ``total_ss`` came out below zero by rounding (a sum of squares
            less n |mu|^2 when every state is nearly the same) and was set to zero.
    """

    layer: int
    mean: np.ndarray
    pos: np.ndarray
    ctx: np.ndarray
    total_ss: float
    second_moment: np.ndarray | None
    n_contexts: int
    positions: np.ndarray
    skip_first: bool
    second_sketch: np.ndarray | None = None
    clamped: bool = False

    @property
    def length(self) -> int:
        return int(self.pos.shape[0])

    @property
    def raw_shares(self) -> tuple[float, float, float]:
        """The shares as computed, before clamping (rounding may put one just outside [0, 1])."""
        c, t = self.n_contexts, self.length
        if not self.total_ss > 0:
            return math.nan, math.nan, math.nan
        s_pos = c * float(np.sum(self.pos**2)) / self.total_ss
        s_ctx = t * float(np.sum(self.ctx**2)) / self.total_ss
        return s_pos, s_ctx, 1.0 - s_pos - s_ctx

    @property
    def shares(self) -> tuple[float, float, float]:
        """(share_pos, share_ctx, share_resid): parts of total_ss, each in [0, 1] (a share
        rounding puts outside is clamped: ``shares_clamped`` counts them); nan if 0."""
        pos, ctx, resid = (min(1.0, max(0.0, s)) if s == s else s for s in self.raw_shares)
        return pos, ctx, resid

    @property
    def shares_clamped(self) -> int:
        """How many of ``shares`` were clamped into [0, 1]."""
        return sum(1 for s in self.raw_shares if s < 0.0 or s > 1.0)


GROUP_BYTES = 64 * 2**20
"""Most bytes of float64 hidden states ``update`` stacks at once (a group of layers): a
few groups cut the operations per batch tenfold, and the stacked copies stay small beside
the hidden states themselves."""


INTERVAL_BYTES = 256 * 2**20
"""Most bytes of the float32 per-group positional sums kept for intervals (all layers)."""

GROUP_STATE = ("group_pos_sum", "ctx_sumsq", "group_sketch")
"""The state entries of the interval groups (a run saved before the sketch existed has the
first two only)."""

NORMS = "window_norms"
"""The state entry of every window's hidden-state norm per layer and position, [L, C, T]
float32: what finds the outlier windows (``analyses.decomposition.outliers``). A run saved
before it existed has none: no outlier information."""

PER_WINDOW = {"ctx_sum": 1, "first": 1, "seen": 0, "ctx_sumsq": 1, NORMS: 1}
"""State entries indexed by window, and the axis of that index (the rest sum over windows)."""

OPTIONAL_STATE = (*GROUP_STATE, NORMS)
"""State entries a run saved before they existed may lack (it loads without them)."""

SKETCH_RANKS = (64, 32, 16)
"""Columns of the random test matrix that sketches each group's second moments: the first
that fits ``SKETCH_BYTES``. More columns estimate a resample's top eigenvalue better (see
docs/decomposition.md, "Intervals")."""

SKETCH_BYTES = 512 * 2**20
"""Most bytes of the float64 per-group sketches (all layers); larger ones are not kept."""


def sketch_rank(n_layers: int, groups: int, d_model: int, budget: int = SKETCH_BYTES) -> int:
    """Columns of each group's second-moment sketch: the most of ``SKETCH_RANKS`` whose
    sketches (float64, every layer and group) fit ``budget``; 0 (no sketch, no
    relative-norm intervals) without groups or when none fits."""
    for rank in SKETCH_RANKS if groups else ():
        if n_layers * groups * d_model * rank * 8 <= budget:
            return rank
    return 0


def sketch_basis(d_model: int, rank: int) -> np.ndarray:
    """[d, r] the fixed Gaussian test matrix of the sketches (seeded by its shape, so every
    shard and every resume uses the same one). Drawn once per shape (every resample of
    every layer reads it); each call returns its own copy."""
    return _sketch_basis(d_model, rank).copy()


@functools.lru_cache(maxsize=4)
def _sketch_basis(d_model: int, rank: int) -> np.ndarray:
    return np.random.default_rng([d_model, rank, 1729]).standard_normal((d_model, rank))


MAX_GROUPS, MIN_GROUPS = 16, 8
"""Groups of contexts resampled for intervals: at most 16; fewer than 8 give none."""


def interval_groups(
    n_layers: int, n_contexts: int, length: int, d_model: int, budget: int = INTERVAL_BYTES
) -> int:
    """How many groups of contexts keep their own positional sums for resampling: up to
    ``MAX_GROUPS`` (never more than the contexts), as many as ``budget`` holds in float32;
    0 (no intervals) when fewer than ``MIN_GROUPS`` fit."""
    per_group = max(1, n_layers * length * d_model * 4)
    groups = min(MAX_GROUPS, n_contexts, budget // per_group)
    return groups if groups >= MIN_GROUPS else 0


def clamped_at_zero(value: float) -> tuple[float, bool]:
    """A variance (or sum of squares about a mean) that rounding took below zero, set to
    zero; and whether it was. ``sum x^2 - n mean^2`` cancels catastrophically when the
    values barely vary, and a negative result has a complex square root."""
    return (0.0, True) if value < 0 else (value, False)


class NonFiniteError(ValueError):
    """A batch held NaN or infinite hidden states; nothing of it was added."""

    def __init__(self, layer: int) -> None:
        super().__init__(f"layer {layer} holds NaN or infinite values")
        self.layer = layer


def state_spec(
    layers: Sequence[int],
    n_contexts: int,
    length: int,
    d_model: int,
    second_moment: bool,
    groups: int = 0,
) -> dict[str, tuple[tuple[int, ...], torch.dtype]]:
    """Name, shape and dtype of every tensor of a decomposition accumulator's state."""
    n_l, f64 = len(layers), torch.float64
    spec: dict[str, tuple[tuple[int, ...], torch.dtype]] = {
        "layers": ((n_l,), torch.int64),
        "pos_sum": ((n_l, length, d_model), f64),
        "ctx_sum": ((n_l, n_contexts, d_model), f64),
        "first": ((n_l, n_contexts, d_model), f64),
        "sumsq": ((n_l,), f64),
        "seen": ((n_contexts,), torch.int64),
        NORMS: ((n_l, n_contexts, length), torch.float32),
    }
    if second_moment:
        spec["second"] = ((n_l, d_model, d_model), f64)
    if groups:
        spec["group_pos_sum"] = ((n_l, groups, length, d_model), torch.float32)
        spec["ctx_sumsq"] = ((n_l, n_contexts), f64)
        rank = sketch_rank(n_l, groups, d_model) if second_moment else 0
        if rank:
            spec["group_sketch"] = ((n_l, groups, d_model, rank), f64)
    return spec


class DecompositionAccumulator:
    """Per-layer sums for the decomposition over a fixed grid of C contexts x T positions.

    Each context must be seen exactly once (in any batch, in any shard). Position 0 is
    kept separately per context so that ``finalize(skip_first=True)`` can drop it
    without a second capture.

    With ``groups`` > 0 the contexts fall into that many contiguous blocks (context c of
    ``total_contexts`` in block c * groups // total_contexts), and each block keeps its own
    positional sums (float32) and each context its sum of squares: enough to redo the
    decomposition on a resample of blocks (``resample``) for intervals, in memory that
    does not grow with the corpus. With second moments, each block also keeps a sketch of
    its own, ``sum h h^T @ Omega`` for a fixed [d, r] Gaussian ``Omega``: a resample's
    top eigenvalue comes from it (``analyses.decomposition.compute.relative_norms``) where the
    d x d matrices of every block would not fit. A shard's accumulator covers contexts
    ``context_offset`` onwards of ``total_contexts``.

    Every window's hidden-state norm at each layer and position is kept too
    (``window_norms``, [L, C, T] float32, about T / (4 d) of the context sums' memory): the
    outlier windows are found from it after the capture, with no second pass
    (``analyses.decomposition.outliers``), and ``without`` takes them out exactly.
    """

    def __init__(
        self,
        layers: Sequence[int],
        n_contexts: int,
        length: int,
        d_model: int,
        second_moment: bool = True,
        device: torch.device | str = "cpu",
        groups: int = 0,
        context_offset: int = 0,
        total_contexts: int | None = None,
    ) -> None:
        self.layers = list(layers)
        self.variances_clamped = 0
        """How many ``finalize`` and ``resample`` results had their sum of squares about
        the mean clamped at zero (``clamped_at_zero``); recorded beside the numbers."""
        self.n_contexts, self.length, self.d_model = n_contexts, length, d_model
        self.with_second_moment = second_moment
        n_l, f64 = len(self.layers), torch.float64
        self.pos_sum = torch.zeros(n_l, length, d_model, dtype=f64, device=device)
        self.ctx_sum = torch.zeros(n_l, n_contexts, d_model, dtype=f64, device=device)
        self.first = torch.zeros(n_l, n_contexts, d_model, dtype=f64, device=device)
        self.sumsq = torch.zeros(n_l, dtype=f64, device=device)
        self.seen = torch.zeros(n_contexts, dtype=torch.int64, device=device)
        self.window_norms: torch.Tensor | None = torch.zeros(
            n_l, n_contexts, length, dtype=torch.float32, device=device
        )
        """[L, C, T] ||h[c, t]|| per layer; None where a saved run kept none."""
        self.second = (
            torch.zeros(n_l, d_model, d_model, dtype=f64, device=device) if second_moment else None
        )
        self.groups = groups
        total = n_contexts if total_contexts is None else total_contexts
        rows = torch.arange(context_offset, context_offset + n_contexts, device=device)
        self.group_of = rows * groups // max(total, 1)
        self.group_pos_sum = (
            torch.zeros(n_l, groups, length, d_model, dtype=torch.float32, device=device)
            if groups
            else None
        )
        self.ctx_sumsq = torch.zeros(n_l, n_contexts, dtype=f64, device=device) if groups else None
        rank = sketch_rank(n_l, groups, d_model) if second_moment else 0
        self.sketch_basis = (
            torch.from_numpy(sketch_basis(d_model, rank)).to(device) if rank else None
        )
        self.group_sketch = (
            torch.zeros(n_l, groups, d_model, rank, dtype=f64, device=device) if rank else None
        )

    def update(self, batch: CapturedBatch) -> None:
        """Add one batch; raises NonFiniteError (state untouched) if any value is NaN/inf.

        Layers are reduced in groups stacked into one tensor (all of a small model's layers
        in one group), so each sum is one operation for the group rather than one per
        layer: on a shared CPU, every operation's threads wait for each other whenever one
        is descheduled, and per-layer operations (about 13 per layer with second moments)
        cost more in waiting than in arithmetic. The sums are bit for bit the per-layer
        ones. Everything stays on the accumulator's device: the only value read back to
        the host per batch is one flag (are all sums of squares finite?).
        """
        idx = batch.context_index.to(self.seen.device)
        for layer in self.layers:
            h = batch.hidden[layer]
            if h.shape[1:] != (self.length, self.d_model):
                expected = f"[B, {self.length}, {self.d_model}]"
                raise ValueError(f"layer {layer}: expected {expected}, got {tuple(h.shape)}")
        parts = [self._group_sums(batch, group) for group in self._groups(batch)]
        finite = torch.isfinite(torch.cat([part[4] for part in parts]))
        if not bool(finite.all()):  # one device-to-host read per batch
            raise NonFiniteError(self.layers[int(finite.logical_not().nonzero()[0, 0])])
        for rows, pos, ctx, first, sumsq, second, row_sq, sketch, norms in parts:
            self.pos_sum[rows] += pos
            self.ctx_sum[rows].index_add_(1, idx, ctx)
            self.first[rows].index_copy_(1, idx, first)
            if self.window_norms is not None:
                self.window_norms[rows].index_copy_(1, idx, norms)
            self.sumsq[rows] += sumsq
            if self.second is not None and second is not None:
                self.second[rows] += second
            if self.ctx_sumsq is not None and row_sq is not None:
                self.ctx_sumsq[rows].index_add_(1, idx, row_sq)
            if self.group_sketch is not None and sketch is not None:
                self.group_sketch[rows].index_add_(1, self.group_of[idx], sketch)
        if self.group_pos_sum is not None:
            group = self.group_of[idx]
            for i, layer in enumerate(self.layers):
                h = batch.hidden[layer].to(self.seen.device, torch.float32)
                self.group_pos_sum[i].index_add_(0, group, h)
        self.seen.index_add_(0, idx, torch.ones_like(idx))

    def _groups(self, batch: CapturedBatch) -> list[slice]:
        """Consecutive slices of ``self.layers`` whose float64 copies fit GROUP_BYTES."""
        n_rows = int(batch.hidden[self.layers[0]].shape[0])
        per_layer = max(1, n_rows * self.length * self.d_model * 8)
        size = max(1, GROUP_BYTES // per_layer)
        n_l = len(self.layers)
        return [slice(i, min(n_l, i + size)) for i in range(0, n_l, size)]

    def _group_sums(
        self, batch: CapturedBatch, rows: slice
    ) -> tuple[
        slice,
        torch.Tensor,
        torch.Tensor,
        torch.Tensor,
        torch.Tensor,
        torch.Tensor | None,
        torch.Tensor | None,
        torch.Tensor | None,
        torch.Tensor,
    ]:
        """One group's sums: (rows, pos [g,T,d], ctx [g,B,d], first [g,B,d], sumsq [g],
        second, row_sq [g,B] each context's sum of squares, kept with interval groups,
        sketch [g,B,d,r] each context's ``sum_t h h^T @ Omega``, kept with the sketches,
        norms [g,B,T] float32 each state's norm).

        One float64 copy of the group, read by each sum: casting inside every reduction
        would copy once per sum, and these copies, not the sums, bound the time on a GPU.
        Float64 throughout also lets finalize(skip_first=True) subtract position 0's
        (possibly massive) squares exactly. Second moments and their sketches add
        positions 1.. as float32 products (in float64 afterwards) and position 0 in float64.
        """
        device = self.pos_sum.device
        h = torch.stack([batch.hidden[layer].to(device) for layer in self.layers[rows]])
        h64 = h.to(torch.float64)
        sumsq = torch.linalg.vector_norm(h64.flatten(1), dim=1).square()
        rest, first = h[:, :, 1:].to(torch.float32), h64[:, :, 0]
        second = None
        if self.second is not None:
            flat = rest.reshape(h.shape[0], -1, self.d_model)
            second = torch.bmm(flat.transpose(1, 2), flat).double() + torch.bmm(
                first.transpose(1, 2), first
            )
        row_sq = h64.square().sum((2, 3)) if self.groups else None
        sketch = None
        if self.sketch_basis is not None:  # per context: sum_t h h^T Omega, alike
            projected = rest @ self.sketch_basis.to(torch.float32)
            sketch = (rest.transpose(2, 3) @ projected).double()
            sketch += first.unsqueeze(3) * (first @ self.sketch_basis).unsqueeze(2)
        norms = torch.linalg.vector_norm(h64, dim=3).to(torch.float32)
        return rows, h64.sum(1), h64.sum(2), first.clone(), sumsq, second, row_sq, sketch, norms

    def merge(self, other: DecompositionAccumulator) -> DecompositionAccumulator:
        """Add another shard's sums into this one (in place) and return self."""
        if (other.layers, other.n_contexts, other.length, other.d_model) != (
            self.layers,
            self.n_contexts,
            self.length,
            self.d_model,
        ):
            raise ValueError("cannot merge decomposition accumulators of different shapes")
        if other._group_names() != self._group_names():
            raise ValueError("cannot merge accumulators with different interval groups")
        for name in ("pos_sum", "ctx_sum", "first", "sumsq", "seen", *self._group_names()):
            getattr(self, name).add_(getattr(other, name).to(self.seen.device))
        if self.window_norms is not None and other.window_norms is not None:
            self.window_norms.add_(other.window_norms.to(self.seen.device))
        else:  # a shard without norms (resumed from an older checkpoint): none for the run
            self.window_norms = None
        if self.second is not None and other.second is not None:
            self.second.add_(other.second.to(self.seen.device))
        elif self.second is not None or other.second is not None:
            raise ValueError("cannot merge an accumulator with second moments into one without")
        return self

    def state_dict(self) -> dict[str, torch.Tensor]:
        state = {
            "layers": torch.tensor(self.layers, dtype=torch.int64),
            "pos_sum": self.pos_sum,
            "ctx_sum": self.ctx_sum,
            "first": self.first,
            "sumsq": self.sumsq,
            "seen": self.seen,
        }
        if self.second is not None:
            state["second"] = self.second
        if self.window_norms is not None:
            state[NORMS] = self.window_norms
        for name in self._group_names():
            state[name] = getattr(self, name)
        return {k: v.detach().cpu().contiguous() for k, v in state.items()}

    def _group_names(self) -> tuple[str, ...]:
        """The state entries of the interval groups this accumulator keeps."""
        return tuple(name for name in GROUP_STATE if getattr(self, name) is not None)

    def state_spec(self) -> dict[str, tuple[tuple[int, ...], torch.dtype]]:
        """Name, shape and dtype of every tensor of ``state_dict()`` (nothing is copied)."""
        spec = state_spec(
            self.layers,
            self.n_contexts,
            self.length,
            self.d_model,
            self.second is not None,
            self.groups,
        )
        if self.group_sketch is None:
            spec.pop("group_sketch", None)
        if self.window_norms is None:
            spec.pop(NORMS)
        return spec

    def load_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        if state["layers"].tolist() != self.layers:
            raise ValueError("saved decomposition state covers other layers")
        for name in ("pos_sum", "ctx_sum", "first", "sumsq", "seen"):
            getattr(self, name).copy_(state[name])
        if NORMS in state:
            self.window_norms = state[NORMS].to(self.seen.device, torch.float32).clone()
        else:  # saved before the norms existed: no outlier information
            self.window_norms = None
        if self.second is not None:
            if "second" not in state:
                raise ValueError("saved decomposition state has no second moments")
            self.second.copy_(state["second"])
        for name in self._group_names():
            if name == "group_sketch":
                self._load_sketch(state.get(name))
            elif name not in state:
                raise ValueError("saved decomposition state has no interval groups")
            else:
                getattr(self, name).copy_(state[name])

    def _load_sketch(self, saved: torch.Tensor | None) -> None:
        """Take a saved sketch as it is: none (saved before sketches existed), or of the
        rank it was saved with."""
        if saved is None or self.group_sketch is None:
            self.group_sketch = self.sketch_basis = None
            return
        device = self.seen.device
        rank = int(saved.shape[-1])
        self.sketch_basis = torch.from_numpy(sketch_basis(self.d_model, rank)).to(device)
        self.group_sketch = saved.to(device, torch.float64).clone()

    @classmethod
    def from_state_dict(cls, state: dict[str, torch.Tensor]) -> DecompositionAccumulator:
        _, n_contexts, d_model = state["ctx_sum"].shape
        acc = cls(
            state["layers"].tolist(),
            n_contexts,
            state["pos_sum"].shape[1],
            d_model,
            second_moment="second" in state,
            groups=int(state["group_pos_sum"].shape[1]) if "group_pos_sum" in state else 0,
        )
        acc.load_state_dict(state)
        return acc

    def empty_like(self, device: torch.device | str | None = None) -> DecompositionAccumulator:
        """An accumulator of this one's grid (layers, C x T, d, interval groups and their
        assignment, second moments, sketch rank) with nothing seen yet."""
        device = self.seen.device if device is None else device
        acc = DecompositionAccumulator(
            self.layers,
            self.n_contexts,
            self.length,
            self.d_model,
            self.second is not None,
            device=device,
            groups=self.groups,
        )
        acc.group_of = self.group_of.to(device)
        if self.group_sketch is None:
            acc._load_sketch(None)
        elif acc.group_sketch is not None and acc.group_sketch.shape != self.group_sketch.shape:
            acc._load_sketch(torch.zeros_like(self.group_sketch))
        return acc

    def without(self, removed: DecompositionAccumulator) -> DecompositionAccumulator:
        """A new accumulator over every window but those ``removed`` saw: equal, to
        rounding, to one that never saw them.

        Every sum over windows is linear in them, so ``removed`` (the same grid: layers,
        C, T, d, groups and second moments, fed exactly the windows to take out, with the
        same hidden states) is subtracted from the sums over windows (positional sums,
        sums of squares, second moments, group sums and sketches), and the per-window rows
        (context sums, position 0, sums of squares, norms) of its windows are dropped. The
        new accumulator's rows are the kept windows in their order, each in the interval
        group it had (a group left with no window is dropped, the others renumbered in
        order). The float64 sums subtract to float64 rounding; the group positional sums
        are float32 here as everywhere.

        Raises:
            ValueError: for another grid, or when either has not seen its windows once.
        """
        if (removed.layers, removed.n_contexts, removed.length, removed.d_model) != (
            self.layers,
            self.n_contexts,
            self.length,
            self.d_model,
        ) or removed.groups != self.groups:
            raise ValueError("the windows to take out were accumulated on another grid")
        if not self.complete or bool((removed.seen > 1).any()):
            raise ValueError("both accumulators must have seen each of their windows once")
        keep = (removed.seen.cpu() == 0).nonzero().squeeze(1)
        mine, theirs = self.state_dict(), removed.state_dict()
        out: dict[str, torch.Tensor] = {"layers": mine["layers"]}
        for name, tensor in mine.items():
            if name in PER_WINDOW:
                out[name] = tensor.index_select(PER_WINDOW[name], keep)
            elif name != "layers":
                if name not in theirs:
                    raise ValueError(f"the windows to take out have no {name}")
                out[name] = (tensor.double() - theirs[name].double()).to(tensor.dtype)
        group_of = self.group_of.cpu()[keep]
        if self.groups:  # a group left with no window is dropped (its sums are only rounding)
            used = torch.unique(group_of)
            for name in ("group_pos_sum", "group_sketch"):
                if name in out:
                    out[name] = out[name].index_select(1, used)
            group_of = torch.searchsorted(used, group_of)
        acc = DecompositionAccumulator.from_state_dict(out)
        acc.group_of = group_of
        return acc

    @property
    def complete(self) -> bool:
        return bool((self.seen == 1).all())

    def layer_index(self, layer: int) -> int:
        """Where ``layer``'s sums are kept; one sentence when it was not captured."""
        if layer not in self.layers:
            shown = repr(layer)[:40]
            raise GeomlensError(
                f"layer {shown} was not captured: these statistics hold layers "
                f"{short_list(self.layers)}; ask for one of them, or capture again with "
                f"--layers including {shown}."
            )
        return self.layers.index(layer)

    def finalize(
        self, layer: int, skip_first: bool = False, second_moment: bool = True
    ) -> DecompositionStats:
        """The decomposition of one layer; every context must have been seen exactly once.

        ``second_moment=False`` leaves the d x d second moments out (None) where they are
        not read: copying them and taking position 0 out of them costs more than the rest.
        """
        if not self.complete:
            missing = int((self.seen == 0).sum())
            twice = int((self.seen > 1).sum())
            raise ValueError(
                f"decomposition statistics are incomplete: {missing} contexts missing, "
                f"{twice} seen more than once"
            )
        i = self.layer_index(layer)
        pos_sum = self.pos_sum[i].cpu().numpy()
        ctx_sum = self.ctx_sum[i].cpu().numpy()
        sumsq = float(self.sumsq[i])
        second = None
        if self.second is not None and second_moment:
            second = self.second[i].cpu().numpy().copy()
        n_c, t0 = self.n_contexts, 0
        if skip_first:
            first = self.first[i].cpu().numpy()
            pos_sum, t0 = pos_sum[1:], 1
            ctx_sum = ctx_sum - first
            sumsq -= float(np.sum(first**2))
            if second is not None:
                second -= first.T @ first
        return self._stats(layer, pos_sum, ctx_sum, sumsq, n_c, t0, skip_first, second=second)

    def _stats(
        self,
        layer: int,
        pos_sum: np.ndarray,
        ctx_sum: np.ndarray,
        sumsq: float,
        n_c: int,
        t0: int,
        skip_first: bool,
        second: np.ndarray | None = None,
        sketch: np.ndarray | None = None,
    ) -> DecompositionStats:
        """The decomposition from one layer's sums over n_c contexts: pos_sum [T, d],
        ctx_sum [n_c, d] (one row per context), sumsq (of every hidden state). A total
        variance that rounding takes below zero is clamped and counted; the layers are
        analysed in threads (``analyses.common.layer_threads``), so the count is taken under a
        lock."""
        n_t = pos_sum.shape[0]
        mean = pos_sum.sum(0) / (n_c * n_t)
        total_ss, clamped = clamped_at_zero(sumsq - n_c * n_t * float(mean @ mean))
        if clamped:
            with _COUNTING:
                self.variances_clamped += clamped
        return DecompositionStats(
            layer=layer,
            mean=mean,
            pos=pos_sum / n_c - mean,
            ctx=ctx_sum / n_t - mean,
            total_ss=total_ss,
            clamped=clamped,
            second_moment=second,
            n_contexts=n_c,
            positions=np.arange(t0, self.length),
            skip_first=skip_first,
            second_sketch=sketch,
        )

    def resample(
        self, layer: int, weights: np.ndarray, skip_first: bool = False
    ) -> tuple[DecompositionStats, np.ndarray]:
        """The decomposition of one layer over a resample of the context groups.

        Args:
            layer: the hidden-state layer.
            weights: [groups] how often each group is drawn (a bootstrap's counts).
            skip_first: leave position 0 out.

        Returns:
            (stats, rows): the decomposition of the drawn contexts (a context drawn k
            times is k rows of its ``ctx``; no second moments, but their sketch where
            the groups keep one) and [C*] the context each row of that ``ctx`` is, to
            resample labels alike.
        """
        return self.resampler(layer, skip_first)(weights)

    def resampler(
        self, layer: int, skip_first: bool = False
    ) -> Callable[[np.ndarray], tuple[DecompositionStats, np.ndarray]]:
        """``resample`` of one layer as a function of the weights, for many draws: the
        layer's sums are read (and position 0 taken out of them) once, not per draw."""
        if self.group_pos_sum is None or self.ctx_sumsq is None:
            raise ValueError("this accumulator keeps no interval groups")
        i = self.layer_index(layer)
        group_of = self.group_of.cpu().numpy()
        group_sums = self.group_pos_sum[i].cpu().numpy().astype(np.float64)
        ctx_sum = self.ctx_sum[i].cpu().numpy()
        sumsq = self.ctx_sumsq[i].cpu().numpy()
        group_sketch, basis = None, None
        if self.group_sketch is not None and self.sketch_basis is not None:
            group_sketch = self.group_sketch[i].cpu().numpy()
            basis = self.sketch_basis.cpu().numpy()
        t0, first = 0, None
        if skip_first:
            first = self.first[i].cpu().numpy()
            t0 = 1
            ctx_sum = ctx_sum - first
            sumsq = sumsq - np.sum(first**2, axis=1)

        def draw(weights: np.ndarray) -> tuple[DecompositionStats, np.ndarray]:
            w = np.asarray(weights, dtype=np.float64)
            per_context = w[group_of]
            rows = np.repeat(np.arange(self.n_contexts), per_context.astype(np.int64))
            pos_sum = np.tensordot(w, group_sums, axes=1)[t0:]  # [T, d]
            sketch = None
            if group_sketch is not None and basis is not None:
                sketch = np.tensordot(w, group_sketch, axes=1)  # [d, r]
                if first is not None:
                    drawn = first[rows]
                    sketch = sketch - drawn.T @ (drawn @ basis)
            total = float(per_context @ sumsq)
            stats = self._stats(
                layer, pos_sum, ctx_sum[rows], total, len(rows), t0, skip_first, sketch=sketch
            )
            return stats, rows

        return draw
