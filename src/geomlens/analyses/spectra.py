"""Spectra and smoothness of the positional part ``pos [T', d]``.

Rank (ScreeNOT, stable rank, 95% energy), explained ratio, and the Gram matrix of the
normalised positional vectors with its two-dimensional DCT-II (low-frequency share,
smoothness), as in Song & Zhong (2023).
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt
import scipy.fft
from screenot import adaptiveHardThresholding

Array = npt.NDArray[np.float64]

SCREENOT_BOUND = 20
"""Upper bound k on the signal rank passed to ScreeNOT (the original authors' value)."""


def singular_values(x: Array) -> Array:
    """Singular values of a matrix, in decreasing order.

    Args:
        x: [n, d] matrix.

    Returns:
        [min(n, d)] singular values.
    """
    return np.asarray(np.linalg.svd(np.asarray(x, dtype=np.float64), compute_uv=False))


def screenot_bound(shape: tuple[int, ...], bound: int = SCREENOT_BOUND) -> int:
    """The ScreeNOT rank bound actually used: ``bound``, capped so that imputation works.

    ScreeNOT's imputation strategy needs ``2k + 1 < min(n, d)``.

    Args:
        shape: (n, d) of the matrix.
        bound: requested upper bound on the signal rank.

    Returns:
        ``min(bound, (min(n, d) - 2) // 2)``, at least 0.
    """
    return max(0, min(bound, (min(shape) - 2) // 2))


def screenot_rank(x: Array, bound: int = SCREENOT_BOUND, top: float | None = None) -> int:
    """Signal rank of ``x`` by ScreeNOT (Donoho, Gavish & Romanov) with imputation.

    The matrix is scaled by its largest singular value first: the rank is scale-free,
    and ScreeNOT's threshold search stops at an absolute tolerance (1e-5).

    Args:
        x: [n, d] matrix.
        bound: upper bound on the signal rank (capped by ``screenot_bound``).
        top: the largest singular value of ``x`` when already known.

    Returns:
        The number of singular values above the optimal hard threshold (0 for a zero matrix).
    """
    x = np.asarray(x, dtype=np.float64)
    if min(x.shape) < 2:
        return int(np.any(x != 0))
    top = float(np.linalg.norm(x, ord=2)) if top is None else float(top)
    if top == 0.0:
        return 0
    _, _, rank = adaptiveHardThresholding(x / top, screenot_bound(x.shape, bound), strategy="i")
    return int(rank)


def stable_rank(svals: Array) -> float:
    """Stable rank ``sum_i s_i^2 / s_1^2`` (nan when all are zero).

    Args:
        svals: [k] singular values in decreasing order.
    """
    sq = np.asarray(svals, dtype=np.float64) ** 2
    return float(sq.sum() / sq[0]) if sq.size and sq[0] > 0 else math.nan


def explained_ratio(svals: Array, rank: int) -> float:
    """Share of the top ``rank`` singular values in their sum (not squared; as the original).

    Args:
        svals: [k] singular values in decreasing order.
        rank: number of leading values.
    """
    svals = np.asarray(svals, dtype=np.float64)
    total = float(svals.sum())
    return float(svals[:rank].sum()) / total if total > 0 else math.nan


def energy_rank(svals: Array, level: float = 0.95) -> int:
    """Smallest k whose top-k squared singular values reach ``level`` of their total.

    Args:
        svals: [k] singular values in decreasing order.
        level: the share of the squared Frobenius norm to reach.

    Returns:
        k (0 for a zero matrix).
    """
    sq = np.asarray(svals, dtype=np.float64) ** 2
    total = float(sq.sum())
    if total == 0.0:
        return 0
    cum = np.cumsum(sq) / total
    # A small slack keeps an exact boundary (e.g. 0.95 reached by rounding) deterministic.
    return int(np.searchsorted(cum, level - 1e-12) + 1)


def gram_matrix(pos: Array) -> Array:
    """Gram matrix of the unit-normalised positional vectors, ``G = P P^T``.

    Args:
        pos: [T', d] positional part; zero rows stay zero.

    Returns:
        [T', T'] cosine similarities between positions.
    """
    pos = np.asarray(pos, dtype=np.float64)
    norms = np.linalg.norm(pos, axis=1, keepdims=True)
    p = np.divide(pos, norms, out=np.zeros_like(pos), where=norms > 0)
    return p @ p.T


def dct_basis(n: int) -> Array:
    """Orthonormal DCT-II basis ``F`` with ``F[t, k]`` the k-th frequency at position t.

    Args:
        n: number of positions.

    Returns:
        [n, n] orthogonal matrix; ``F^T x`` is the orthonormal DCT-II of ``x``.
    """
    return np.asarray(scipy.fft.dct(np.eye(n), type=2, norm="ortho", axis=1))


def gram_dct(gram: Array) -> Array:
    """Two-dimensional orthonormal DCT-II of a Gram matrix, ``F^T G F``.

    Args:
        gram: [T', T'] Gram matrix.

    Returns:
        [T', T'] coefficients; entry (k, l) pairs frequency k with frequency l.
    """
    gram = np.asarray(gram, dtype=np.float64)
    return np.asarray(scipy.fft.dctn(gram, type=2, norm="ortho"))


def n_low_frequencies(n: int, fraction: float = 0.1) -> int:
    """Number of low frequencies kept: ``ceil(fraction * n)``, at least 1."""
    return max(1, math.ceil(fraction * n - 1e-9))


def low_freq_share(gram: Array, fraction: float = 0.1) -> float:
    """Share of ``||F^T G F||_F^2`` in its top-left ``ceil(fraction * T')`` square block.

    Args:
        gram: [T', T'] Gram matrix.
        fraction: share of the frequencies (on each axis) counted as low.

    Returns:
        A number in [0, 1] (nan for a zero matrix).
    """
    coef = gram_dct(gram)
    k = n_low_frequencies(coef.shape[0], fraction)
    total = float(np.sum(coef**2))
    return float(np.sum(coef[:k, :k] ** 2)) / total if total > 0 else math.nan


def smoothness(gram: Array) -> float:
    """Mean absolute step between neighbouring rows over the mean absolute entry.

    ``mean_{t, t'} |G[t, t'] - G[t+1, t']| / mean_{t, t'} |G[t, t']|``: near 0 for a smooth
    Gram matrix, near or above 1 for a rough one.

    Args:
        gram: [T', T'] Gram matrix.
    """
    gram = np.asarray(gram, dtype=np.float64)
    if gram.shape[0] < 2:
        return math.nan
    scale = float(np.mean(np.abs(gram)))
    return float(np.mean(np.abs(np.diff(gram, axis=0)))) / scale if scale > 0 else math.nan
