"""Intrinsic-dimension estimators from nearest-neighbour distance ratios: TwoNN (Facco,
d'Errico, Rodriguez & Laio 2017, Sci. Rep. 7:12140) and GRIDE (Denti, Doimo, Laio & Mira
2022, Sci. Rep. 12:20005), with a bootstrap over points.

TwoNN: for each point, ``mu = r2 / r1`` (its second and first nearest-neighbour distances)
follows ``F(mu) = 1 - mu^-d`` on a locally uniform d-dimensional sample, so ``-log(1 - F)``
against ``log mu`` is a line through the origin of slope d; the largest 10% of ratios are
left out of the fit (the paper's heuristic against points on the manifold's edge or in
sparse regions). GRIDE reads ``mu = r_{2k} / r_k`` instead, whose density is
``d (mu^d - 1)^(k - 1) / (B(k, k) mu^((2k - 1) d + 1))``, and takes the d of largest
likelihood: k = 1 is TwoNN's maximum-likelihood form, larger k reads the data at a larger
scale (the mean distance ``r_{2k}``), less sensitive to noise.

Distances are Euclidean, in float64, between the rows given; rows at distance 0 from their
nearest neighbour (duplicates) are left out.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

DISCARD = 0.1
"""Share of the largest TwoNN ratios left out of the fit (Facco et al.)."""

GRIDE_SCALES = (1, 2, 4, 8, 16)
"""GRIDE's k (its ratio is r_{2k} / r_k): each doubles the neighbourhood read."""

MAX_DIMENSION = 1e4
"""The largest dimension GRIDE's likelihood is searched over."""


def neighbour_distances(x: npt.NDArray[np.floating], k: int) -> npt.NDArray[np.float64]:
    """[n, k] each row's distances to its k nearest other rows, ascending.

    Args:
        x: [n, D] points.
        k: neighbours kept (k < n).
    """
    x = np.asarray(x, dtype=np.float64)
    sq = np.einsum("ij,ij->i", x, x)
    d2 = np.maximum(sq[:, None] + sq[None, :] - 2.0 * (x @ x.T), 0.0)
    np.fill_diagonal(d2, np.inf)
    part = np.partition(d2, k - 1, axis=1)[:, :k] if k < len(x) - 1 else d2
    return np.sqrt(np.sort(part, axis=1)[:, :k])


def ratios(distances: npt.NDArray[np.float64], k: int = 1) -> npt.NDArray[np.float64]:
    """[n] ``r_{2k} / r_k`` per row of ``neighbour_distances`` (NaN where r_k is 0)."""
    near, far = distances[:, k - 1], distances[:, 2 * k - 1]
    with np.errstate(divide="ignore", invalid="ignore"):
        mu = far / near
    return np.where(near > 0, mu, np.nan)


def twonn_fit(mu: npt.NDArray[np.float64], discard: float = DISCARD) -> float:
    """TwoNN's dimension from the ratios ``mu`` (NaN ones left out): the slope through the
    origin of ``-log(1 - F_emp)`` on ``log mu`` over the smallest ``1 - discard`` of them."""
    mu = np.sort(mu[np.isfinite(mu)])
    n = mu.size
    kept = int(n * (1 - discard))
    if kept < 2:
        return float("nan")
    x = np.log(mu[:kept])
    y = -np.log(1.0 - np.arange(1, kept + 1) / n)
    return float(np.dot(x, y) / np.dot(x, x))


def twonn(points: npt.NDArray[np.floating], discard: float = DISCARD) -> float:
    """TwoNN's intrinsic dimension of ``points`` [n, D]."""
    return twonn_fit(ratios(neighbour_distances(points, 2)), discard)


def gride_fit(mu: npt.NDArray[np.float64], k: int) -> float:
    """GRIDE's maximum-likelihood dimension from the ratios ``mu = r_{2k} / r_k``."""
    from scipy.optimize import minimize_scalar  # scipy loads with the step, not the command
    from scipy.special import betaln

    lm = np.log(mu[np.isfinite(mu) & (mu > 1)])
    n = lm.size
    if n < 2:
        return float("nan")
    total = float(lm.sum())
    if k == 1:
        return n / total

    def minus_log_likelihood(d: float) -> float:
        power = d * lm
        tail = np.log(-np.expm1(-power))  # log(1 - mu^-d)
        log_mu_d_minus_1 = power + tail  # log(mu^d - 1)
        return -(
            n * np.log(d)
            + (k - 1) * float(log_mu_d_minus_1.sum())
            - ((2 * k - 1) * d + 1) * total
            - n * betaln(k, k)
        )

    found = minimize_scalar(minus_log_likelihood, bounds=(1e-3, MAX_DIMENSION), method="bounded")
    return float(found.x)


@dataclass(frozen=True)
class GrideScale:
    """GRIDE at one scale: its k, the dimension, and the mean distance r_{2k} it reads."""

    k: int
    dimension: float
    scale: float


def gride(
    points: npt.NDArray[np.floating], scales: tuple[int, ...] = GRIDE_SCALES
) -> list[GrideScale]:
    """GRIDE's dimension of ``points`` [n, D] at each k of ``scales`` that the n points
    allow (2k < n)."""
    usable = [k for k in scales if 2 * k < len(points)]
    if not usable:
        return []
    dist = neighbour_distances(points, 2 * max(usable))
    return [
        GrideScale(k, gride_fit(ratios(dist, k), k), float(dist[:, 2 * k - 1].mean()))
        for k in usable
    ]


def twonn_draws(mu: npt.NDArray[np.float64], draws: npt.NDArray[np.int64]) -> np.ndarray:
    """TwoNN's dimension on each bootstrap resample of the points (rows of ``draws``:
    indices into ``mu``)."""
    return np.array([twonn_fit(mu[row]) for row in draws])
