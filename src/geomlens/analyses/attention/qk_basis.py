"""W_QK of each head seen in the basis of the top positional directions.

Per head, ``W_QK = G W_Q W_K^T G`` [d, d] (G = diag(gamma) of the pre-attention norm,
with LayerNorm's centring; identity for post-norm blocks) is read in the basis U [d, k] of
the top-k right singular vectors of the positional part: ``M = U^T W_QK U`` [k, k]. Song &
Zhong (2023) find M close to low-rank plus diagonal; this fits ``M ~ L + D`` (rank-r L,
diagonal D) by alternating projections and compares the residual with the same fit on a
Gaussian matrix. The same fit over the whole [d, d] W_QK (``WholeQK``) checks the rest of
the claim: that the whole matrix is low-rank plus diagonal, and that its low-rank part lies
in the positional subspace. The rank r of each head's low-rank part is read from W_QK's own
singular values by ScreeNOT (``qk_rank``), as the authors read the positional part's rank,
rather than fixed. For rotary models a relative offset picks the rotation between query and
key (offset 0: no rotation). See docs/attention.md.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import torch

from geomlens.analyses.common import spectra
from geomlens.errors import GeomlensError
from geomlens.models.view import ModelView
from geomlens.stats.decomposition import DecompositionStats

Array = npt.NDArray[np.float64]

DEFAULT_RANK = 2
"""Rank r of a fit asked for without a rank (the fits' own default; the analysis reads each
head's rank from its spectrum, ``qk_rank``)."""

DEFAULT_ITERATIONS = 100

WHOLE_ITERATIONS = 100
"""The most alternations of the whole-matrix fit (each a warm-started randomized SVD)."""

OVERSAMPLE = 6
"""Extra directions of the warm-started subspace of the whole-matrix fit."""


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
class WholeQK:
    """The low-rank plus diagonal fit of one head's whole W_QK [d, d], in model coordinates.

    Attributes:
        rank: r, the rank of L (``qk_rank`` of W).
        residual: ||W - L - D||_F / ||W||_F of the whole matrix.
        baseline_residual: the same fit's residual, at the same rank, on a random head.
        in_basis: ||U^T L U||_F / ||L||_F, the share of the low-rank part inside the top-k
            positional directions U (1: it lies wholly there; None at rank 0: no part).
        baseline_in_basis: the same share for the Gaussian matrix's low-rank part (about
            k / d for directions unrelated to U).
        low_rank_share: ||L||_F^2 / ||W||_F^2, how much of W the part the share reads is.
    """

    rank: int
    residual: float
    baseline_residual: float
    in_basis: float | None
    baseline_in_basis: float | None
    low_rank_share: float


@dataclass(frozen=True)
class HeadQK:
    """One head's W_QK in the positional basis.

    Attributes:
        head: query head index.
        rank: r of this head's fits (``qk_rank`` of its W_QK, or the rank asked for).
        matrix: [k, k] M = U^T W_QK U.
        fit: the low-rank plus diagonal fit of M.
        baseline_residual: the fit's residual on a seeded Gaussian [k, k] matrix.
        share_in_basis: ||M||_F / ||W_QK||_F.
        whole: the fit of the whole W_QK (None where it was not computed).
    """

    head: int
    rank: int
    matrix: Array
    fit: LowRankDiagonalFit
    baseline_residual: float
    share_in_basis: float
    whole: WholeQK | None = None


@dataclass(frozen=True)
class QKBasis:
    """W_QK of the chosen heads of one block in the positional basis.

    Attributes:
        layer: block index (the basis comes from hidden-state layer ``layer``).
        k: basis size; rank: the r asked for (None: each head's own ScreeNOT rank);
        rotary_offset: i - j used for rotary models (0: none).
        singular_values: [k] the singular values of pos spanning the basis.
        heads: one ``HeadQK`` per head.
    """

    layer: int
    k: int
    rank: int | None
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
                    "rank": h.rank,
                    "residual": h.fit.residual,
                    "baseline_residual": h.baseline_residual,
                    "share_in_basis": h.share_in_basis,
                    **(
                        {}
                        if h.whole is None
                        else {
                            "whole_residual": h.whole.residual,
                            "whole_baseline_residual": h.whole.baseline_residual,
                            "whole_low_rank_in_basis": h.whole.in_basis,
                            "whole_baseline_low_rank_in_basis": h.whole.baseline_in_basis,
                            "whole_low_rank_share": h.whole.low_rank_share,
                        }
                    ),
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


@dataclass(frozen=True)
class Factored:
    """A [d, d] matrix held as A B^T (A, B: [d, m]), as a head's W_QK is (m = d_head)."""

    A: Array
    B: Array

    def diagonal(self) -> Array:
        return np.einsum("im,im->i", self.A, self.B)

    def norm2(self) -> float:
        return float(np.sum((self.A.T @ self.A) * (self.B.T @ self.B)))


def _gram_trace(P0: Array, R0: Array, P1: Array, R1: Array) -> float:
    """<P0 R0^T, P1 R1^T>_F without forming either [d, d] product."""
    return float(np.sum((P0.T @ P1) * (R0.T @ R1)))


def fit_low_rank_diagonal_factored(
    matrix: Factored,
    rank: int = DEFAULT_RANK,
    iterations: int = WHOLE_ITERATIONS,
    seed: int = 0,
    tol: float = 1e-6,
) -> tuple[float, Array, Array]:
    """``fit_low_rank_diagonal`` of a [d, d] matrix given as A B^T, never formed: each best
    rank-r step is a randomized SVD warm-started from the last step's subspace (one power
    step), so a step costs O(d m r) where a full SVD costs O(d^3).

    Returns:
        (residual ||M - L - D||_F / ||M||_F, P [d, r], R [d, r]) with L = P R^T.
    """
    A, B = np.asarray(matrix.A, np.float64), np.asarray(matrix.B, np.float64)
    d = A.shape[0]
    m_diag, total2 = matrix.diagonal(), matrix.norm2()
    if rank == 0:  # the diagonal alone
        P = np.zeros((d, 0))
        off2 = total2 - float(m_diag @ m_diag)
        return (float(np.sqrt(max(off2, 0.0) / total2)) if total2 > 0 else float("nan")), P, P
    Q = np.linalg.qr(np.random.default_rng(seed).standard_normal((d, rank + OVERSAMPLE)))[0]
    P, R = np.zeros((d, rank)), np.zeros((d, rank))
    for _ in range(iterations):
        shift = np.einsum("ir,ir->i", P, R) - m_diag  # M - diag(M - L) = M + diag(shift)
        Z = B @ (A.T @ Q) + shift[:, None] * Q  # (M + diag(shift))^T Q
        Q = np.linalg.qr(A @ (B.T @ Z) + shift[:, None] * Z)[0]
        u, sv, vt = np.linalg.svd((Q.T @ A) @ B.T + Q.T * shift[None, :], full_matrices=False)
        P1, R1 = (Q @ u[:, :rank]) * sv[:rank], vt[:rank].T
        moved2 = _gram_trace(P1, R1, P1, R1) - 2 * _gram_trace(P, R, P1, R1)
        moved2 += _gram_trace(P, R, P, R)
        P, R = P1, R1
        if moved2 <= (tol * tol) * max(total2, 1e-300):
            break
    rest = m_diag - np.einsum("ir,ir->i", P, R)  # D
    cross = float(np.sum((A.T @ P) * (B.T @ R)))  # <M, L>
    off2 = total2 - 2 * cross + _gram_trace(P, R, P, R) - float(rest @ rest)
    residual = float(np.sqrt(max(off2, 0.0) / total2)) if total2 > 0 else float("nan")
    return residual, P, R


def share_in(U: Array, P: Array, R: Array) -> float:
    """||U^T L U||_F / ||L||_F for L = P R^T [d, d]: how much of L lies in span(U) [d, k]."""
    total = _gram_trace(P, R, P, R)
    inside = np.linalg.norm((U.T @ P) @ (U.T @ R).T)
    return float(inside / np.sqrt(total)) if total > 0 else float("nan")


def whole_qk(qk: Factored, U: Array, rank: int, seed: int) -> WholeQK:
    """The low-rank plus diagonal fit of one head's whole W_QK [d, d] against a random head
    of the same shape (Gaussian [d, m] factors, so the same rank m) fitted at the same rank,
    with the share of each low-rank part inside the positional basis U. Rank 0 fits the
    diagonal alone (no low-rank part: no share inside U, and 0 of ||W||^2)."""
    residual, P, R = fit_low_rank_diagonal_factored(qk, rank, seed=seed)
    base, Pb, Rb = random_whole_fit(qk.A.shape, qk.B.shape, rank, seed)
    total = qk.norm2()
    return WholeQK(
        rank=rank,
        residual=residual,
        baseline_residual=base,
        in_basis=share_in(U, P, R) if rank else None,
        baseline_in_basis=share_in(U, Pb, Rb) if rank else None,
        low_rank_share=_gram_trace(P, R, P, R) / total if total > 0 else float("nan"),
    )


@functools.lru_cache(maxsize=64)
def random_whole_fit(
    a_shape: tuple[int, ...], b_shape: tuple[int, ...], rank: int, seed: int
) -> tuple[float, Array, Array]:
    """The whole-matrix fit of a random head (Gaussian factors of these shapes) at ``rank``:
    it depends on the shapes, the rank and the seed alone, so heads of one rank share it
    (the random fits converge slowly and were most of the stage's time when every block is
    read). The returned arrays are shared: read them only."""
    rng = np.random.default_rng(seed)
    random = Factored(rng.standard_normal(a_shape), rng.standard_normal(b_shape))
    return fit_low_rank_diagonal_factored(random, rank, seed=seed)


def qk_singular_values(qk: Factored) -> Array:
    """[d] the singular values of W_QK = A B^T [d, d], decreasing (all but the first m are
    0), from the [m, m] product of the factors' QR triangles: no [d, d] matrix formed."""
    A, B = np.asarray(qk.A, np.float64), np.asarray(qk.B, np.float64)
    core = np.linalg.qr(A)[1] @ np.linalg.qr(B)[1].T
    values = np.linalg.svd(core, compute_uv=False)
    return np.concatenate([values, np.zeros(max(A.shape[0] - len(values), 0))])


def qk_rank(qk: Factored, bound: int = spectra.SCREENOT_BOUND) -> int:
    """The rank of W_QK's low-rank part: ScreeNOT's count of W_QK's singular values above
    its optimal hard threshold (``spectra.screenot_rank``, bound ``bound``), the rule Song &
    Zhong's code applies to the positional part's rank. The singular values below it are
    W_QK's bulk, which the diagonal and the residual hold; 0 when none stands out."""
    values = qk_singular_values(qk)
    d = len(values)
    return spectra.screenot_rank(np.broadcast_to(0.0, (d, d)), bound, svals=values)


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


def head_qk_factors(
    view: ModelView, layer: int, rotary_offset: int = 0
) -> tuple[torch.Tensor, torch.Tensor]:
    """([H, d, d_head], [H, d, d_head]) float64 factors G W_Q R and G W_K of W_QK per head
    (G: the folded input-norm gain, with LayerNorm's centring)."""
    block = view.blocks[layer]
    w = block.heads()
    W_Q, W_K = w.W_Q.double().cpu(), w.W_K.double().cpu()
    if block.attn.rotary is not None:
        W_Q = W_Q @ rotation(view, rotary_offset, layer)
    elif rotary_offset:
        raise GeomlensError("rotary_offset applies to rotary models only")
    norm = block.attn_input_norm
    if norm is not None:  # G W = gain * W row-wise, centred: never a [d, d] G
        gain = norm.weight.double().cpu()[:, None]
        W_Q, W_K = gain * W_Q, gain * W_K
        if norm.kind == "layernorm":  # (I - 1 1^T / d) G W
            W_Q = W_Q - W_Q.mean(dim=-2, keepdim=True)
            W_K = W_K - W_K.mean(dim=-2, keepdim=True)
    return W_Q, W_K


def head_qk(view: ModelView, layer: int, rotary_offset: int = 0) -> torch.Tensor:
    """[H, d, d] float64 W_QK = G W_Q R W_K^T G^T per head (G: the folded input-norm gain)."""
    W_Q, W_K = head_qk_factors(view, layer, rotary_offset)
    return W_Q @ W_K.transpose(1, 2)


def qk_positional_basis(
    view: ModelView,
    layer: int,
    stats: DecompositionStats,
    k: int,
    rank: int | None = None,
    heads: Sequence[int] | None = None,
    rotary_offset: int = 0,
    iterations: int = DEFAULT_ITERATIONS,
    seed: int = 0,
    whole_matrix: bool = True,
) -> QKBasis:
    """W_QK of a block's heads in the top-k positional basis, with low-rank + diagonal fits.

    Args:
        view: the model.
        layer: block index; ``stats`` must be of hidden-state layer ``layer`` (its input).
        stats: the decomposition that gives the positional basis.
        k: basis size (e.g. pos_rank95 capped at 20).
        rank: r of the low-rank part; None (default): each head's own, ``qk_rank`` of its
            whole W_QK, for the whole fit, the fit in the basis and both random baselines.
        heads: which query heads (default all).
        rotary_offset: for rotary models, the query-minus-key offset whose rotation is
            folded in (0 = identity: the rotation ignored).
        iterations: alternations of the fit.
        seed: seed of the Gaussian baseline (one matrix per head, seed + head).
        whole_matrix: also fit the whole [d, d] W_QK (``HeadQK.whole``).
    """
    if stats.layer != layer:
        raise GeomlensError(f"stats are of hidden-state layer {stats.layer}, not {layer}")
    U, sv = positional_basis(stats, k)
    Ut = torch.as_tensor(U)
    W_Q, W_K = head_qk_factors(view, layer, rotary_offset)
    chosen = list(range(view.n_heads) if heads is None else heads)
    factors = {h: Factored(W_Q[h].numpy(), W_K[h].numpy()) for h in chosen}
    ranks = {h: qk_rank(factors[h]) if rank is None else rank for h in chosen}
    # U^T (W_Q W_K^T) U = (U^T W_Q)(U^T W_K)^T: no head's [d, d] W_QK is formed (all heads'
    # at once would be 8 H d^2 bytes: 4.3 GB per layer at Llama-3.1-8B's d, 34 GB at 70B's)
    q_in, k_in = Ut.T @ W_Q, Ut.T @ W_K  # [H, k, d_head]
    matrices = np.stack([(q_in[h] @ k_in[h].T).numpy() for h in chosen])
    gaussians = np.stack([np.random.default_rng(seed + h).standard_normal((k, k)) for h in chosen])
    fits = _fits_by_rank(matrices, [ranks[h] for h in chosen], iterations)
    random_fits = _fits_by_rank(gaussians, [ranks[h] for h in chosen], iterations)
    results = []
    for i, h in enumerate(chosen):
        total = float(np.sqrt(max(factors[h].norm2(), 0.0)))  # ||W_Q W_K^T||_F
        # the random head is drawn once per rank (seed): heads of one rank share it
        whole = whole_qk(factors[h], U, ranks[h], seed) if whole_matrix else None
        results.append(
            HeadQK(
                head=int(h),
                rank=ranks[h],
                matrix=matrices[i],
                fit=fits[i],
                baseline_residual=random_fits[i].residual,
                share_in_basis=float(np.linalg.norm(matrices[i])) / total
                if total > 0
                else float("nan"),
                whole=whole,
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


def _fits_by_rank(
    matrices: Array, ranks: Sequence[int], iterations: int
) -> list[LowRankDiagonalFit]:
    """``fit_low_rank_diagonal`` of each [k, k] matrix at its own rank, those of one rank
    batched together."""
    fits: list[LowRankDiagonalFit | None] = [None] * len(ranks)
    for r in sorted(set(ranks)):
        idx = [i for i, x in enumerate(ranks) if x == r]
        batch = fit_low_rank_diagonal_many(matrices[idx], r, iterations)
        for i, fit in zip(idx, batch, strict=True):
            fits[i] = fit
    return [f for f in fits if f is not None]
