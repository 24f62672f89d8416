"""Planted positional parts with sampling noise, to calibrate the position claims' guards.

A planted P [T', d] has a known rank and a known share of its energy in the low
frequencies over positions (it is built from DCT-II columns); each context adds noise,
and the contexts fall into G groups as the capture's ``DecompositionAccumulator(groups=G)``
keeps them. Only the groups' sums enter ``position_noise``, and the sum of n Gaussian
per-context noises is one Gaussian with n times their covariance, so the group sums are
drawn directly (exact, and no [C, T', d] array). The noise is independent over
positions and contexts; over the d coordinates it is anisotropic as hidden states are:
``ANISOTROPY`` of its energy lies in ``SPIKES`` directions, the rest is isotropic.

``calibrate`` draws many such corpora per noise share, computes each one's corrected
numbers and their half-sample intervals (``intervals.corrected_intervals``, the steps a
run takes), judges them with the claims themselves (``claims.position_claims`` on a
one-layer view), and reports per estimator the bias, the coverage of the 95% interval,
and how often a verdict contradicts the planted truth. ``benchmarks/planted_guards.py``
prints the table; docs/claims.md keeps it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from geomlens.analyses.common import spectra
from geomlens.analyses.decomposition import incoherence, intervals, position_noise

Array = npt.NDArray[np.float64]

ANISOTROPY = 0.5
"""Share of the per-context noise energy in the few strong directions."""

SPIKES = 4
"""Strong directions of the per-context noise."""


@dataclass(frozen=True)
class PlantedCorpus:
    """One planted corpus.

    Attributes:
        truth: [T', d] P, centred over positions, ||P||_F = 1.
        groups: the groups' positional estimates (``position_noise.from_sums``).
        ctx: [C, d] Gaussian context vectors (only the coherence reads them).
        rank: P's rank.
        low_freq_energy: ``spectra.low_freq_energy(P P^T)``, the planted share.
    """

    truth: Array
    groups: position_noise.GroupPositions
    ctx: Array
    rank: int
    low_freq_energy: float


def planted_positions(
    rng: np.random.Generator,
    length: int,
    d: int,
    rank: int,
    low_share: float,
    decay: float = 0.0,
) -> Array:
    """[length, d] P of rank ``rank`` with ``low_share`` of its energy in the lowest
    ``ceil(0.1 length)`` DCT frequencies: min(rank - 1, low - 1) low columns (the constant
    one left out, as pos is centred) share ``low_share`` of the energy equally, the other
    columns (random higher frequencies) share the rest; random orthonormal directions in
    R^d. ``low_share`` of 1 puts every column in the low band (rank <= low - 1).

    ``decay`` > 0 gives a decaying tail instead: the k-th column (low band first) holds
    energy in proportion to ``1 / k**decay`` (k = 1..rank), and ``low_share`` only picks how
    many columns lie in the low band (the planted low-frequency share is then whatever
    those columns hold; ``PlantedCorpus.low_freq_energy`` measures it)."""
    n_low = spectra.n_low_frequencies(length, 0.1)
    if low_share >= 1.0:
        low, high = list(range(1, rank + 1)), []
    else:
        n_in = max(1, min(rank - 1, n_low - 1))
        low = list(range(1, n_in + 1))
        high = sorted(rng.choice(np.arange(n_low, length), rank - n_in, replace=False))
    columns = np.asarray(low + list(high))
    energy = np.zeros(length)
    if decay > 0:
        falling = np.arange(1, rank + 1, dtype=np.float64) ** -decay
        energy[columns] = falling / falling.sum()
    else:
        energy[low] = (1.0 if not high else low_share) / len(low)
        if high:
            energy[high] = (1.0 - low_share) / len(high)
    basis = spectra.dct_basis(length)[:, columns] * np.sqrt(energy[columns])
    directions = np.linalg.qr(rng.standard_normal((d, rank)))[0]
    return np.asarray(basis @ directions.T)


def plant(
    seed: int,
    noise_share: float,
    rank: int = 8,
    low_share: float = 0.8,
    length: int = 64,
    d: int = 96,
    n_contexts: int = 128,
    groups: int = 16,
    anisotropy: float = ANISOTROPY,
    alignment: float | None = None,
    decay: float = 0.0,
) -> PlantedCorpus:
    """A planted P with per-context noise making ``noise_share`` of the pooled positional
    estimate's energy (in expectation), grouped as the accumulator groups contexts.
    ``decay``: the direction energies' tail (0: equal within each band; 1 and 2: falling as
    1/k and 1/k^2, ``planted_positions``).
    ``alignment``: None gives Gaussian context vectors; a number gives context vectors
    that share the noise's strong directions and lean that far into P's directions
    (``coherent_contexts``)."""
    rng = np.random.default_rng([seed, rank, length, d, 17])
    truth = planted_positions(rng, length, d, rank, low_share, decay)
    spikes = np.linalg.qr(rng.standard_normal((d, SPIKES)))[0]
    # per-context noise covariance over d (trace 1): sqrt of it, applied to white noise
    iso, spike = math.sqrt((1 - anisotropy) / d), math.sqrt(anisotropy / SPIKES)
    # pooled noise energy sigma^2 (T' - 1) / C is noise_share / (1 - noise_share) of ||P||^2
    sigma = math.sqrt(noise_share / (1 - noise_share) * n_contexts / (length - 1))
    sizes = np.full(groups, n_contexts // groups, dtype=np.float64)
    white = rng.standard_normal((groups, length, d))
    strong = rng.standard_normal((groups, length, SPIKES)) @ spikes.T
    noise = (iso * white + spike * strong) * sigma * np.sqrt(sizes)[:, None, None]
    sums = sizes[:, None, None] * truth + noise
    ctx = rng.standard_normal((n_contexts, d))
    if alignment is not None:
        ctx = coherent_contexts(rng, truth, n_contexts, spikes, alignment)
    return PlantedCorpus(
        truth=truth,
        groups=position_noise.from_sums(sums, sizes, skip_first=False),
        ctx=ctx,
        rank=rank,
        low_freq_energy=spectra.low_freq_energy(truth @ truth.T),
    )


def coherent_contexts(
    rng: np.random.Generator, truth: Array, n_contexts: int, spikes: Array, alignment: float
) -> Array:
    """[C, d] unit context vectors as a hidden state's are: half of the energy of their
    direction ``g`` in the noise's strong directions ``spikes`` [d, SPIKES] (so the noise
    shares them), then ``sqrt(1 - a^2) g + a u`` with u a random unit direction inside
    P's row space and a = ``alignment`` (0: no more coherent with P than chance allows)."""
    d = truth.shape[1]
    iso = rng.standard_normal((n_contexts, d)) * math.sqrt(0.5 / d)
    strong = rng.standard_normal((n_contexts, spikes.shape[1])) @ spikes.T
    g = iso + strong * math.sqrt(0.5 / spikes.shape[1])
    g /= np.linalg.norm(g, axis=1, keepdims=True)
    _, values, vt = np.linalg.svd(truth, full_matrices=False)
    inside = vt[: int(np.sum(values > values[0] * 1e-9))]
    u = rng.standard_normal((n_contexts, len(inside))) @ inside
    u /= np.linalg.norm(u, axis=1, keepdims=True)
    return np.asarray(math.sqrt(1 - alignment**2) * g + alignment * u)


def coherence_ratio(corpus: PlantedCorpus, n_draws: int) -> tuple[float, float, Any] | None:
    """(planted, estimated, [low, high]) mutual coherence of P and the context vectors as a
    multiple of the random level, the estimate noise-removed as a run computes it."""
    n_pos, d = corpus.truth.shape
    random = incoherence.random_coherence(n_pos, len(corpus.ctx), d, 0)[0]
    found, bounds = intervals.corrected_intervals(corpus.groups, corpus.ctx, n_draws)
    if found is None or not math.isfinite(found.coherence_max):
        return None
    truth = incoherence.abs_cosine_summary(corpus.truth, corpus.ctx)[0]
    low, high = bounds["coherence_max_corrected"]
    scaled = [None if x is None else x / random for x in (low, high)]
    return truth / random, found.coherence_max / random, scaled


def claim_metrics(
    corpus: PlantedCorpus,
    found: position_noise.CorrectedPositions,
    bounds: dict[str, list[Any]],
    n_draws: int,
) -> dict[str, Any]:
    """A one-layer metrics.json view of a planted corpus, as the claims read a run's."""
    n_pos, d = corpus.truth.shape
    c = len(corpus.ctx)
    row: dict[str, Any] = {
        "layer": 0,
        "skip_first": True,
        "n_contexts": corpus.groups.n_contexts,
        "n_positions": n_pos,
        "pos_rank_corrected": found.rank,
        "pos_eigen_floor": found.floor,
        "pos_rank_margin": found.margin,
        "coherence_random_max": incoherence.random_coherence(n_pos, c, d, 0)[0],
    }
    for key, field in intervals.CORRECTED_FIELDS.items():
        value = float(getattr(found, field))
        row[key] = value if math.isfinite(value) else None
    medians = {k: v for k, v in bounds.items() if v[0] is not None}
    view = {
        "skip_first": True,
        "layers": [row],
        "intervals": {
            "method": intervals.METHOD,
            "groups": corpus.groups.n_groups,
            "n_draws": n_draws,
            "not_resampled": {},
            "medians": medians,
        },
    }
    return {"decomposition": view}


@dataclass(frozen=True)
class Draw:
    """One planted corpus judged: the estimates, the intervals and the verdicts."""

    share: float
    rank: int
    rank_truth: int
    rank95: float
    stable_rank: float
    low_freq: float
    low_freq_truth: float
    low_freq_interval: tuple[float | None, float | None]
    stable_interval: tuple[float | None, float | None]
    verdicts: dict[str, str]


def judge_corpus(corpus: PlantedCorpus, n_draws: int = intervals.N_DRAWS) -> Draw | None:
    """``corpus``'s corrected numbers, intervals and claim verdicts (None: undefined)."""
    from geomlens.analyses.decomposition import claims  # the claims import the schema

    found, bounds = intervals.corrected_intervals(corpus.groups, corpus.ctx, n_draws)
    if found is None:
        return None
    metrics = claim_metrics(corpus, found, bounds, n_draws)
    verdicts = {c.id: c.verdict for c in claims.position_claims(metrics, {})}
    lf = bounds["pos_low_freq_energy_corrected"]
    sr = bounds["pos_stable_rank_corrected"]
    return Draw(
        share=found.noise_share,
        rank=found.rank,
        rank_truth=corpus.rank,
        rank95=float(found.rank95),
        stable_rank=found.stable_rank,
        low_freq=found.low_freq_energy,
        low_freq_truth=corpus.low_freq_energy,
        low_freq_interval=(lf[0], lf[1]),
        stable_interval=(sr[0], sr[1]),
        verdicts=verdicts,
    )


def wrong(verdict: str, truth_holds: bool) -> bool:
    """A decided verdict that contradicts the planted truth."""
    return verdict == ("not reproduced" if truth_holds else "reproduced")


def covered(interval: tuple[float | None, float | None], truth: float) -> bool | None:
    """Whether the interval holds ``truth`` (None without an interval)."""
    low, high = interval
    if low is None or high is None:
        return None
    return low <= truth <= high


def summarise(draws: list[Draw], low_threshold: float, rank_threshold: int) -> dict[str, Any]:
    """Bias, coverage and verdict error and inconclusive rates of a list of draws of one
    planted setting (one truth, one noise share)."""
    lf_truth, r_truth = draws[0].low_freq_truth, draws[0].rank_truth
    hits = [covered(d.low_freq_interval, lf_truth) for d in draws]
    counted = [h for h in hits if h is not None]
    lf_verdicts = [d.verdicts["song.pos_low_frequency"] for d in draws]
    rank_verdicts = [d.verdicts["song.pos_low_rank"] for d in draws]
    n = len(draws)
    return {
        "share": float(np.mean([d.share for d in draws])),
        "low_freq_truth": lf_truth,
        "low_freq_bias": float(np.mean([d.low_freq for d in draws])) - lf_truth,
        "low_freq_coverage": float(np.mean(counted)) if counted else math.nan,
        "low_freq_wrong": sum(wrong(v, lf_truth >= low_threshold) for v in lf_verdicts) / n,
        "low_freq_inconclusive": sum(v == "inconclusive" for v in lf_verdicts) / n,
        "rank_truth": r_truth,
        "rank_bias": float(np.mean([d.rank for d in draws])) - r_truth,
        "rank95_mean": float(np.mean([d.rank95 for d in draws])),
        "stable_rank_min": float(
            min(min(d.stable_rank, d.stable_interval[0] or math.inf) for d in draws)
        ),
        "rank_wrong": sum(wrong(v, r_truth <= rank_threshold) for v in rank_verdicts) / n,
        "rank_inconclusive": sum(v == "inconclusive" for v in rank_verdicts) / n,
        "draws": n,
    }


TAILS = {"flat": 0.0, "1/k": 1.0, "1/k^2": 2.0}
"""The direction energies' tails the rank claim is calibrated on (``planted_positions``'s
``decay``): equal within each band, and falling as 1/k and 1/k^2."""


@dataclass(frozen=True)
class RankDraw:
    """One planted corpus's rank count and the rank claim's verdict, with and without the
    guard that asks the spectrum to end above the floor (``claims.RANK_MARGIN``)."""

    rank: int
    rank_truth: int
    floor: float | None
    margin: float | None
    verdict: str
    verdict_without_gap: str


def rank_draw(corpus: PlantedCorpus) -> RankDraw | None:
    """The rank claim on ``corpus`` (no intervals: the count has none), judged twice: as a
    run judges it, and with ``pos_rank_margin`` left out (the guards before the gap's)."""
    from geomlens.analyses.decomposition import claims  # the claims import the schema

    found = position_noise.corrected(corpus.groups, corpus.ctx, baseline=False)
    if found is None:
        return None
    metrics = claim_metrics(corpus, found, {}, 0)
    verdicts = []
    for keep in (True, False):
        if not keep:
            metrics["decomposition"]["layers"][0]["pos_rank_margin"] = None
        by_id = {c.id: c.verdict for c in claims.position_claims(metrics, {})}
        verdicts.append(by_id["song.pos_low_rank"])
    return RankDraw(
        rank=found.rank,
        rank_truth=corpus.rank,
        floor=found.floor,
        margin=found.margin,
        verdict=verdicts[0],
        verdict_without_gap=verdicts[1],
    )
