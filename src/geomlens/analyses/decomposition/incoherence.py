"""Incoherence between the positional and the context subspaces.

The cosines of the principal angles between two subspaces with orthonormal bases
``U [d, k]`` and ``V [d, l]`` are the singular values of ``U^T V``.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

Array = npt.NDArray[np.float64]

RANDOM_DRAWS = 16
"""Pairs of random subspaces averaged for the baseline (fewer for large k, see below)."""


@dataclass(frozen=True)
class Incoherence:
    """Principal-angle summary between the top-k positional and context directions.

    Attributes:
        k: subspace dimension used (0 when either part has rank 0).
        max_cos: cosine of the smallest principal angle (largest singular value of U^T V).
        mean_cos: mean cosine over the k principal angles.
        random_mean_cos: the same mean for random k-dimensional subspaces of R^d.
    """

    k: int
    max_cos: float
    mean_cos: float
    random_mean_cos: float


def numerical_rank(svals: Array, shape: tuple[int, ...]) -> int:
    """Rank as numpy counts it: singular values above ``s_1 * max(shape) * eps``.

    Args:
        svals: singular values in decreasing order.
        shape: shape of the matrix they came from.
    """
    svals = np.asarray(svals, dtype=np.float64)
    if svals.size == 0 or svals[0] == 0:
        return 0
    tol = svals[0] * max(shape) * np.finfo(np.float64).eps
    return int(np.sum(svals > tol))


def top_directions(x: Array, k: int) -> Array:
    """Orthonormal basis of the top-k right singular vectors of ``x``.

    Args:
        x: [n, d] matrix (rows are vectors in R^d).
        k: number of directions.

    Returns:
        [d, k] matrix with orthonormal columns.
    """
    _, _, vt = np.linalg.svd(np.asarray(x, dtype=np.float64), full_matrices=False)
    return np.ascontiguousarray(vt[:k].T)


def principal_cosines(u: Array, v: Array) -> Array:
    """Cosines of the principal angles between span(u) and span(v), decreasing.

    Args:
        u: [d, k] orthonormal columns.
        v: [d, l] orthonormal columns.

    Returns:
        [min(k, l)] cosines in [0, 1].
    """
    s = np.linalg.svd(u.T @ v, compute_uv=False)
    return np.clip(np.asarray(s, dtype=np.float64), 0.0, 1.0)


def random_mean_cosine(d: int, k: int, l: int, seed: int, draws: int | None = None) -> float:
    """Mean principal-angle cosine of random k- and l-dimensional subspaces of R^d.

    Subspaces are spans of Gaussian matrices; the mean is averaged over ``draws`` pairs,
    by default ``clip(256 // min(k, l), 1, 16)`` (a mean over many angles varies little).

    Args:
        d: ambient dimension.
        k: dimension of the first subspace.
        l: dimension of the second subspace.
        seed: seed of the generator.
        draws: number of pairs.
    """
    if min(k, l) == 0:
        return math.nan
    if draws is None:
        draws = max(1, min(RANDOM_DRAWS, 256 // min(k, l)))
    rng = np.random.default_rng(seed)
    means = []
    for _ in range(draws):
        u = np.linalg.qr(rng.standard_normal((d, k)))[0]
        v = np.linalg.qr(rng.standard_normal((d, l)))[0]
        means.append(float(principal_cosines(u, v).mean()))
    return float(np.mean(means))


def incoherence(
    pos: Array,
    ctx: Array,
    k: int,
    seed: int = 0,
    pos_svd: tuple[Array, Array] | None = None,
    baseline: bool = True,
    ctx_svd: tuple[Array, Array] | None = None,
) -> Incoherence:
    """Principal angles between the top-k directions of ``pos`` and of ``ctx``.

    Args:
        pos: [T', d] positional part.
        ctx: [C, d] context part.
        k: requested dimension (capped by the numerical ranks of both parts).
        seed: seed of the random baseline.
        pos_svd: (singular values, Vt) of ``pos`` when already computed.
        baseline: draw the random baseline (most of the time taken); when False its
            field is nan (resamples compare with the whole corpus's baseline).
        ctx_svd: (singular values, Vt) of ``ctx`` when already computed.
    """
    pos = np.asarray(pos, dtype=np.float64)
    ctx = np.asarray(ctx, dtype=np.float64)
    if pos_svd is None:
        _, s_pos, vt_pos = np.linalg.svd(pos, full_matrices=False)
    else:
        s_pos, vt_pos = pos_svd
    if ctx_svd is None:
        _, s_ctx, vt_ctx = np.linalg.svd(ctx, full_matrices=False)
    else:
        s_ctx, vt_ctx = ctx_svd
    k = min(k, numerical_rank(s_pos, pos.shape), numerical_rank(s_ctx, ctx.shape))
    if k <= 0:
        return Incoherence(0, math.nan, math.nan, math.nan)
    cos = principal_cosines(vt_pos[:k].T, vt_ctx[:k].T)
    random = random_mean_cosine(pos.shape[1], k, k, seed) if baseline else math.nan
    return Incoherence(k, float(cos[0]), float(cos.mean()), random)


@dataclass(frozen=True)
class VectorCoherence:
    """Mutual coherence of the positional and context vectors themselves (Song & Zhong's
    sense, from compressed sensing): mu = max over t, c of |cos(pos_t, ctx_c)|.

    Attributes:
        max_cos: mu, the largest |cos| over every (position, context) pair.
        mean_cos: the mean |cos| over the pairs.
        random_max_cos: mu of as many Gaussian vectors in R^d (the same T' and C).
        random_mean_cos: their mean |cos|.
    """

    max_cos: float
    mean_cos: float
    random_max_cos: float
    random_mean_cos: float


PAIR_BLOCK_BYTES = 32 * 2**20
"""Memory of one block of |cos| values (rows of positions at a time)."""


def abs_cosine_summary(a: Array, b: Array) -> tuple[float, float]:
    """(max, mean) of |cos(a_i, b_j)| over all pairs; rows of norm 0 are left out.

    Computed in blocks of rows of ``a`` so that no [len(a), len(b)] matrix larger than
    ``PAIR_BLOCK_BYTES`` is held.
    """
    a = _unit_rows(np.asarray(a, dtype=np.float64))
    b = _unit_rows(np.asarray(b, dtype=np.float64))
    if len(a) == 0 or len(b) == 0:
        return math.nan, math.nan
    rows = max(1, PAIR_BLOCK_BYTES // (8 * len(b)))
    top, total = 0.0, 0.0
    for start in range(0, len(a), rows):
        block = np.abs(a[start : start + rows] @ b.T)
        top = max(top, float(block.max()))
        total += float(block.sum())
    return min(top, 1.0), total / (len(a) * len(b))


def _unit_rows(x: Array) -> Array:
    norms = np.linalg.norm(x, axis=1)
    keep = norms > 0
    return x[keep] / norms[keep, None]


def vector_coherence(pos: Array, ctx: Array, seed: int = 0) -> VectorCoherence:
    """The mutual coherence of ``pos`` [T', d] and ``ctx`` [C, d], and that of isotropic
    random vectors of the same counts and dimension (``random_coherence``: expected values,
    no draw)."""
    pos = np.asarray(pos, dtype=np.float64)
    ctx = np.asarray(ctx, dtype=np.float64)
    top, mean = abs_cosine_summary(pos, ctx)
    random_top, random_mean = random_coherence(pos.shape[0], ctx.shape[0], pos.shape[1], seed)
    return VectorCoherence(top, mean, random_top, random_mean)


@functools.lru_cache(maxsize=64)
def random_coherence(n_pos: int, n_ctx: int, d: int, seed: int = 0) -> tuple[float, float]:
    """(max, mean) |cos| between n_pos and n_ctx isotropic random vectors in R^d, in
    expectation: the level the mutual coherence is compared with.

    The cosine of two independent isotropic directions in R^d has a known law (its square
    is Beta(1/2, (d-1)/2)), so the mean |cos| is exact:
    Gamma(d/2) / (sqrt(pi) Gamma((d+1)/2)). The maximum is the expected maximum of
    N = n_pos * n_ctx independent such values, the integral of 1 - F(x)^N over [0, 1] with
    F the law of |cos|. The N pairs share vectors, so they are not quite independent: against
    400 Monte Carlo draws this differs by at most 1.3% at the shapes checked
    (docs/decomposition.md), where one draw varies by about 8% (its standard deviation at
    SmolLM2's shape, 127 x 126 in R^576, is 0.013 around 0.170). No draw is made, so the
    level has no sampling noise of its own. ``seed`` is kept for the callers' signature.
    """
    from scipy import integrate, special  # only when the level is computed (slow to import)

    del seed
    if n_pos <= 0 or n_ctx <= 0 or d <= 0:
        return math.nan, math.nan
    if d == 1:
        return 1.0, 1.0
    n = float(n_pos) * float(n_ctx)
    a, b = 0.5, (d - 1) / 2

    def above(x: float) -> float:  # P(max |cos| > x) = 1 - F(x)^N
        f = float(special.betainc(a, b, x * x))
        return 1.0 if f <= 0.0 else float(-math.expm1(n * math.log(f)))

    near = min(1.0, math.sqrt(2 * math.log(2 * n) / d)) if n > 1 else 0.5
    top = integrate.quad(above, 0.0, 1.0, points=[near], limit=200)[0]
    mean = math.exp(special.gammaln(d / 2) - special.gammaln((d + 1) / 2)) / math.sqrt(math.pi)
    return float(top), float(mean)
