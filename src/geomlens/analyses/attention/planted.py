"""Planted W_QK low-rank parts inside a planted positional subspace, to calibrate how far
sampling noise in the positional estimate dilutes the share the claim reads.

The claim ``song.wqk_low_rank_positional`` reads ``||U^T L U||_F / ||L||_F``: the share of
a head's low-rank part L inside U, the top-k right singular vectors of the noisy
positional estimate pos = P + N (``qk_basis.positional_basis``). Noise turns U away from
P's own top-k directions, so a share read through U can fall below the share through the
noise-free basis. Here P is planted as ``decomposition.planted`` plants it (known rank
and frequency content, noise anisotropic over d with ``decomposition.planted.ANISOTROPY``
of its energy in a few strong directions), L = a b^T with a and b random directions inside P's top
``min(rank, k)`` directions (so its noise-free share is 1), and ``dilution`` reports the
least share read through the noisy U over many draws: the factor by which noise can lower
the share. ``benchmarks/planted_guards.py`` prints it per noise share; docs/claims.md
keeps the table.
"""

from __future__ import annotations

import math

import numpy as np

from geomlens.analyses.decomposition import planted

SHAPE = (127, 576, 126)
"""(positions, d, contexts) of the calibration: SmolLM2's at the default 128 x 128 without
position 0."""


def share_through_noisy_basis(
    seed: int,
    noise_share: float,
    rank: int,
    low_share: float,
    k: int,
    anisotropy: float = planted.ANISOTROPY,
    shape: tuple[int, int, int] = SHAPE,
) -> float:
    """The share of a planted rank-1 L (wholly inside P's top directions) read through the
    top-k directions of P plus noise making ``noise_share`` of the estimate's energy."""
    length, d, n_contexts = shape
    rng = np.random.default_rng([seed, rank, k, 31])
    truth = planted.planted_positions(rng, length, d, rank, low_share)
    spikes = np.linalg.qr(rng.standard_normal((d, planted.SPIKES)))[0]
    iso, spike = math.sqrt((1 - anisotropy) / d), math.sqrt(anisotropy / planted.SPIKES)
    sigma = math.sqrt(noise_share / (1 - noise_share) * n_contexts / (length - 1))
    white = rng.standard_normal((length, d))
    strong = rng.standard_normal((length, planted.SPIKES)) @ spikes.T
    pos = truth + (iso * white + spike * strong) * sigma / math.sqrt(n_contexts)
    pos -= pos.mean(axis=0)
    inside = np.linalg.svd(truth, full_matrices=False)[2][: min(rank, k)]
    a, b = rng.standard_normal(len(inside)) @ inside, rng.standard_normal(len(inside)) @ inside
    basis = np.linalg.svd(pos, full_matrices=False)[2][:k]
    # ||U^T a b^T U||_F / ||a b^T||_F = |U^T a| |U^T b| / (|a| |b|)
    kept = np.linalg.norm(basis @ a) * np.linalg.norm(basis @ b)
    return float(kept / (np.linalg.norm(a) * np.linalg.norm(b)))


def dilution(
    noise_share: float,
    rank: int,
    low_share: float,
    k: int,
    draws: int = 20,
    anisotropy: float = planted.ANISOTROPY,
) -> tuple[float, float]:
    """(least, mean) share read through the noisy basis over ``draws`` planted corpora,
    for a low-rank part whose noise-free share is 1."""
    shares = [
        share_through_noisy_basis(i, noise_share, rank, low_share, k, anisotropy)
        for i in range(draws)
    ]
    return min(shares), float(np.mean(shares))
