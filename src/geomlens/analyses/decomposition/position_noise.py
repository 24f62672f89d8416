"""Sampling noise in the positional estimate, and position statistics with it removed.

``pos[t]`` is a mean over C contexts, so it is the positional part P[t] plus noise whose
energy falls as 1/C. Every plain statistic of pos (ranks, frequencies, coherence with the
context vectors) reads that noise as if it were position: at 128 contexts it is about a
third to a half of a decoder's positional energy. The capture keeps the positional sums of
G groups of contexts (``DecompositionAccumulator(groups=G)``); each group's mean pos_g is
P plus noise independent of the other groups', so

- the spread of the groups gives the noise covariance of the pooled estimate,
  ``V = sum_g n_g (pos_g - pos)(pos_g - pos)^T / ((G - 1) N)`` ([T', T'], N contexts), and
- ``K = pos pos^T - V`` estimates the noise-free Gram ``P P^T`` without bias: for groups
  of equal size it is the mean of the cross-products ``pos_g pos_h^T`` over pairs of
  distinct groups (E[P_A P_B^T] = P P^T for independent halves A and B).

K is unbiased but not a Gram matrix: where noise dominates a direction, K's eigenvalue
there is negative (the noise subtracted, V, exceeds what pos holds in it). Two readings:

- spectra (ranks, stable rank, the eigenvalue floor's scale) read ``K+``, a positive
  semi-definite matrix: K's eigenvalues at or below ``|lambda_min(K)|`` set to 0. That is
  the projection onto the PSD cone (negative eigenvalues to 0, the nearest PSD matrix in
  Frobenius norm) and, beside it, the positive eigenvalues inside the same spread: the
  noise moves K's eigenvalues up as much as down, so those are as much noise as the
  negative ones (clipping only the negative ones put that noise back, and a rank-8 P at a
  noise share of 0.37 read a 95%-energy rank of 19). A spectrum with negative eigenvalues
  has a "stable rank" tr(K) / lambda_1 below 1, which no Gram matrix can have; K+ keeps
  every such number in its range (stable rank >= 1). Directions weaker than the spread
  are lost, so K+'s ranks are biased low under strong noise.
- the low-frequency energy ``tr(F_low^T K F_low) / tr(K)`` reads K itself: numerator and
  denominator are linear in K, so both are unbiased; clipping would add the clipped
  noise mass, spread over all frequencies, and pull the share toward white noise's 10%.

The normalised Gram matrix and the coherence with ctx are read on pos projected onto
K's eigenvectors above the noise floor (the eigenvalue that noise alone reaches, from
sign-flipped groups). Beside each number
stands a split-half noise floor: the same statistic of a noise-only estimate, the
difference of two halves of the groups scaled to the pooled estimate's noise,
``(pos_A - pos_B) sqrt(N_A N_B) / N`` (the positional signal cancels). See
docs/decomposition.md, "Noise in the positional estimate".
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from geomlens.analyses.common import spectra
from geomlens.analyses.decomposition import incoherence
from geomlens.stats.decomposition import DecompositionAccumulator

Array = npt.NDArray[np.float64]

NOISE_TARGET = 0.1
"""The noise share a claim needs to be decided (``contexts_needed``)."""

PLANTED_SHARE_MAX = 0.65
"""The largest noise share the planted calibration of the claims' guards covers
(``analyses.decomposition.planted``, docs/claims.md): no guard resting on it decides
beyond it."""

FLIPS = 20
"""Balanced sign flips of the groups drawn for the eigenvalue noise floor."""

FLOOR_QUANTILE = 0.95
"""The flips' top eigenvalue at this quantile is the floor a signal eigenvalue must pass."""


@dataclass(frozen=True)
class GroupPositions:
    """One layer's positional estimate per group of contexts.

    Attributes:
        pos: [G, T', d] each group's mean over its contexts, centred over positions.
        sizes: [G] contexts in each group.
        grams: [G, T', T'] each group's ``pos_g pos_g^T`` (kept to redo subsets cheaply).
    """

    pos: Array
    sizes: Array
    grams: Array

    @property
    def n_groups(self) -> int:
        return int(self.sizes.size)

    @property
    def n_contexts(self) -> int:
        return int(self.sizes.sum())

    @property
    def pooled(self) -> Array:
        """[T', d] the pooled positional estimate (the decomposition's pos)."""
        return np.tensordot(self.sizes / self.sizes.sum(), self.pos, axes=1)

    def subset(self, keep: npt.NDArray[np.bool_]) -> GroupPositions:
        """The groups where ``keep`` is true."""
        return GroupPositions(self.pos[keep], self.sizes[keep], self.grams[keep])


def from_sums(sums: Array, sizes: Array, skip_first: bool) -> GroupPositions:
    """Group positional estimates from each group's sums over its contexts.

    Args:
        sums: [G, T, d] sum over each group's contexts of the hidden states.
        sizes: [G] contexts per group (each at least 1).
        skip_first: leave position 0 out.
    """
    sums = np.asarray(sums, dtype=np.float64)
    sizes = np.asarray(sizes, dtype=np.float64)
    if skip_first:
        sums = sums[:, 1:]
    means = sums / sizes[:, None, None]
    pos = means - means.mean(axis=1, keepdims=True)
    return GroupPositions(pos, sizes, pos @ pos.transpose(0, 2, 1))


def group_positions(
    acc: DecompositionAccumulator, layer: int, skip_first: bool
) -> GroupPositions | None:
    """A decomposition accumulator's group estimates of one layer (None without groups,
    or with a group of no context)."""
    if acc.group_pos_sum is None:
        return None
    sizes = np.bincount(acc.group_of.cpu().numpy(), minlength=acc.groups).astype(np.float64)
    if not (sizes > 0).all():
        return None
    sums = acc.group_pos_sum[acc.layers.index(layer)].cpu().numpy()
    return from_sums(sums, sizes, skip_first)


def noise_covariance(groups: GroupPositions, pooled: Array | None = None) -> Array:
    """[T', T'] V, the covariance of the pooled estimate's noise over positions, from the
    spread of the groups: ``(sum_g n_g pos_g pos_g^T - N pos pos^T) / ((G - 1) N)``."""
    pooled = groups.pooled if pooled is None else pooled
    n, g = groups.n_contexts, groups.n_groups
    spread = np.tensordot(groups.sizes, groups.grams, axes=1) - n * (pooled @ pooled.T)
    return spread / ((g - 1) * n)


def contexts_needed(
    noise_share: float, n_contexts: int, target: float = NOISE_TARGET, upper: float | None = None
) -> int | None:
    """Contexts at which the noise share's interval falls under ``target``. The noise
    energy falls as 1/C and the signal's stays, so the ratio s / (1 - s) falls as 1/C, and
    with it the upper end of the share's interval (its relative width stays). Aiming that
    upper end u, not the share itself, under the target: C' = C (u / (1 - u)) (1 - target)
    / target, u = max(s, ``upper``) (``upper`` None: u = s, no margin). None when no
    signal stands above the noise (u >= 1)."""
    if upper is not None and math.isfinite(upper):
        noise_share = max(noise_share, upper)
    if not math.isfinite(noise_share) or noise_share >= 1.0:
        return None
    if noise_share <= 0.0:
        return n_contexts
    ratio = noise_share / (1.0 - noise_share) * (1.0 - target) / target
    return max(n_contexts, math.ceil(n_contexts * ratio - 1e-9))


@dataclass(frozen=True)
class CorrectedPositions:
    """One layer's positional statistics with the sampling noise removed.

    Attributes:
        noise_share: tr(V) / ||pos||_F^2, the share of the plain estimate's energy that is
            noise (the split-half disagreement).
        contexts_needed: contexts at which that share would fall under 10% (None when no
            positional energy stands above the noise).
        eigenvalues: the eigenvalues of K+ (K's eigenvalues with those at or below
            |lambda_min(K)| set to 0: PSD), decreasing: the squared singular values of P.
        rank95: smallest k whose top-k eigenvalues of K+ reach 95% of tr(K+).
        stable_rank: tr(K+) / lambda_1(K+), at least 1 (nan when K+ is 0).
        rank: r, the eigenvalues of K above the noise floor.
        low_freq_energy: ``spectra.low_freq_energy`` of K: the share of P's energy in the
            lowest 10% of frequencies over positions (unbiased numerator and denominator).
        low_freq, smoothness: ``spectra.low_freq_share`` and ``spectra.smoothness`` of the
            normalised Gram of pos projected onto K's top r eigenvectors (over positions),
            ``P_r = U_r U_r^T pos``: the noise outside them removed.
        coherence_max, coherence_mean: max and mean |cos(P_r[t], ctx_c)|.
        incoherence_mean: mean principal-angle cosine between the top r directions of P_r
            and of ctx.
        floor: the noise floor of K's eigenvalues over tr(K+) (None when r was given
            rather than found). A ratio, not a share: it passes 1 where noise alone puts
            more into one direction than the whole noise-free energy holds, and then no
            direction passes the floor (r = 0).
        negative_share: the mass of K's negative eigenvalues over tr(K+) (0 for a PSD K):
            how far K is from a Gram matrix.
        margin: the weakest counted eigenvalue of K over the noise floor (None when r was
            given or is 0): near 1 when the spectrum runs on into the floor, so that
            weaker directions beyond the count may be hidden under it; large when the
            spectrum ends well above the floor.
        noise: the split-half noise floors (None without them): "rank95", "stable_rank",
            "low_freq", "low_freq_energy" of the noise-only estimate N (the plain
            statistics read from noise alone), and "coherence_max", "incoherence_mean" of
            U_r U_r^T N (the baseline the corrected coherence is compared with).
    """

    noise_share: float
    contexts_needed: int | None
    eigenvalues: Array
    rank95: int
    stable_rank: float
    rank: int
    low_freq_energy: float
    low_freq: float
    smoothness: float
    coherence_max: float
    coherence_mean: float
    incoherence_mean: float
    floor: float | None = None
    noise: dict[str, float] | None = None
    negative_share: float | None = None
    margin: float | None = None

    @property
    def singular_values(self) -> tuple[float, ...]:
        """sqrt of K+'s positive eigenvalues: the noise-free spectrum of pos."""
        return tuple(math.sqrt(v) for v in self.eigenvalues if v > 0)


def energy_rank(eigenvalues: Array, level: float = 0.95) -> int:
    """Smallest k whose top-k eigenvalues reach ``level`` of their sum (0 if it is <= 0)."""
    total = float(np.sum(eigenvalues))
    if not total > 0:
        return 0
    cum = np.cumsum(eigenvalues) / total
    return min(len(eigenvalues), int(np.searchsorted(cum, level - 1e-12)) + 1)


def split_half_noise(groups: GroupPositions) -> Array:
    """[T', d] a noise-only estimate with the pooled estimate's noise level: the first half
    of the groups minus the second, ``(pos_A - pos_B) sqrt(N_A N_B) / N``. Contiguous
    halves keep windows of one document mostly on one side."""
    half = groups.n_groups // 2
    w = groups.sizes
    a = np.tensordot(w[:half] / w[:half].sum(), groups.pos[:half], axes=1)
    b = np.tensordot(w[half:] / w[half:].sum(), groups.pos[half:], axes=1)
    n_a, n_b = float(w[:half].sum()), float(w[half:].sum())
    return np.asarray((a - b) * math.sqrt(n_a * n_b) / (n_a + n_b))


def eigen_floor(groups: GroupPositions, seed: int, flips: int = FLIPS) -> float:
    """The top eigenvalue noise alone gives K: K recomputed from each group's deviation
    from the pooled estimate, sign-flipped (half of the groups each way, so the positional
    signal cancels), at ``FLOOR_QUANTILE`` over ``flips`` draws."""
    pooled = groups.pooled
    dev = groups.pos - pooled
    n, g, w = groups.n_contexts, groups.n_groups, groups.sizes
    # sum_g n_g dev_g dev_g^T, the same for every flip
    within = np.tensordot(w, groups.grams, axes=1) - n * (pooled @ pooled.T)
    rng = np.random.default_rng([seed, g, 11])
    tops = []
    for _ in range(flips):
        signs = np.where(rng.permutation(g) < g // 2, -1.0, 1.0)
        s = np.tensordot(signs * w / n, dev, axes=1)
        outer = s @ s.T
        # K of the flipped groups: their pooled Gram minus their noise covariance
        flipped = outer - (within - n * outer) / ((g - 1) * n)
        tops.append(float(np.linalg.eigvalsh((flipped + flipped.T) / 2)[-1]))
    return float(np.quantile(tops, FLOOR_QUANTILE))


def corrected(
    groups: GroupPositions,
    ctx: Array,
    seed: int = 0,
    rank: int | None = None,
    baseline: bool = True,
    ctx_svd: tuple[Array, Array] | None = None,
) -> CorrectedPositions | None:
    """The noise-corrected position statistics of one layer (None with fewer than 2
    groups or no positional energy).

    Args:
        groups: the layer's group estimates.
        ctx: [C, d] the context part (the other side of the coherence).
        seed: seed of the sign flips of the eigenvalue floor.
        rank: r, when already known (a resample takes the whole corpus's, so that every
            draw projects onto as many directions); None: found from the noise floor.
        baseline: also compute the split-half noise floors (resamples leave them out).
        ctx_svd: (singular values, Vt) of ``ctx`` when already computed.
    """
    if groups.n_groups < 2:
        return None
    pooled = groups.pooled
    plain = pooled @ pooled.T
    energy = float(np.trace(plain))
    if not energy > 0:
        return None
    noise_cov = noise_covariance(groups, pooled)
    gram = plain - noise_cov
    values, vectors = np.linalg.eigh((gram + gram.T) / 2)
    values, vectors = values[::-1], vectors[:, ::-1]
    share = float(np.trace(noise_cov)) / energy
    # spectra read K+ (see the module docstring): K's eigenvalues inside the noise's
    # symmetric spread [-|lambda_min|, |lambda_min|] set to 0, the negative ones included
    spread = max(-float(values[-1]), 0.0)
    psd = np.where(values > spread, values, 0.0)
    top, total = float(psd[0]), float(np.sum(psd))
    negative = -float(np.sum(values[values < 0]))
    floor = margin = None
    if rank is None:
        floor_value = eigen_floor(groups, seed)
        rank = int(np.sum(values > floor_value))
        floor = floor_value / total if total > 0 else math.nan
        if rank > 0 and floor_value > 0:
            margin = float(values[rank - 1]) / floor_value
    rank = min(rank, int(np.sum(values > 0)))
    basis = vectors[:, :rank]
    coefficients = basis.T @ pooled
    denoised = basis @ coefficients
    low_freq, smooth, coh_max, coh_mean, inc = _denoised_shape(
        denoised, coefficients, ctx, rank, ctx_svd
    )
    noise = None
    if baseline:
        noise = noise_floors(split_half_noise(groups), basis, ctx, ctx_svd)
    return CorrectedPositions(
        noise_share=share,
        contexts_needed=contexts_needed(share, groups.n_contexts),
        eigenvalues=psd,
        rank95=energy_rank(psd),
        stable_rank=max(total / top, 1.0) if top > 0 else math.nan,
        rank=rank,
        low_freq_energy=spectra.low_freq_energy(gram),  # K, not K+: unbiased
        low_freq=low_freq,
        smoothness=smooth,
        coherence_max=coh_max,
        coherence_mean=coh_mean,
        incoherence_mean=inc,
        floor=floor,
        noise=noise,
        negative_share=negative / total if total > 0 else math.nan,
        margin=margin,
    )


def _denoised_shape(
    denoised: Array,
    coefficients: Array,
    ctx: Array,
    rank: int,
    ctx_svd: tuple[Array, Array] | None,
) -> tuple[float, float, float, float, float]:
    """(low-frequency share, smoothness, max and mean |cos| with the context part, mean
    incoherence) of the denoised positional part [T', d] of rank ``rank`` (all NaN at 0)."""
    if rank <= 0:
        return (math.nan,) * 5
    unit = spectra.gram_matrix(denoised)
    coh_max, coh_mean = incoherence.abs_cosine_summary(denoised, ctx)
    inc = incoherence.incoherence(
        denoised, ctx, rank, baseline=False, ctx_svd=ctx_svd, pos_svd=projected_svd(coefficients)
    ).mean_cos
    return spectra.low_freq_share(unit), spectra.smoothness(unit), coh_max, coh_mean, inc


def projected_svd(coefficients: Array) -> tuple[Array, Array]:
    """(singular values, Vt) of ``U C`` for U [T', r] with orthonormal columns, from the
    small [r, d] coefficients C alone: ``U C = (U W) S Vt`` with ``C = W S Vt``, so both
    share S and Vt (the T' - r further singular values of U C are zero, which the
    numerical rank leaves out either way). An r x d SVD instead of a T' x d one."""
    _, values, vt = np.linalg.svd(coefficients, full_matrices=False)
    return values, vt


def noise_floors(
    noise: Array, basis: Array, ctx: Array, ctx_svd: tuple[Array, Array] | None = None
) -> dict[str, float]:
    """The split-half noise floors from a noise-only estimate N ([T', d]): the plain
    rank95, stable rank and low-frequency share of N (what the plain statistics read from
    noise alone), and the coherence and subspace incoherence of N projected onto
    ``basis`` ([T', r], as the corrected numbers project pos)."""
    svals = spectra.singular_values(noise)
    out = {
        "rank95": float(spectra.energy_rank(svals)),
        "stable_rank": spectra.stable_rank(svals),
        "low_freq": spectra.low_freq_share(spectra.gram_matrix(noise)),
        "low_freq_energy": spectra.low_freq_energy(noise @ noise.T),
        "coherence_max": math.nan,
        "incoherence_mean": math.nan,
    }
    if basis.shape[1]:
        coefficients = basis.T @ noise
        projected = basis @ coefficients
        out["coherence_max"] = incoherence.abs_cosine_summary(projected, ctx)[0]
        out["incoherence_mean"] = incoherence.incoherence(
            projected,
            ctx,
            basis.shape[1],
            baseline=False,
            ctx_svd=ctx_svd,
            pos_svd=projected_svd(coefficients),
        ).mean_cos
    return out


def denoised_positions(groups: GroupPositions, rank: int) -> Array:
    """[T', d] P_r = U_r U_r^T pos: the pooled pos projected onto K's top ``rank``
    eigenvectors (at most its positive ones), as ``corrected`` projects it for the Gram
    low-frequency share, smoothness and coherence; the page draws its Gram matrix and
    spiral. Zeros when ``rank`` is 0 (no direction above the noise floor)."""
    pooled = groups.pooled
    gram = pooled @ pooled.T - noise_covariance(groups, pooled)
    values, vectors = np.linalg.eigh((gram + gram.T) / 2)
    values, vectors = values[::-1], vectors[:, ::-1]
    basis = vectors[:, : min(max(rank, 0), int(np.sum(values > 0)))]
    return np.asarray(basis @ (basis.T @ pooled))
