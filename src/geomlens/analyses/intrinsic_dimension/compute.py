"""The intrinsic-dimension profile over depth, from the windows' mean-pooled hidden states
the decomposition already sums (``DecompositionAccumulator.ctx_sum``, one row per window and
layer): no state of its own in the capture.

Each window is one point per layer: the mean of its hidden states over positions 1..T-1.
Position 0 is left out because a model with an attention sink there (SmolLM2) carries a
massive activation on it, about 2.4e4 against a few hundred elsewhere, which would set every
window's mean apart by its first token alone. The last token's state is not summed by the
capture, so it would need state of its own; the profile is the mean-pooled one.

The phase rule (Cheng et al. 2025): the largest TwoNN dimension over the middle third of
depth (relative depth in [1/3, 2/3]) minus the larger of the mean dimensions of the first
and last sixth (relative depth <= 1/6 and >= 5/6). Above 0, with its 95% interval above 0,
the middle holds a higher-dimensional phase than both ends. The interval comes from one
bootstrap over windows shared by every layer (each draw resamples the same windows'
ratios at every layer), so the difference's interval holds the layers' dependence.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from geomlens.analyses.intrinsic_dimension.estimators import (
    GrideScale,
    gride,
    neighbour_distances,
    ratios,
    twonn_draws,
    twonn_fit,
)
from geomlens.stats import DecompositionAccumulator
from geomlens.stats.intervals import N_BOOT, percentiles, resamples

MIN_WINDOWS = 100
"""Windows the profile's claim needs: on a planted 5-dimensional Gaussian in 64 dimensions,
TwoNN's spread over 20 samples is 0.84 at 64 points and 0.77 at 128 (15% of the dimension),
0.46 at 256; under about 100 points an ID profile over layers is mostly that spread."""

MIDDLE = (1 / 3, 2 / 3)
"""The relative depths of the middle third (Cheng et al.'s phase sits there)."""

ENDS = (1 / 6, 5 / 6)
"""Relative depth at or under the first, at or over the second: the two ends compared."""


def pooled(acc: DecompositionAccumulator, layer: int) -> npt.NDArray[np.float64]:
    """[C, d] each window's mean hidden state at ``layer`` over positions 1..T-1."""
    i = acc.layer_index(layer)
    total = (acc.ctx_sum[i] - acc.first[i]).cpu().numpy()
    return total / max(acc.length - 1, 1)


@dataclass(frozen=True)
class Profile:
    """TwoNN (with intervals) and GRIDE of the windows at each layer.

    Attributes:
        layers: the layers (0 = embedding output); depth: each one's relative depth.
        twonn: [L] TwoNN dimension; low, high: its 95% bootstrap interval.
        draws: [n_boot, L] TwoNN on each bootstrap draw (the same windows at every layer).
        gride: per layer, GRIDE at each scale.
        n_windows: windows read (points per layer).
    """

    layers: list[int]
    depth: npt.NDArray[np.float64]
    twonn: npt.NDArray[np.float64]
    low: npt.NDArray[np.float64]
    high: npt.NDArray[np.float64]
    draws: npt.NDArray[np.float64]
    gride: list[list[GrideScale]]
    n_windows: int


def profile(
    points: Mapping[int, npt.NDArray[np.floating]],
    n_layers: int,
    seed: int,
    n_boot: int = N_BOOT,
) -> Profile:
    """TwoNN and GRIDE of each layer's points [n, d] (the same n windows at every layer).

    Args:
        points: layer -> [n, d] one point per window.
        n_layers: the model's blocks (relative depth = layer / n_layers).
        seed: the run's seed (the bootstrap's draws).
    """
    layers = sorted(points)
    n = len(points[layers[0]])
    draws_idx = resamples(n, seed, n_boot)
    estimates, draws, grides = [], [], []
    for layer in layers:
        mu = ratios(neighbour_distances(points[layer], 2))
        estimates.append(twonn_fit(mu))
        draws.append(twonn_draws(mu, draws_idx))
        grides.append(gride(points[layer]))
    boot = np.stack(draws, 1)  # [n_boot, L]
    bounds = np.array(
        [percentiles(boot[:, j][np.isfinite(boot[:, j])]) for j in range(len(layers))]
    )
    return Profile(
        layers=layers,
        depth=np.array(layers, dtype=np.float64) / max(n_layers, 1),
        twonn=np.array(estimates),
        low=bounds[:, 0],
        high=bounds[:, 1],
        draws=boot,
        gride=grides,
        n_windows=n,
    )


@dataclass(frozen=True)
class Phase:
    """Cheng et al.'s phase read from a profile (see the module's docstring).

    Attributes:
        number: middle peak minus the larger end's mean (None: a region holds no layer).
        low, high: its 95% interval.
        peak_layer: the middle third's layer of largest TwoNN dimension; peak: that dimension.
        early, late: the mean TwoNN dimension of the first and of the last sixth of depth.
    """

    number: float | None
    low: float | None = None
    high: float | None = None
    peak_layer: int | None = None
    peak: float | None = None
    early: float | None = None
    late: float | None = None


def _excess(
    values: npt.NDArray[np.float64], mid: np.ndarray, early: np.ndarray, late: np.ndarray
) -> npt.NDArray[np.float64]:
    """values [..., L] -> [...]: max over the middle minus the larger end mean."""
    ends = np.maximum(values[..., early].mean(-1), values[..., late].mean(-1))
    return values[..., mid].max(-1) - ends


def phase(found: Profile) -> Phase:
    """The middle-phase number of ``found`` with its interval from the same draws."""
    d = found.depth
    mid = (d >= MIDDLE[0] - 1e-9) & (d <= MIDDLE[1] + 1e-9)
    early, late = d <= ENDS[0] + 1e-9, d >= ENDS[1] - 1e-9
    if not (mid.any() and early.any() and late.any()):
        return Phase(None)
    number = float(_excess(found.twonn, mid, early, late))
    kept = found.draws[np.isfinite(found.draws).all(1)]
    low, high = percentiles(_excess(kept, mid, early, late)) if len(kept) else (None, None)
    at = int(np.flatnonzero(mid)[int(np.argmax(found.twonn[mid]))])
    return Phase(
        number,
        low,
        high,
        peak_layer=found.layers[at],
        peak=float(found.twonn[at]),
        early=float(found.twonn[early].mean()),
        late=float(found.twonn[late].mean()),
    )
