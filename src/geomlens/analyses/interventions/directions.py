"""The directions and coordinates the checks edit, found on the estimation windows, and
their random controls.

Everything here is arrays in, arrays out: a layer's positional part ``pos [T', d]``,
context part ``ctx [C, d]``, covariance ``[d, d]`` and per-position means ``[T, d]`` come
from the capture's statistics (``DecompositionAccumulator``); the checks turn them into
edits (``capturing.edits``).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from geomlens.analyses.common import spectra

Array = npt.NDArray[np.float64]

LOW_FRACTION = 0.1
"""The share of DCT frequencies over positions counted as low (Song & Zhong's 10%)."""

MASSIVE_RATIO = 100.0
"""A coordinate is massive when its largest mean magnitude at any position is this many
times the median magnitude of all coordinates at all positions (Sun et al. call an
activation massive at about 1,000 times the median; 100 keeps the milder ones)."""

MAX_MASSIVE = 8
"""At most this many massive coordinates per layer (the largest)."""


def top_directions(x: Array, k: int) -> Array:
    """[n, d] rows -> [d, k] the top ``k`` right singular vectors (orthonormal columns)."""
    _, _, vt = np.linalg.svd(np.asarray(x, dtype=np.float64), full_matrices=False)
    return np.ascontiguousarray(vt[:k].T)


def rank_of(x: Array) -> int:
    """The ScreeNOT rank of ``x`` (the decomposition's rank of the positional part), at
    least 1."""
    return max(1, int(spectra.screenot_rank(np.asarray(x, dtype=np.float64))))


def frequency_parts(pos: Array, fraction: float = LOW_FRACTION) -> tuple[Array, Array]:
    """``pos [T', d]`` split over positions into its lowest ``fraction`` of DCT-II
    frequencies and the rest: (low, high), with low + high = pos."""
    n = pos.shape[0]
    F = spectra.dct_basis(n)[:, : spectra.n_low_frequencies(n, fraction)]
    low = F @ (F.T @ pos)
    return low, pos - low


def covariance(second: Array, mean: Array, n: int) -> Array:
    """The covariance ``sum h h^T / n - mu mu^T`` of one layer's hidden states."""
    return second / n - np.outer(mean, mean)


def random_bases(cov: Array, k: int, draws: int, seed: int) -> list[Array]:
    """``draws`` random [d, k] orthonormal bases, each spanned by k Gaussian vectors of
    covariance ``cov`` (the hidden states' own): a subspace as large as the edited one,
    where the states' energy lies, but not chosen by the geometry under test."""
    vals, vecs = np.linalg.eigh((cov + cov.T) / 2)
    root = vecs * np.sqrt(np.clip(vals, 0.0, None))
    rng = np.random.default_rng([seed, k, cov.shape[0]])
    out = []
    for _ in range(draws):
        z = root @ rng.standard_normal((cov.shape[0], k))
        out.append(np.linalg.qr(z)[0])
    return out


def massive_coordinates(
    position_means: Array, ratio: float = MASSIVE_RATIO, most: int = MAX_MASSIVE
) -> tuple[list[int], list[int]]:
    """The massive coordinates of one layer and the positions they sit at.

    Args:
        position_means: [T, d] the mean hidden state at each position over the estimation
            windows (a massive-activation analysis may pass its own magnitudes instead).
        ratio: how many times the median magnitude makes a coordinate massive.
        most: the largest number kept.

    Returns:
        (coordinates, positions): the coordinates whose largest |mean| over positions is
        ``ratio`` times the median |mean|, largest first (at most ``most``), and the
        positions where any of them is that large (ascending).
    """
    mag = np.abs(np.asarray(position_means, dtype=np.float64))
    floor = ratio * float(np.median(mag))
    peak = mag.max(0)
    order = [int(i) for i in np.argsort(-peak, kind="stable") if peak[i] > floor][:most]
    if not order:
        return [], []
    positions = sorted({int(t) for t in np.nonzero((mag[:, order] > floor).any(1))[0]})
    return order, positions


def random_coordinates(
    d: int, count: int, exclude: list[int], draws: int, seed: int
) -> list[list[int]]:
    """``draws`` sets of ``count`` coordinates of 0..d-1 drawn without ``exclude``."""
    rng = np.random.default_rng([seed, count, d])
    pool = np.setdiff1d(np.arange(d), np.asarray(exclude, dtype=np.int64))
    return [sorted(int(i) for i in rng.choice(pool, count, replace=False)) for _ in range(draws)]
