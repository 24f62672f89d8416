"""Position and context decomposition of hidden states, one layer at a time.

For C contexts x T' positions, ``h[c,t] = mu + pos[t] + ctx[c] + resid[c,t]`` (Song & Zhong,
2023). From the streamed ``DecompositionStats`` of a layer this computes the variance
shares, the relative norm of the positional part, its rank, spectrum, smoothness and
low-frequency share, its incoherence with the context part, and how context vectors
cluster by document label. See docs/decomposition.md for every formula.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from geomlens.analyses.common import spectra
from geomlens.analyses.common.layer_threads import map_layers
from geomlens.analyses.decomposition import context_clusters, incoherence, position_noise
from geomlens.analyses.decomposition.position_noise import CorrectedPositions, GroupPositions
from geomlens.stats.decomposition import (
    DecompositionAccumulator,
    DecompositionStats,
    sketch_basis,
)
from geomlens.stats.eigen import top_eigenvalue

Array = npt.NDArray[np.float64]
Labels = Sequence[object] | npt.NDArray[np.generic]

N_SINGULAR_VALUES = 64
"""Leading singular values of pos kept in the results."""


@dataclass(frozen=True)
class LayerDecomposition:
    """Every number of the position/context analysis for one layer.

    Ratios that are undefined (a zero matrix, no pair of contexts) are nan here and
    null in ``to_dict()``.

    Attributes:
        layer: hidden-state layer (0 = embedding output).
        skip_first: whether position 0 was left out.
        n_contexts: C.
        n_positions: T' (T, or T - 1 when position 0 is skipped).
        share_pos: C * sum_t |pos[t]|^2 / S, with S = sum |h - mu|^2.
        share_ctx: T' * sum_c |ctx[c]|^2 / S.
        share_resid: sum |resid|^2 / S = 1 - share_pos - share_ctx.
        rel_norm_pos: ||pos broadcast to every context||_2 / ||H||_2 (H uncentred), or None
            without second moments (a resample: estimated from their sketch).
        rel_norm_pos_centred: the same over ||H - mu||_2 (the later variant of the
            original code), or None without second moments.
        pos_rank: ScreeNOT rank of pos.
        pos_rank_bound: the upper bound k given to ScreeNOT.
        pos_stable_rank: sum s_i^2 / s_1^2 over the singular values s of pos.
        pos_explained: sum of the top pos_rank singular values over the sum of all.
        pos_rank95: smallest k whose top-k squared singular values reach 95% of the total.
        pos_singular_values: the first 64 singular values of pos.
        pos_low_freq: share of the DCT of the normalised Gram matrix in the lowest
            ceil(T'/10) x ceil(T'/10) frequencies.
        pos_smoothness: mean |G[t+1, t'] - G[t, t']| / mean |G|.
        pos_low_freq_energy: share of ||pos||_F^2 in the lowest ceil(T'/10) frequencies
            over positions (DCT-II of each coordinate), ``spectra.low_freq_energy``.
        pos_nothing_to_measure: why the positional part's statistics are null although its
            energy is not exactly 0 (energy at float64 rounding level beside the layer's
            variance, ``ROUNDING_SHARE``), or None.
        incoherence_k: dimension of the compared subspaces (pos_rank95, capped by ranks).
        incoherence_max: largest principal-angle cosine between top-k pos and ctx directions.
        incoherence_mean: mean principal-angle cosine.
        incoherence_random: mean principal-angle cosine of random k-dim subspaces of R^d.
        coherence_max: the paper's mutual coherence, max over t, c of |cos(pos_t, ctx_c)|.
        coherence_mean: mean |cos(pos_t, ctx_c)| over the pairs.
        coherence_random_max: the mutual coherence of as many Gaussian vectors in R^d.
        coherence_random_mean: their mean |cos|.
        n_labels: number of distinct document labels, or None without labels.
        ctx_cos_within: mean |cos| between context vectors with the same label, or None.
        ctx_cos_between: mean |cos| between context vectors with different labels, or None.
        ctx_cluster_ari: adjusted Rand index of k-means on context vectors, or None.

    With the noise removed (``analyses.decomposition.position_noise``; None without
    interval groups):

        pos_noise_share: share of pos's energy that is sampling noise (tr V / ||pos||^2).
        pos_contexts_needed: contexts at which that share would fall under 10%.
        pos_rank_corrected: eigenvalues of the noise-free Gram K above the noise floor (r).
        pos_eigen_floor: that floor over tr(K+) (above 1: no direction passes it).
        pos_rank_margin: the weakest of those r eigenvalues over the floor (near 1: the
            spectrum runs on into the floor; None when r = 0).
        pos_gram_negative_share: the mass of K's negative eigenvalues over tr(K+): how far
            the unbiased K is from a Gram matrix (0 for a positive semi-definite K).
        pos_rank95_corrected: smallest k whose top-k eigenvalues of K+ (K projected onto
            the positive semi-definite cone, its noise spread removed) reach 95% of tr(K+).
        pos_stable_rank_corrected: tr(K+) / lambda_1(K+), at least 1.
        pos_singular_values_corrected: sqrt of K's first 64 positive eigenvalues.
        pos_low_freq_energy_corrected: the share of the positional energy in the lowest
            10% of frequencies over positions, from K (``pos_low_freq_energy`` plain).
        pos_low_freq_corrected, pos_smoothness_corrected: pos_low_freq and
            pos_smoothness of pos projected onto K's top r eigenvectors.
        coherence_max_corrected, coherence_mean_corrected: the mutual coherence of that
            projection with ctx.
        incoherence_mean_corrected: mean principal-angle cosine of its top r directions
            and ctx's.
        pos_rank95_noise, pos_stable_rank_noise, pos_low_freq_noise,
            pos_low_freq_energy_noise: the plain statistics of a split-half noise-only
            estimate (what noise alone reads).
        coherence_max_noise, incoherence_mean_noise: the coherence and subspace
            incoherence of that estimate projected as pos is (the split-half baseline).
    """

    layer: int
    skip_first: bool
    n_contexts: int
    n_positions: int
    share_pos: float
    share_ctx: float
    share_resid: float
    rel_norm_pos: float | None
    rel_norm_pos_centred: float | None
    pos_rank: int
    pos_rank_bound: int
    pos_stable_rank: float
    pos_explained: float
    pos_rank95: int
    pos_singular_values: tuple[float, ...]
    pos_low_freq: float
    pos_smoothness: float
    incoherence_k: int
    incoherence_max: float
    incoherence_mean: float
    incoherence_random: float
    coherence_max: float
    coherence_mean: float
    coherence_random_max: float
    coherence_random_mean: float
    n_labels: int | None
    ctx_cos_within: float | None
    ctx_cos_between: float | None
    ctx_cluster_ari: float | None
    pos_low_freq_energy: float | None = None
    pos_nothing_to_measure: str | None = None
    pos_noise_share: float | None = None
    pos_contexts_needed: int | None = None
    pos_rank_corrected: int | None = None
    pos_eigen_floor: float | None = None
    pos_rank_margin: float | None = None
    pos_gram_negative_share: float | None = None
    pos_rank95_corrected: int | None = None
    pos_stable_rank_corrected: float | None = None
    pos_low_freq_energy_corrected: float | None = None
    pos_singular_values_corrected: tuple[float, ...] | None = None
    pos_low_freq_corrected: float | None = None
    pos_smoothness_corrected: float | None = None
    coherence_max_corrected: float | None = None
    coherence_mean_corrected: float | None = None
    incoherence_mean_corrected: float | None = None
    pos_rank95_noise: float | None = None
    pos_stable_rank_noise: float | None = None
    pos_low_freq_noise: float | None = None
    pos_low_freq_energy_noise: float | None = None
    coherence_max_noise: float | None = None
    incoherence_mean_noise: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able values: ints, floats (non-finite become None), lists, bools."""
        return {k: _jsonable(v) for k, v in dataclasses.asdict(self).items()}


def _jsonable(value: Any) -> Any:
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, (tuple, list)):
        return [_jsonable(v) for v in value]
    return value


def relative_norms(
    stats: DecompositionStats, pos_top: float | None = None
) -> tuple[float | None, float | None]:
    """Spectral norm of the broadcast positional part over that of the hidden states.

    The broadcast matrix has row (c, t) = pos[t], so its norm is sqrt(C) * ||pos||_2. The
    uncentred hidden states have norm sqrt(lambda_max(sum h h^T)); the centred ones
    sqrt(lambda_max(sum h h^T - N mu mu^T)) with N = C * T'. A resample has only the
    sketch ``(sum h h^T) @ Omega`` of its second moments: its top eigenvalues are then
    Nystrom estimates (``nystrom_top_eigenvalue``), never above the exact ones.

    Args:
        stats: one layer's decomposition statistics.
        pos_top: ||pos||_2 when already known.

    Returns:
        (uncentred, centred) relative norms, or (None, None) with neither the second
        moments nor their sketch.
    """
    if stats.second_moment is None and stats.second_sketch is None:
        return None, None
    if pos_top is None:
        pos_top = float(np.linalg.norm(stats.pos, ord=2))
    numerator = math.sqrt(stats.n_contexts) * pos_top
    n = stats.n_contexts * stats.length
    if stats.second_moment is not None:
        second = np.asarray(stats.second_moment, dtype=np.float64)
        centred = second - n * np.outer(stats.mean, stats.mean)
        tops = [_top_eigenvalue(m) for m in (second, centred)]
    else:
        sketch = np.asarray(stats.second_sketch, dtype=np.float64)
        basis = sketch_basis(sketch.shape[0], sketch.shape[1])
        centred = sketch - n * np.outer(stats.mean, stats.mean @ basis)
        tops = [nystrom_top_eigenvalue(y, basis) for y in (sketch, centred)]
    norms = [math.sqrt(max(top, 0.0)) for top in tops]
    uncentred_ratio, centred_ratio = (numerator / x if x > 0 else math.nan for x in norms)
    return uncentred_ratio, centred_ratio


def nystrom_top_eigenvalue(sketch: Array, basis: Array) -> float:
    """Largest eigenvalue of the Nystrom approximation of a symmetric positive
    semidefinite M from its sketch Y = M Omega: that of Y (Omega^T Y)^+ Y^T.

    The approximation is the best M restricted to the range of Y, so its top eigenvalue
    is at most M's and close to it when M's top eigenvalue stands out of the rest. A
    small shift nu Omega keeps the core well conditioned and is taken off afterwards
    (Tropp, Yurtsever, Udell & Cevher 2017, "Fixed-rank approximation of a positive
    semidefinite matrix from streaming data").

    Args:
        sketch: [d, r] Y = M @ basis.
        basis: [d, r] the test matrix Omega.
    """
    shift = np.finfo(np.float64).eps * math.sqrt(sketch.shape[0]) * _top_singular(sketch)
    shifted = sketch + shift * basis
    core = basis.T @ shifted
    values, vectors = np.linalg.eigh((core + core.T) / 2)
    keep = values > values[-1] * 1e-12
    if not keep.any():
        return 0.0
    b = shifted @ (vectors[:, keep] / np.sqrt(values[keep]))
    return max(_top_singular(b) ** 2 - shift, 0.0)


def _top_singular(x: Array) -> float:
    """The largest singular value of a tall [d, r] matrix, from the top eigenvalue of its
    r x r Gram matrix (the same to rounding as the SVD's, at a fraction of its cost)."""
    gram = x.T @ x
    return math.sqrt(max(float(np.linalg.eigvalsh((gram + gram.T) / 2)[-1]), 0.0))


def _top_eigenvalue(m: Array) -> float:
    """Largest eigenvalue of a symmetric second-moment matrix: Lanczos from a fixed start
    (deterministic), with the dense solver when ARPACK fails (``stats.eigen``)."""
    return top_eigenvalue(m, "the hidden states' second-moment matrix")


ROUNDING_SHARE = 1e-12
"""A positional part holding at most this share of the layer's variance is float64 rounding
(about 1e-16 per operation, summed over thousands of states), not position."""


def at_rounding_level(stats: DecompositionStats) -> str | None:
    """Why the positional part holds nothing to measure (its energy is above 0 but at
    rounding level), or None when it holds something or is exactly 0."""
    share = stats.raw_shares[0]
    if not share > 0 or share > ROUNDING_SHARE:
        return None
    return (
        f"the positional part holds {share:.1e} of the layer's variance, float64 rounding "
        f"(at most {ROUNDING_SHARE:g}), so its ranks, spectra and coherences are not measured"
    )


def measurable_positions(
    stats: DecompositionStats, groups: GroupPositions | None
) -> tuple[npt.NDArray[np.float64], GroupPositions | None, str | None]:
    """(pos, its groups, None), or, for a positional part at rounding level, (zeros, None,
    why): rounding is not position, so its statistics are nulls, as for an exact zero."""
    pos = np.asarray(stats.pos, dtype=np.float64)
    nothing = at_rounding_level(stats)
    if nothing is None:
        return pos, groups, None
    return np.zeros_like(pos), None, nothing


def analyse_layer(
    stats: DecompositionStats,
    labels: Labels | None = None,
    seed: int = 0,
    baseline: bool = True,
    incoherence_k: int | None = None,
    groups: GroupPositions | None = None,
    noise_rank: int | None = None,
) -> LayerDecomposition:
    """All position/context numbers of one layer.

    Args:
        stats: one layer's decomposition statistics.
        labels: [C] one document label per context (ints or strings), or None.
        seed: seed of the random incoherence baseline and of k-means.
        baseline: draw the principal-angle incoherence's random baseline (most of this
            function's time); resamples skip it (``incoherence_random`` is nan).
        incoherence_k: the dimension of the compared subspaces (default ``pos_rank95``);
            resamples pass the whole corpus's, so every draw compares the same dimension.
        groups: the layer's positional estimates per group of contexts, for the numbers
            with the noise removed (None: those are None).
        noise_rank: r for the noise-corrected numbers (default: found from the noise
            floor); resamples pass the whole corpus's.

    Returns:
        The layer's results; deterministic for a given seed.
    """
    ctx = np.asarray(stats.ctx, dtype=np.float64)
    pos, groups, nothing = measurable_positions(stats, groups)
    _, svals, vt = np.linalg.svd(pos, full_matrices=False)
    top = float(svals[0]) if svals.size else 0.0
    share_pos, share_ctx, share_resid = stats.shares
    rel_norm, rel_norm_centred = relative_norms(stats, top)

    rank = spectra.screenot_rank(pos, svals=svals)
    rank95 = spectra.energy_rank(svals, 0.95)
    gram = spectra.gram_matrix(pos)
    k = rank95 if incoherence_k is None else incoherence_k
    _, ctx_values, ctx_vt = np.linalg.svd(ctx, full_matrices=False)
    ctx_svd = (ctx_values, ctx_vt)
    inc = incoherence.incoherence(pos, ctx, k, seed, (svals, vt), baseline, ctx_svd)
    coherence = incoherence.vector_coherence(pos, ctx, seed)

    noise_free = (
        None
        if groups is None
        else position_noise.corrected(groups, ctx, seed, noise_rank, baseline, ctx_svd)
    )
    return LayerDecomposition(
        layer=int(stats.layer),
        skip_first=bool(stats.skip_first),
        n_contexts=int(stats.n_contexts),
        n_positions=int(stats.length),
        share_pos=share_pos,
        share_ctx=share_ctx,
        share_resid=share_resid,
        rel_norm_pos=rel_norm,
        rel_norm_pos_centred=rel_norm_centred,
        pos_rank=rank,
        pos_rank_bound=spectra.screenot_bound(pos.shape),
        pos_stable_rank=spectra.stable_rank(svals),
        pos_explained=spectra.explained_ratio(svals, rank),
        pos_rank95=rank95,
        pos_singular_values=tuple(float(s) for s in svals[:N_SINGULAR_VALUES]),
        pos_low_freq=spectra.low_freq_share(gram),
        pos_smoothness=spectra.smoothness(gram),
        incoherence_k=inc.k,
        incoherence_max=inc.max_cos,
        incoherence_mean=inc.mean_cos,
        incoherence_random=inc.random_mean_cos,
        coherence_max=coherence.max_cos,
        coherence_mean=coherence.mean_cos,
        coherence_random_max=coherence.random_max_cos,
        coherence_random_mean=coherence.random_mean_cos,
        **_label_fields(ctx, labels, stats.n_contexts, seed),
        pos_low_freq_energy=spectra.low_freq_energy(pos @ pos.T),
        pos_nothing_to_measure=nothing,
        **corrected_fields(noise_free),
    )


def _label_fields(
    ctx: npt.NDArray[np.float64], labels: Labels | None, n_contexts: int, seed: int
) -> dict[str, Any]:
    """The ``LayerDecomposition`` fields of the context vectors' document labels (None
    without labels): how many labels, |cos| within and between them, k-means ARI."""
    out: dict[str, Any] = dict.fromkeys(
        ("n_labels", "ctx_cos_within", "ctx_cos_between", "ctx_cluster_ari")
    )
    if labels is None:
        return out
    out["n_labels"] = len(np.unique(context_clusters.encode_labels(labels, n_contexts)))
    clusters = context_clusters.context_clusters(ctx, labels, seed)
    if clusters is not None:
        out["ctx_cos_within"], out["ctx_cos_between"] = clusters.cos_within, clusters.cos_between
        out["ctx_cluster_ari"] = clusters.ari
    return out


def corrected_fields(found: CorrectedPositions | None) -> dict[str, Any]:
    """The ``LayerDecomposition`` fields of the noise-corrected numbers (none: empty)."""
    if not found:
        return {}
    noise = found.noise or {}
    return {
        "pos_noise_share": found.noise_share,
        "pos_contexts_needed": found.contexts_needed,
        "pos_rank_corrected": found.rank,
        "pos_eigen_floor": found.floor,
        "pos_rank_margin": found.margin,
        "pos_gram_negative_share": found.negative_share,
        "pos_rank95_corrected": found.rank95,
        "pos_stable_rank_corrected": found.stable_rank,
        "pos_low_freq_energy_corrected": found.low_freq_energy,
        "pos_singular_values_corrected": found.singular_values[:N_SINGULAR_VALUES],
        "pos_low_freq_corrected": found.low_freq,
        "pos_smoothness_corrected": found.smoothness,
        "coherence_max_corrected": found.coherence_max,
        "coherence_mean_corrected": found.coherence_mean,
        "incoherence_mean_corrected": found.incoherence_mean,
        **{
            f"pos_{key}_noise": noise.get(key)
            for key in ("rank95", "stable_rank", "low_freq", "low_freq_energy")
        },
        **{f"{key}_noise": noise.get(key) for key in ("coherence_max", "incoherence_mean")},
    }


def analyse_layers(
    acc: DecompositionAccumulator,
    labels: Labels | None = None,
    skip_first: bool = False,
    seed: int = 0,
    progress: Callable[[int], object] | None = None,
) -> list[LayerDecomposition]:
    """``analyse_layer`` over every layer of a complete accumulator, in its layer order,
    with the noise-corrected numbers where the accumulator keeps interval groups.

    Args:
        acc: the accumulator after every context has been seen once.
        labels: [C] one document label per context, or None.
        skip_first: leave position 0 out.
        seed: seed of the random baseline and of k-means.
        progress: called with 1 after each layer (a progress bar's ``update``).
    """

    def one_layer(layer: int) -> LayerDecomposition:
        groups = position_noise.group_positions(acc, layer, skip_first)
        stats = acc.finalize(layer, skip_first=skip_first)
        found = analyse_layer(stats, labels, seed, groups=groups)
        if progress is not None:
            progress(1)
        return found

    return map_layers(one_layer, acc.layers)
