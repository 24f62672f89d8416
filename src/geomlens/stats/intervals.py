"""95% intervals for headline numbers: seeded bootstrap resamples and the Wilson interval.

Every interval a run writes is a record ``{"value", "low", "high", "method", "n"}`` (plus
``"n_boot"`` for a bootstrap), so a reader and the claims can tell a small number from
noise. Resamples come from a generator seeded by the run's seed and the sample size: the
same run gives the same bytes.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import numpy.typing as npt

from geomlens.stats.rounding import sig

N_BOOT = 1000
Z95 = 1.959963984540054  # the standard normal's 97.5th percentile


def resamples(n: int, seed: int, n_boot: int = N_BOOT) -> npt.NDArray[np.int64]:
    """[n_boot, n] indices drawn with replacement from a generator seeded by (seed, n)."""
    return np.random.default_rng([seed, n]).integers(0, n, size=(n_boot, n))


def percentiles(draws: npt.NDArray[Any]) -> tuple[float, float]:
    """The 2.5th and 97.5th percentiles of bootstrap draws (NaN when there are none)."""
    if draws.size == 0:
        return float("nan"), float("nan")
    lo, hi = np.percentile(draws, [2.5, 97.5])
    return float(lo), float(hi)


def interval(value: float, low: float, high: float, method: str, n: int, **extra: Any) -> dict:
    """One interval record, rounded to 8 significant digits for metrics.json."""
    return {
        "value": sig(value),
        "low": sig(low),
        "high": sig(high),
        "method": method,
        "n": int(n),
        **extra,
    }


def mean_difference(
    a: npt.NDArray[Any], b: npt.NDArray[Any], seed: int, n_boot: int = N_BOOT
) -> dict[str, Any]:
    """mean(a) - mean(b) with a 95% bootstrap interval, each sample resampled on its own."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    draws = a[resamples(a.size, seed, n_boot)].mean(1) - b[
        resamples(b.size, seed + 1, n_boot)
    ].mean(1)
    lo, hi = percentiles(draws)
    return interval(
        a.mean() - b.mean(), lo, hi, "bootstrap, each list resampled", a.size, n_boot=n_boot
    )


def wilson(successes: int, n: int) -> dict[str, Any]:
    """A proportion and its 95% Wilson score interval (better than the normal one near 0 or 1)."""
    if n <= 0:
        raise ValueError("a proportion needs at least one trial")
    p = successes / n
    z2 = Z95 * Z95
    centre = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = Z95 * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / (1 + z2 / n)
    return interval(p, max(0.0, centre - half), min(1.0, centre + half), "Wilson score", n)
