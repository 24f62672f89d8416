"""W_QK of each head seen in the basis of the top positional directions.

Per head, ``W_QK = G W_Q W_K^T G`` [d, d] (G = diag(gamma) of the pre-attention norm,
with LayerNorm's centring; identity for post-norm blocks) is read in the basis U [d, k] of
the top-k right singular vectors of the positional part: ``M = U^T W_QK U`` [k, k]. Song &
Zhong (2023) find M close to low-rank plus diagonal; this fits ``M ~ L + D`` (rank-r L,
diagonal D) by alternating projections and compares the residual with the same fit on a
Gaussian matrix. For rotary models a relative offset picks the rotation between query and
key (offset 0: no rotation). See docs/attention.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import torch

from geomlens.errors import GeomlensError
from geomlens.models.view import ModelView
from geomlens.stats.decomposition import DecompositionStats

Array = npt.NDArray[np.float64]

DEFAULT_RANK = 2
"""Rank r of the low-rank part (the paper's W_QK pictures show one or two smooth modes)."""

DEFAULT_ITERATIONS = 100


@dataclass(frozen=True)
class LowRankDiagonalFit:
    """``M ~ L + D`` with rank(L) <= r and D diagonal.

    Attributes:
        low_rank: [k, k] L. diagonal: [k] the diagonal of D.
        residual: ||M - L - D||_F / ||M||_F (nan if M = 0).
    """

    low_rank: Array
    diagonal: Array
    residual: float


@dataclass(frozen=True)
class HeadQK:
    """One head's W_QK in the positional basis.

    Attributes:
        head: query head index.
        matrix: [k, k] M = U^T W_QK U.
        fit: the low-rank plus diagonal fit of M.
        baseline_residual: the fit's residual on a seeded Gaussian [k, k] matrix.
        share_in_basis: ||M||_F / ||W_QK||_F.
    """

    head: int
    matrix: Array
    fit: LowRankDiagonalFit
    baseline_residual: float
    share_in_basis: float


@dataclass(frozen=True)
class QKBasis:
    """W_QK of the chosen heads of one block in the positional basis.

    Attributes:
        layer: block index (the basis comes from hidden-state layer ``layer``).
        k: basis size; rank: r; rotary_offset: i - j used for rotary models (0: none).
        singular_values: [k] the singular values of pos spanning the basis.
        heads: one ``HeadQK`` per head.
    """

    layer: int
    k: int
    rank: int
    rotary_offset: int
    singular_values: Array
    heads: tuple[HeadQK, ...]

    def to_dict(self) -> dict[str, Any]:
        """JSON-able summary (matrices left out)."""
        return {
            "layer": self.layer,
            "k": self.k,
            "rank": self.rank,
            "rotary_offset": self.rotary_offset,
            "heads": [
                {
                    "head": h.head,
                    "residual": h.fit.residual,
                    "baseline_residual": h.baseline_residual,
                    "share_in_basis": h.share_in_basis,
                }
                for h in self.heads
            ],
        }


def fit_low_rank_diagonal(
    matrix: Array, rank: int = DEFAULT_RANK, iterations: int = DEFAULT_ITERATIONS, tol: float = 1e-9
) -> LowRankDiagonalFit:
    """Fit ``M ~ L + D`` by alternating D = diag(M - L), L = best rank-r of (M - D).

    Starts from L = 0 and stops after ``iterations`` alternations or once L moves by less
    than ``tol`` (relative), so the result is deterministic.

    Args:
        matrix: [k, k] M.
        rank: r.
        iterations: the most alternations.
        tol: relative change of L below which the fit has converged.
    """
    return fit_low_rank_diagonal_many(np.asarray(matrix)[None], rank, iterations, tol)[0]


def fit_low_rank_diagonal_many(
    matrices: Array,
    rank: int = DEFAULT_RANK,
    iterations: int = DEFAULT_ITERATIONS,
    tol: float = 1e-9,
) -> list[LowRankDiagonalFit]:
    """``fit_low_rank_diagonal`` of each of n matrices, all alternating in one batched SVD.

    A matrix whose fit has converged is left as it is while the others go on, so each
    result equals the fit of that matrix alone.

    Args:
        matrices: [n, k, k] the matrices M.
        rank: r.
        iterations: the most alternations.
        tol: relative change of L below which a fit has converged.
    """
    M = np.asarray(matrices, dtype=np.float64)
    n, k, _ = M.shape
    eye = np.eye(k, dtype=bool)
    L = np.zeros_like(M)
    scale = np.maximum(np.linalg.norm(M, axis=(1, 2)), 1e-300)
    active = np.ones(n, dtype=bool)
    for _ in range(iterations):
        if not active.any():
            break
        rest = M[active] - L[active]
        U, s, Vt = np.linalg.svd(M[active] - rest * eye)  # M - diag(M - L), batched
        new = (U[:, :, :rank] * s[:, None, :rank]) @ Vt[:, :rank]
        moved = np.linalg.norm(new - L[active], axis=(1, 2))
        L[active] = new
        still = moved > tol * scale[active]
        active[np.flatnonzero(active)[~still]] = False
    fits = []
    for m, low in zip(M, L, strict=True):
        D = np.diag(m - low).copy()
        norm = float(np.linalg.norm(m))
        residual = float(np.linalg.norm(m - low - np.diag(D))) / norm if norm > 0 else float("nan")
        fits.append(LowRankDiagonalFit(low_rank=low, diagonal=D, residual=residual))
    return fits


def positional_basis(stats: DecompositionStats, k: int) -> tuple[Array, Array]:
    """The top-k right singular vectors of pos: ([d, k] orthonormal, [k] singular values)."""
    _, s, Vt = np.linalg.svd(np.asarray(stats.pos, dtype=np.float64), full_matrices=False)
    if k > len(s):
        raise GeomlensError(f"k = {k} exceeds the {len(s)} singular values of pos")
    return Vt[:k].T, s[:k]


def rotation(view: ModelView, offset: int, layer: int = 0) -> torch.Tensor:
    """[d_head, d_head] R with rope(q, i) . rope(k, j) = q R k^T for i - j = offset (float64),
    for block ``layer``'s rotary (its own base, partial width and pairing)."""
    rotary = view.blocks[layer].attn.rotary
    if rotary is None:
        raise GeomlensError("rotary_offset applies to rotary models only")
    return rotary.rotation(view.d_head, offset)


def head_qk(view: ModelView, layer: int, rotary_offset: int = 0) -> torch.Tensor:
    """[H, d, d] float64 W_QK = G W_Q R W_K^T G per head (G: the folded input-norm gain)."""
    block = view.blocks[layer]
    w = block.heads()
    W_Q, W_K = w.W_Q.double().cpu(), w.W_K.double().cpu()
    if block.attn.rotary is not None:
        W_Q = W_Q @ rotation(view, rotary_offset, layer)
    elif rotary_offset:
        raise GeomlensError("rotary_offset applies to rotary models only")
    qk = W_Q @ W_K.transpose(1, 2)
    norm = block.attn_input_norm
    if norm is not None:
        G = torch.diag(norm.weight.double().cpu())
        if norm.kind == "layernorm":
            d = view.d_model
            G = (torch.eye(d, dtype=torch.float64) - 1.0 / d) @ G
        qk = G @ qk @ G.T
    return qk


def qk_positional_basis(
    view: ModelView,
    layer: int,
    stats: DecompositionStats,
    k: int,
    rank: int = DEFAULT_RANK,
    heads: Sequence[int] | None = None,
    rotary_offset: int = 0,
    iterations: int = DEFAULT_ITERATIONS,
    seed: int = 0,
) -> QKBasis:
    """W_QK of a block's heads in the top-k positional basis, with low-rank + diagonal fits.

    Args:
        view: the model.
        layer: block index; ``stats`` must be of hidden-state layer ``layer`` (its input).
        stats: the decomposition that gives the positional basis.
        k: basis size (e.g. pos_rank95 capped at 20).
        rank: r of the low-rank part.
        heads: which query heads (default all).
        rotary_offset: for rotary models, the query-minus-key offset whose rotation is
            folded in (0 = identity: the rotation ignored).
        iterations: alternations of the fit.
        seed: seed of the Gaussian baseline (one matrix per head, seed + head).
    """
    if stats.layer != layer:
        raise GeomlensError(f"stats are of hidden-state layer {stats.layer}, not {layer}")
    U, sv = positional_basis(stats, k)
    Ut = torch.as_tensor(U)
    qk = head_qk(view, layer, rotary_offset)
    chosen = list(range(view.n_heads) if heads is None else heads)
    matrices = np.stack([(Ut.T @ qk[h] @ Ut).numpy() for h in chosen])
    gaussians = np.stack([np.random.default_rng(seed + h).standard_normal((k, k)) for h in chosen])
    fits = fit_low_rank_diagonal_many(np.concatenate([matrices, gaussians]), rank, iterations)
    results = []
    for i, h in enumerate(chosen):
        total = float(torch.linalg.norm(qk[h]))
        results.append(
            HeadQK(
                head=int(h),
                matrix=matrices[i],
                fit=fits[i],
                baseline_residual=fits[len(chosen) + i].residual,
                share_in_basis=float(np.linalg.norm(matrices[i])) / total
                if total > 0
                else float("nan"),
            )
        )
    return QKBasis(
        layer=layer,
        k=k,
        rank=rank,
        rotary_offset=rotary_offset,
        singular_values=sv,
        heads=tuple(results),
    )
