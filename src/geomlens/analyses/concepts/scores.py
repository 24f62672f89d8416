"""Accuracy, accuracy normalised by the model's own baseline, and bootstrap intervals.

For n items with 0/1 correctness c_i, accuracy is mean(c). A scheme's normalised score
is its accuracy over the baseline's accuracy on the same items, acc_scheme / acc_base
(1 = as good as reading the text itself). The 95% interval resamples the items with
replacement (the same draw for scheme and baseline, so a ratio keeps its pairing) and
takes the 2.5th and 97.5th percentiles of the statistic over the draws.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from geomlens.stats.intervals import N_BOOT, percentiles, resamples
from geomlens.stats.rounding import rounded

DIGITS = 12


def rnd(x: float | None) -> float | None:
    """Round for metrics.json (deterministic text); None stays None."""
    return None if x is None else rounded(float(x), DIGITS)


def accuracy_ci(
    correct: Sequence[float] | npt.NDArray[Any], seed: int = 0, n_boot: int = N_BOOT
) -> tuple[float, float, float]:
    """Accuracy and its 95% bootstrap interval (lo, hi)."""
    c = np.asarray(correct, dtype=np.float64)
    if c.size == 0:
        return float("nan"), float("nan"), float("nan")
    draws = c[resamples(c.size, seed, n_boot)].mean(axis=1)
    lo, hi = percentiles(draws)
    return float(c.mean()), lo, hi


def ratio_ci(
    correct: Sequence[float] | npt.NDArray[Any],
    base: Sequence[float] | npt.NDArray[Any],
    seed: int = 0,
    n_boot: int = N_BOOT,
) -> tuple[float | None, float | None, float | None]:
    """mean(correct) / mean(base) and its paired 95% bootstrap interval (None if base is 0)."""
    c = np.asarray(correct, dtype=np.float64)
    b = np.asarray(base, dtype=np.float64)
    if c.size == 0 or b.mean() == 0:
        return None, None, None
    idx = resamples(c.size, seed, n_boot)
    num, den = c[idx].mean(axis=1), b[idx].mean(axis=1)
    ok = den > 0
    ratios = num[ok] / den[ok]
    lo, hi = percentiles(ratios)
    return float(c.mean() / b.mean()), lo, hi


def summary(
    correct: Sequence[float] | npt.NDArray[Any],
    baseline: dict[str, npt.NDArray[Any]],
    seed: int = 0,
) -> dict[str, Any]:
    """A scheme's accuracy and normalised scores against baseline acc and acc_norm.

    Args:
        correct: 0/1 per item for the scheme.
        baseline: 0/1 per item of the baseline under "acc" and "acc_norm".
        seed: bootstrap seed.
    """
    acc, lo, hi = accuracy_ci(correct, seed)
    out: dict[str, Any] = {"acc": rnd(acc), "acc_ci": [rnd(lo), rnd(hi)]}
    for name in ("acc", "acc_norm"):
        r, rlo, rhi = ratio_ci(correct, baseline[name], seed)
        out[f"normalised_vs_{name}"] = rnd(r)
        out[f"normalised_vs_{name}_ci"] = [rnd(rlo), rnd(rhi)]
    return out
