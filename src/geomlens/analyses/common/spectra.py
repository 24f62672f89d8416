"""Spectra and smoothness of the positional part ``pos [T', d]``.

Rank (ScreeNOT, stable rank, 95% energy), explained ratio, and the Gram matrix of the
normalised positional vectors with its two-dimensional DCT-II (low-frequency share,
smoothness), as in Song & Zhong (2023); and the share of the positional energy in the low
frequencies over positions, which an unbiased Gram estimate keeps unbiased
(``low_freq_energy``, see ``analyses.decomposition.position_noise``).
"""

from __future__ import annotations

import functools
import math

import numpy as np
import numpy.typing as npt
from screenot.ScreeNOT import computeOptThreshold, createPseudoNoise

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
    # The full SVD is used on purpose: LAPACK's values-only driver ran 5x slower here.
    _, s, _ = np.linalg.svd(np.asarray(x, dtype=np.float64), full_matrices=False)
    return np.asarray(s)


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


def screenot_rank(x: Array, bound: int = SCREENOT_BOUND, svals: Array | None = None) -> int:
    """Signal rank of ``x`` by ScreeNOT (Donoho, Gavish & Romanov) with imputation.

    The same computation as ``screenot.adaptiveHardThresholding(x / s_1, k, "i")`` (the
    package's own pseudo-noise and threshold functions are called), but on singular values
    already known, so no second SVD is taken. Scaling by the largest singular value makes
    the rank scale-free: ScreeNOT's threshold search stops at an absolute tolerance (1e-5).

    Args:
        x: [n, d] matrix (only its shape is read when ``svals`` is given).
        bound: upper bound on the signal rank (capped by ``screenot_bound``).
        svals: the singular values of ``x`` in decreasing order, when already computed.

    Returns:
        The number of singular values above the optimal hard threshold (0 for a zero matrix).
    """
    shape = np.shape(x)
    if svals is None:
        svals = singular_values(x)
    svals = np.asarray(svals, dtype=np.float64)
    if min(shape) < 2:
        return int(np.any(svals != 0))
    top = float(svals[0])
    if top == 0.0:
        return 0
    scaled = svals / top
    k = screenot_bound(shape, bound)
    gamma = min(shape[0] / shape[1], shape[1] / shape[0])
    threshold = computeOptThreshold(createPseudoNoise(scaled.copy(), k, strategy="i"), gamma)
    return int(np.sum(scaled > threshold))


def stable_rank(svals: Array) -> float:
    """Stable rank ``sum_i s_i^2 / s_1^2`` (nan when all are zero).

    Args:
        svals: [k] singular values in decreasing order.

    >>> stable_rank([2.0, 2.0, 2.0])  # three equal directions
    3.0
    >>> stable_rank([4.0, 1.0, 1.0])  # one direction dominates
    1.125
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

    >>> energy_rank([3.0, 1.0, 1.0], level=0.9)  # 9 of 11 is under 0.9; 10 of 11 is over
    2
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
    return _dct_basis(n).copy()


@functools.lru_cache(maxsize=8)
def _dct_basis(n: int) -> Array:
    import scipy.fft

    return np.asarray(scipy.fft.dct(np.eye(n), type=2, norm="ortho", axis=1))


def gram_dct(gram: Array) -> Array:
    """Two-dimensional orthonormal DCT-II of a Gram matrix, ``F^T G F``.

    Args:
        gram: [T', T'] Gram matrix.

    Returns:
        [T', T'] coefficients; entry (k, l) pairs frequency k with frequency l.
    """
    import scipy.fft

    gram = np.asarray(gram, dtype=np.float64)
    return np.asarray(scipy.fft.dctn(gram, type=2, norm="ortho"))


def n_low_frequencies(n: int, fraction: float = 0.1) -> int:
    """Number of low frequencies kept: ``ceil(fraction * n)``, at least 1."""
    return max(1, math.ceil(fraction * n - 1e-9))


def low_freq_share(gram: Array, fraction: float = 0.1) -> float:
    """Share of ``||F^T G F||_F^2`` in its top-left ``ceil(fraction * T')`` square block.

    Only that block is transformed (``F_low^T G F_low``, F_low the first columns of the
    DCT-II basis); the total is ``||G||_F^2``, which the orthogonal F keeps.

    Args:
        gram: [T', T'] Gram matrix.
        fraction: share of the frequencies (on each axis) counted as low.

    Returns:
        A number in [0, 1] (nan for a zero matrix).
    """
    gram = np.asarray(gram, dtype=np.float64)
    n = gram.shape[0]
    low = _dct_basis(n)[:, : n_low_frequencies(n, fraction)]
    total = float(np.sum(gram**2))  # ||F^T G F||_F = ||G||_F: F is orthogonal
    return float(np.sum((low.T @ gram @ low) ** 2)) / total if total > 0 else math.nan


def low_freq_energy(gram: Array, fraction: float = 0.1) -> float:
    """Share of the positional energy in the lowest ``ceil(fraction * T')`` frequencies
    over positions, from the unnormalised Gram matrix ``G = P P^T``:
    ``tr(F_low^T G F_low) / tr(G)`` (F the orthonormal DCT-II basis). Linear in G, so an
    unbiased estimate of G gives unbiased numerator and denominator; cut to [0, 1].

    Args:
        gram: [T', T'] P P^T (or an estimate of it).
        fraction: share of the frequencies counted as low.

    Returns:
        A number in [0, 1] (nan when tr(G) <= 0).
    """
    gram = np.asarray(gram, dtype=np.float64)
    total = float(np.trace(gram))
    if not total > 0:
        return math.nan
    n = gram.shape[0]
    low = _dct_basis(n)[:, : n_low_frequencies(n, fraction)]
    return min(max(float(np.sum((gram @ low) * low)) / total, 0.0), 1.0)


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
