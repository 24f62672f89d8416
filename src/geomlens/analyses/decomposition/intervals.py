"""95% intervals over contexts for the per-layer position/context numbers.

The contexts fall into G contiguous groups (``DecompositionAccumulator(groups=G)``), each
with its own positional sums. A draw keeps a random half of the groups, redoes the
decomposition of their contexts exactly from those sums (``resample``) and recomputes
every number with ``analyse_layer``. The spread of the draws gives the standard error of
the whole-corpus number: the delete-d jackknife of Shao & Wu (1989) with d = G/2,
``se^2 = (G - d) / (d N) sum_s (x_s - mean)^2`` over N draws. The interval is the number
+- t se, t Student's 97.5th percentile with G - 1 degrees of freedom, cut to the range
the number can take.

Half-samples rather than a bootstrap: a bootstrap repeats contexts, which adds noise to
the positional means and moves every draw's share upward (at 16 contexts the whole-corpus
share fell below the bootstrap's interval); the half-samples' spread is centred on the
number itself. Resampling whole groups of neighbouring windows keeps windows that share a
document together. The medians over layers that the papers' claims read get their own
intervals, from the median of each draw.

The relative norms need each draw's top eigenvalue of ``sum h h^T``. The groups keep a
sketch ``(sum h h^T) @ Omega`` of it (r columns), not the d x d matrix, so a draw's
eigenvalue is a Nystrom estimate; each draw's relative norm is scaled by the whole
corpus's exact number over its estimate from the summed sketches, which takes out the
estimate's common bias.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

import numpy as np

from geomlens.analyses.common.layer_threads import map_layers
from geomlens.analyses.decomposition import position_noise
from geomlens.analyses.decomposition.compute import Labels, analyse_layer, relative_norms
from geomlens.stats.decomposition import DecompositionAccumulator
from geomlens.stats.rounding import sig

N_DRAWS = 30
"""Half-samples of the context groups (each redoes every layer's analysis)."""

CORRECTED = (
    "pos_noise_share",
    "pos_low_freq_energy_corrected",
    "pos_rank95_corrected",
    "pos_stable_rank_corrected",
    "pos_low_freq_corrected",
    "pos_smoothness_corrected",
    "coherence_max_corrected",
    "coherence_mean_corrected",
    "incoherence_mean_corrected",
)
"""The noise-corrected numbers that get an interval (each draw projects onto the whole
corpus's r directions; the noise floors are not resampled)."""

RESAMPLED = (
    "share_pos",
    "share_ctx",
    "share_resid",
    "pos_rank",
    "pos_explained",
    "pos_rank95",
    "pos_stable_rank",
    "pos_low_freq",
    "pos_low_freq_energy",
    "pos_smoothness",
    "coherence_max",
    "coherence_mean",
    "ctx_cos_within",
    "ctx_cos_between",
    "ctx_cluster_ari",
    "incoherence_mean",
    "rel_norm_pos",
    "rel_norm_pos_centred",
    *CORRECTED,
)
"""The per-layer numbers that get an interval."""

SKETCHED = ("rel_norm_pos", "rel_norm_pos_centred")
"""The numbers a draw estimates from the groups' sketches of the second moments."""

UNIT = (0.0, 1.0)
BOUNDS = {
    **{key: UNIT for key in ("share_pos", "share_ctx", "share_resid", "pos_explained")},
    **{key: UNIT for key in ("pos_low_freq", "coherence_max", "coherence_mean")},
    "incoherence_mean": UNIT,
    **{key: UNIT for key in ("pos_noise_share", "pos_low_freq_corrected")},
    **{key: UNIT for key in ("pos_low_freq_energy", "pos_low_freq_energy_corrected")},
    **{key: UNIT for key in ("coherence_max_corrected", "coherence_mean_corrected")},
    "incoherence_mean_corrected": UNIT,
    # K+'s spectrum (position_noise): a 95% rank and a stable rank of at least 1
    "pos_rank95_corrected": (1.0, float("inf")),
    "pos_stable_rank_corrected": (1.0, float("inf")),
    "pos_smoothness_corrected": (0.0, float("inf")),
    **{key: UNIT for key in ("ctx_cos_within", "ctx_cos_between")},
    "ctx_cluster_ari": (-1.0, 1.0),
    "pos_rank": (0.0, float("inf")),
    "pos_rank95": (0.0, float("inf")),
    "pos_stable_rank": (1.0, float("inf")),
    "pos_smoothness": (0.0, float("inf")),
    **{key: (0.0, float("inf")) for key in SKETCHED},
}
"""The range each number can take: an interval is cut to it."""

NO_SKETCH = (
    "the capture kept no sketch of each group's second moments (captured without second "
    "moments, too large for the sketches' memory budget, or saved before they existed)"
)
"""Why the relative norms have no interval in a run without sketches."""

METHOD = (
    "delete-half jackknife over G contiguous groups of contexts (each draw keeps G // 2 "
    "groups, the decomposition redone from their sums): number +- t(G - 1) standard errors"
)


LEVEL = 0.95
"""The intervals' coverage, unless a run sets another (``interval_level``)."""

_level: ContextVar[float] = ContextVar("geomlens_interval_level", default=LEVEL)


@contextmanager
def interval_level(level: float) -> Iterator[None]:
    """Inside, the intervals over contexts are at ``level`` (``--contexts auto`` spends
    its error over several looks: ``analyses.decomposition.sequential``)."""
    token = _level.set(level)
    try:
        yield
    finally:
        _level.reset(token)


def current_level() -> float:
    """The intervals' coverage in force (``interval_level``'s, default 95%)."""
    return _level.get()


def group_draws(groups: int, n_draws: int, seed: int) -> np.ndarray:
    """[n_draws, groups] 1 for the groups a draw keeps (a random half), else 0."""
    rng = np.random.default_rng([seed, groups, 7])
    keep = np.zeros((n_draws, groups), dtype=np.int64)
    for row in keep:
        row[rng.choice(groups, groups // 2, replace=False)] = 1
    return keep


def sketch_corrections(
    acc: DecompositionAccumulator, whole: list[dict[str, Any]]
) -> dict[int, dict[str, float]]:
    """layer -> {relative norm: the whole corpus's exact number over its estimate from
    the summed sketches}; each draw's estimate is multiplied by it. Empty without
    sketches."""
    if acc.group_sketch is None:
        return {}
    everything = np.ones(acc.groups)
    out = {}
    for layer, full in zip(acc.layers, whole, strict=True):
        stats, _ = acc.resample(layer, everything, bool(full["skip_first"]))
        estimates = dict(zip(SKETCHED, relative_norms(stats), strict=True))
        out[layer] = {
            key: full[key] / estimates[key]
            for key in SKETCHED
            if isinstance(full.get(key), (int, float)) and (estimates[key] or 0) > 0
        }
    return out


def _layer_draws(
    acc: DecompositionAccumulator,
    layer: int,
    draws: np.ndarray,
    labels: Labels | None,
    full: dict[str, Any],
    seed: int,
    corrections: dict[str, float],
    reused: tuple[Any, list[dict[str, float]]] | None = None,
) -> list[dict[str, float]]:
    """Every resampled number of one layer, one dict per draw (``full``: the whole-corpus
    row of the layer; ``reused``: (r, each draw's noise-corrected numbers) a look of the
    same accumulator drew, taken as they are when its r is the whole corpus's here).

    The principal-angle incoherence compares subspaces of the whole corpus's dimension;
    a draw whose contexts span fewer dimensions leaves it out (undefined there). The
    relative norms are sketch estimates times ``corrections`` (absent without one). The
    noise-corrected numbers project onto the whole corpus's r directions."""
    skip = bool(full["skip_first"])
    rank = full.get("pos_rank_corrected")  # the whole corpus's r; none: nothing to redo
    known = None
    if reused is not None and reused[0] == rank and len(reused[1]) == len(draws):
        known = reused[1]  # the look's draws: the same groups, contexts and r
    groups = (
        None
        if rank is None or known is not None
        else position_noise.group_positions(acc, layer, skip)
    )
    k = full.get("incoherence_k")
    out = []
    resample = acc.resampler(layer, skip)
    for i, weights in enumerate(draws):
        stats, rows = resample(weights)
        drawn = None if labels is None else [labels[r] for r in rows]
        row = analyse_layer(
            stats,
            drawn,
            seed,
            baseline=False,
            incoherence_k=k,
            groups=None if groups is None else groups.subset(np.asarray(weights) > 0),
            noise_rank=rank,
        ).to_dict()
        if known is not None:
            row.update(dict.fromkeys(CORRECTED), **known[i])
        if row.get("incoherence_k") != k:
            row["incoherence_mean"] = None
        for key in SKETCHED:
            factor = corrections.get(key)
            row[key] = None if factor is None or row.get(key) is None else row[key] * factor
        out.append(
            {
                key: row[key]
                for key in RESAMPLED
                if isinstance(row.get(key), (int, float)) and np.isfinite(row[key])
            }
        )
    return out


def half_sample_interval(
    value: float | None,
    draws: list[float | None],
    groups: int,
    bounds: tuple[float, float] = (-np.inf, np.inf),
    level: float | None = None,
) -> list[Any]:
    """[low, high] = value +- t se, cut to ``bounds``: se from the half-sample draws
    (delete-d jackknife, d = groups - groups // 2), t the (1 + level) / 2 quantile of
    Student's t with groups - 1 degrees of freedom (the groups are the independent units;
    ``level`` None: ``current_level()``, 95% unless a run set another).
    [None, None] when the number is undefined in most draws."""
    finite = np.asarray([v for v in draws if v is not None and np.isfinite(v)], np.float64)
    if value is None or not np.isfinite(value) or finite.size < max(2, len(draws) / 2):
        return [None, None]
    deleted = groups - groups // 2
    se = float(np.sqrt((groups - deleted) / deleted * finite.var()))
    import scipy.stats  # on first use: 0.5 s to import

    level = current_level() if level is None else level
    quantile = float(scipy.stats.t.ppf((1 + level) / 2, groups - 1))
    low, high = max(bounds[0], value - quantile * se), min(bounds[1], value + quantile * se)
    return [sig(low), sig(high)]


CORRECTED_FIELDS = {
    "pos_noise_share": "noise_share",
    "pos_low_freq_energy_corrected": "low_freq_energy",
    "pos_rank95_corrected": "rank95",
    "pos_stable_rank_corrected": "stable_rank",
    "pos_low_freq_corrected": "low_freq",
    "pos_smoothness_corrected": "smoothness",
    "coherence_max_corrected": "coherence_max",
    "coherence_mean_corrected": "coherence_mean",
    "incoherence_mean_corrected": "incoherence_mean",
}
"""The key of each noise-corrected number in a layer row -> its field of
``position_noise.CorrectedPositions``."""


def corrected_intervals(
    groups: position_noise.GroupPositions,
    ctx: np.ndarray,
    n_draws: int = N_DRAWS,
    seed: int = 0,
) -> tuple[position_noise.CorrectedPositions | None, dict[str, list[Any]]]:
    """One layer's noise-corrected numbers and their half-sample intervals from its groups
    alone, by the same steps as ``decomposition_intervals`` (the same draws of groups, r
    kept at the whole corpus's, the same ``half_sample_interval``) without the rest of
    the decomposition: what the planted calibration of the guards
    (``analyses.decomposition.planted``) resamples. ``ctx`` [C, d] stays whole.

    Returns:
        (the whole corpus's numbers, {row key: [low, high]}); (None, {}) when undefined.
    """
    _, values, vt = np.linalg.svd(ctx, full_matrices=False)
    whole = position_noise.corrected(groups, ctx, seed, baseline=False, ctx_svd=(values, vt))
    if whole is None:
        return None, {}
    draws = group_draws(groups.n_groups, n_draws, seed)
    found = [
        position_noise.corrected(
            groups.subset(np.asarray(w) > 0),
            ctx,
            seed,
            rank=whole.rank,
            baseline=False,
            ctx_svd=(values, vt),
        )
        for w in draws
    ]
    out = {}
    for key, field in CORRECTED_FIELDS.items():
        drawn = [None if f is None else float(getattr(f, field)) for f in found]
        out[key] = half_sample_interval(
            float(getattr(whole, field)), drawn, groups.n_groups, BOUNDS[key]
        )
    return whole, out


def median_intervals(
    acc: DecompositionAccumulator,
    rows: list[dict[str, Any]],
    per_draw: list[dict[int, dict[str, float]]],
) -> tuple[dict[str, list[Any]], dict[str, str]]:
    """Intervals of each number's median over layers, and why a number has none."""
    medians: dict[str, list[Any]] = {}
    not_resampled = {} if acc.group_sketch is not None else dict.fromkeys(SKETCHED, NO_SKETCH)
    for key in RESAMPLED:
        whole = [r[key] for r in rows if isinstance(r.get(key), (int, float))]
        drawn = [[d[layer][key] for layer in acc.layers if key in d[layer]] for d in per_draw]
        if not whole:
            continue
        # a draw's median counts only when it has every layer the whole corpus has
        found = half_sample_interval(
            statistics.median(whole),
            [statistics.median(v) if len(v) == len(whole) else None for v in drawn],
            acc.groups,
            BOUNDS[key],
        )
        if found[0] is not None:
            medians[key] = found
        elif key == "incoherence_mean":
            k = max(int(r.get("incoherence_k") or 0) for r in rows)
            not_resampled[key] = (
                f"the median over layers is undefined in most draws: at the whole corpus's k "
                f"(up to {k}) half of the contexts span fewer dimensions in some layers "
                "(each layer keeps its interval where it is defined)"
            )
    return medians, not_resampled


def decomposition_intervals(
    acc: DecompositionAccumulator,
    rows: list[dict[str, Any]],
    labels: Labels | None = None,
    n_draws: int = N_DRAWS,
    seed: int = 0,
    progress: Callable[[int], object] | None = None,
    reused: dict[int, Any] | None = None,
) -> dict[str, Any]:
    """Intervals of every layer's numbers and of their medians over layers.

    Args:
        acc: the accumulator, with interval groups.
        rows: the whole-corpus per-layer rows (``LayerDecomposition.to_dict()``) of one
            view, in ``acc.layers`` order; their ``skip_first`` picks the view.
        labels: [C] the contexts' labels, or None.
        n_draws: half-samples drawn.
        seed: seed of the draws and of every analysis.
        progress: called with 1 after each layer's draws (a progress bar's ``update``).
        reused: {layer: (r, each draw's noise-corrected numbers)} that a look of
            ``--contexts auto`` drew on this accumulator with this seed
            (``sequential.reused_draws``): not drawn again where r is the same.

    Returns:
        {"method", "groups", "n_draws", "seed", "sketch_rank" (columns of the groups'
         second-moment sketches, or None), "not_resampled": {key: why},
         "layers": {layer: {key: [low, high]}}, "medians": {key: [low, high]}}, or
        {"method": None, "why": ...} when the accumulator keeps no groups.
    """
    if not acc.groups:
        return {
            "method": None,
            "why": "no interval groups were kept (fewer than 8 fit: too few contexts, or "
            "positional sums too large for the memory budget)",
        }
    corrections = sketch_corrections(acc, rows)
    draws = group_draws(acc.groups, n_draws, seed)
    per_draw: list[dict[int, dict[str, float]]] = [{} for _ in draws]

    def one_layer(layer_row: tuple[int, dict[str, Any]]) -> list[dict[str, float]]:
        layer, row = layer_row
        again = (reused or {}).get(layer)
        of_layer = _layer_draws(
            acc, layer, draws, labels, row, seed, corrections.get(layer, {}), again
        )
        if progress is not None:
            progress(1)
        return of_layer

    found = map_layers(one_layer, zip(acc.layers, rows, strict=True))
    for layer, of_layer in zip(acc.layers, found, strict=True):
        for numbers, one in zip(per_draw, of_layer, strict=True):
            numbers[layer] = one
    layers = {}
    for layer, row in zip(acc.layers, rows, strict=True):
        layers[str(layer)] = {
            key: half_sample_interval(
                row.get(key), [d[layer].get(key) for d in per_draw], acc.groups, BOUNDS[key]
            )
            for key in RESAMPLED
            if isinstance(row.get(key), (int, float))
        }
    medians, not_resampled = median_intervals(acc, rows, per_draw)
    return {
        "method": METHOD,
        "groups": acc.groups,
        "n_draws": n_draws,
        "seed": seed,
        "sketch_rank": None if acc.group_sketch is None else int(acc.group_sketch.shape[-1]),
        "not_resampled": not_resampled,
        "layers": layers,
        "medians": medians,
        # recorded where a run set another coverage (--contexts auto's looks)
        **({"level": current_level()} if current_level() != LEVEL else {}),
    }
