"""The positional estimate with its sampling noise removed, checked on planted structure at
the noise levels of real runs (SmolLM2 at 128 contexts: 37-63% of the positional energy is
noise; Gemma-3-270M at 64: 55-69%), where the plain statistics read the noise as position."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from synthetic import spiral

from geomlens.analyses.common import spectra
from geomlens.analyses.decomposition import position_noise as pn
from geomlens.analyses.decomposition.compute import analyse_layer
from geomlens.stats import CapturedBatch, DecompositionAccumulator

SHARES = (0.37, 0.5, 0.63, 0.69)


def planted(
    share: float,
    rank: int = 8,
    length: int = 96,
    d_model: int = 192,
    contexts: int = 128,
    groups: int = 16,
    seed: int = 0,
    permute: bool = False,
    share_at: int | None = None,
) -> tuple[np.ndarray, pn.GroupPositions]:
    """A smooth spiral P of known rank (equal amplitudes), and 16 groups' positional
    estimates whose pooled noise is ``share`` of the pooled estimate's energy at
    ``share_at`` contexts (default ``contexts``). Each group's noise is drawn as the mean
    of its contexts' Gaussian noise; a per-group offset, as context parts leave, cancels."""
    rng = np.random.default_rng(seed)
    q = np.linalg.qr(rng.standard_normal((d_model, d_model)))[0]
    coords = spiral(length, rank, np.ones(rank // 2))
    if permute:
        coords = coords[rng.permutation(length)]
    pos = coords @ q[:, :rank].T
    pos -= pos.mean(0)
    # pooled noise energy sigma^2 d (T - 1) / C must be share / (1 - share) of ||P||^2
    at = contexts if share_at is None else share_at
    sigma = np.sqrt(share / (1 - share) * np.sum(pos**2) * at / (d_model * (length - 1)))
    sizes = np.full(groups, contexts // groups, dtype=np.float64)
    noise = rng.standard_normal((groups, length, d_model)) * sigma / np.sqrt(sizes[0])
    offset = rng.standard_normal((groups, 1, d_model))
    sums = sizes[:, None, None] * (pos + noise + offset)
    return pos, pn.from_sums(sums, sizes, skip_first=False)


def low_freq_energy(pos: np.ndarray) -> float:
    return spectra.low_freq_energy(pos @ pos.T)


@pytest.mark.parametrize("share", SHARES)
def test_corrected_estimators_recover_rank_and_frequency_where_the_plain_ones_do_not(
    share: float,
) -> None:
    truth, groups = planted(share)
    found = pn.corrected(groups, np.zeros((4, truth.shape[1])) + 1.0)
    assert found is not None
    pooled = groups.pooled
    assert found.noise_share == pytest.approx(share, abs=0.04)
    # rank: the 8 planted directions, all found above the noise floor; the plain 95%-energy
    # rank counts noise directions; the corrected one reads K+ (PSD), whose positive noise
    # eigenvalues beyond the negative spread add a few directions (9-12 at these shares)
    assert found.rank == 8 and 7 <= found.rank95 <= 13
    assert found.stable_rank >= 1.0 and np.all(found.eigenvalues >= 0)
    assert spectra.energy_rank(spectra.singular_values(pooled)) > 30
    # frequency: the planted spiral keeps nearly all its energy in the lowest 10% of
    # frequencies; the plain estimate loses a third or more of it to the noise (under half
    # from 63% of noise), the corrected one recovers it
    assert low_freq_energy(truth) > 0.95
    assert found.low_freq_energy == pytest.approx(low_freq_energy(truth), abs=0.05)
    assert low_freq_energy(truth) - low_freq_energy(pooled) > 0.3
    assert share < 0.6 or low_freq_energy(pooled) < 0.5
    # the split-half noise floor: white noise puts about 10% of its energy there
    assert found.noise is not None
    assert found.noise["low_freq_energy"] == pytest.approx(0.1, abs=0.05)


def test_a_rough_positional_part_is_not_made_smooth() -> None:
    """The same spectrum with positions permuted: rank recovered, frequency stays high."""
    truth, groups = planted(0.5, permute=True)
    found = pn.corrected(groups, np.ones((4, truth.shape[1])))
    assert found is not None and found.rank == 8
    assert found.low_freq_energy == pytest.approx(low_freq_energy(truth), abs=0.05)
    assert found.low_freq_energy < 0.3


def test_the_corrected_gram_is_unbiased_where_the_plain_one_is_not() -> None:
    """Averaged over 100 draws of the noise, K is P P^T to within the mean's own noise, and
    pos pos^T exceeds it by the noise covariance (tr V: the plain estimate's noise energy)."""
    draws = [planted(0.5, length=24, d_model=24, seed=s) for s in range(100)]
    truth = draws[0][0] @ draws[0][0].T
    plain = np.array([g.pooled @ g.pooled.T for _, g in draws])
    fixed = np.array([g.pooled @ g.pooled.T - pn.noise_covariance(g) for _, g in draws])
    error = fixed.mean(0) - truth
    standard = fixed.std(0) / np.sqrt(len(draws))
    assert np.mean(np.abs(error) < 3 * standard) > 0.97
    scale = np.trace(truth)
    assert np.trace(plain.mean(0)) / scale == pytest.approx(2.0, rel=0.05)  # half of it noise
    assert np.trace(fixed.mean(0)) / scale == pytest.approx(1.0, rel=0.05)


def test_noise_alone_has_no_direction_above_the_floor() -> None:
    """Pure noise: the eigenvalue floor (95th percentile of sign-flipped groups) lets no
    direction through in most draws, and the noise share is about 1."""
    found = []
    for seed in range(20):
        rng = np.random.default_rng(seed)
        sums = 8.0 * rng.standard_normal((16, 32, 48))
        c = pn.corrected(pn.from_sums(sums, np.full(16, 8.0), False), np.ones((4, 48)), seed)
        assert c is not None and c.noise_share > 0.8
        found.append(c.rank)
    assert sum(r == 0 for r in found) >= 15


def test_contexts_needed_brings_the_noise_share_under_ten_percent() -> None:
    """The noise energy falls as 1/C: at the contexts named, the planted share is 10%."""
    needed = pn.contexts_needed(0.5, 128)
    assert needed == 9 * 128
    assert pn.contexts_needed(0.05, 128) == 128 and pn.contexts_needed(1.0, 128) is None
    _, groups = planted(0.5, contexts=128 * 9, length=48, d_model=64, share_at=128)
    found = pn.corrected(groups, np.ones((4, 64)), baseline=False)
    assert found is not None and found.noise_share == pytest.approx(0.1, abs=0.02)


def test_split_half_noise_has_the_pooled_estimates_noise_level() -> None:
    shares = []
    for seed in range(20):
        truth, groups = planted(0.5, length=32, d_model=48, seed=seed)
        noise = pn.split_half_noise(groups)
        shares.append(np.sum(noise**2) / np.sum(truth**2))
    assert np.mean(shares) == pytest.approx(1.0, rel=0.1)  # noise energy = signal's at 50%


def test_the_coherence_baseline_keeps_the_states_anisotropy() -> None:
    """Context vectors and the noise share a few strong directions; the positional part is
    orthogonal to them. Against isotropic Gaussian vectors it looks coherent; against the
    split-half baseline (noise-only positions treated alike) it does not."""
    rng = np.random.default_rng(3)
    d, length, n_ctx, groups = 96, 48, 64, 16
    q = np.linalg.qr(rng.standard_normal((d, d)))[0]
    pos = spiral(length, 4) @ q[:, :4].T
    strong = q[:, 4:8] * 6.0 + 0.3 * q[:, 8:] @ rng.standard_normal((d - 8, 4))
    ctx = rng.standard_normal((n_ctx, 4)) @ strong.T
    noise = rng.standard_normal((groups, length, 4)) @ strong.T * 0.05
    noise += rng.standard_normal((groups, length, d)) * 0.02
    sums = 4.0 * (pos + noise)
    found = pn.corrected(pn.from_sums(sums, np.full(groups, 4.0), False), ctx)
    assert found is not None and found.noise is not None
    from geomlens.analyses.decomposition.incoherence import random_coherence

    gaussian = random_coherence(length, n_ctx, d, 0)[0]
    assert found.coherence_max < 1.25 * found.noise["coherence_max"]
    assert found.noise["coherence_max"] > 2 * gaussian
    # a positional part inside the strong directions is coherent by either measure
    inside = spiral(length, 4) @ np.linalg.qr(strong)[0].T
    aligned = pn.corrected(pn.from_sums(4.0 * (inside + noise), np.full(groups, 4.0), False), ctx)
    assert aligned is not None and aligned.noise is not None
    assert aligned.coherence_max > 0.9


def test_group_positions_are_the_accumulators_own_sums() -> None:
    """Streamed through the accumulator with 8 groups: the pooled group estimate is the
    decomposition's pos (both views of position 0), and the layer analysis fills the
    corrected numbers from them (None without groups)."""
    rng = np.random.default_rng(1)
    hidden = (rng.standard_normal((32, 20, 16)) + np.linspace(0, 3, 20)[None, :, None]).astype(
        np.float32
    )
    acc = DecompositionAccumulator([0], 32, 20, 16, groups=8)
    for start in range(0, 32, 5):
        idx = np.arange(start, min(32, start + 5))
        acc.update(
            CapturedBatch(
                hidden={0: torch.from_numpy(hidden[idx])},
                context_index=torch.from_numpy(idx),
            )
        )
    for skip in (False, True):
        stats = acc.finalize(0, skip_first=skip)
        groups = pn.group_positions(acc, 0, skip)
        assert groups is not None and groups.n_groups == 8 and groups.n_contexts == 32
        np.testing.assert_allclose(groups.pooled, stats.pos, atol=1e-5)
        means = hidden[:, int(skip) :].reshape(8, 4, 20 - int(skip), 16).mean(1)
        centred = means - means.mean(1, keepdims=True)
        np.testing.assert_allclose(groups.pos, centred, atol=1e-5)
        row = analyse_layer(stats, groups=groups).to_dict()
        assert 0 <= row["pos_noise_share"] <= 1 and row["pos_rank_corrected"] is not None
        assert analyse_layer(stats).to_dict()["pos_noise_share"] is None
    plain = DecompositionAccumulator([0], 32, 20, 16)
    assert pn.group_positions(plain, 0, False) is None
