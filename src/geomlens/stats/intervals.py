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
    """A proportion and its 95% Wilson score interval (better than the normal one near 0 or 1).

    Unlike the normal interval, it stays inside [0, 1] and is not empty at 0 successes:

    >>> w = wilson(0, 20)
    >>> w["value"], w["low"], round(w["high"], 3)
    (0.0, 0.0, 0.161)
    """
    if n <= 0:
        raise ValueError("a proportion needs at least one trial")
    p = successes / n
    z2 = Z95 * Z95
    centre = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = Z95 * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / (1 + z2 / n)
    return interval(p, max(0.0, centre - half), min(1.0, centre + half), "Wilson score", n)


def block_bootstrap_mean(
    x: npt.NDArray[Any], seed: int, n_boot: int = N_BOOT, block: int | None = None
) -> dict[str, Any]:
    """The mean of a series x [n] with serial dependence and its 95% percentile interval.

    Neighbouring values (the positions of one text) are not independent, so resampling
    single values (or the Wilson interval) is too narrow. The circular block bootstrap
    (Politis & Romano, 1992) keeps the dependence within a block: each draw joins
    ceil(n / block) runs of ``block`` consecutive values, from uniformly drawn starts,
    wrapping past the end, cut to n values. ``block`` defaults to round(sqrt(n)). Draws come
    from a generator seeded by (seed, n, block). An empty series gives NaN.
    """
    x = np.asarray(x, dtype=np.float64)
    if x.ndim != 1:
        raise ValueError(f"a series needs one dimension, not shape {x.shape}")
    n = x.size
    if block is None:
        block = max(1, round(math.sqrt(n)))
    if block < 1:
        raise ValueError(f"a block needs at least one value, not {block}")
    block = min(int(block), max(n, 1))
    method = f"circular block bootstrap over positions (blocks of {block} neighbouring positions)"
    if n == 0:
        nan = float("nan")
        return interval(nan, nan, nan, method, 0, block=block, n_boot=n_boot)
    rng = np.random.default_rng([seed, n, block])
    starts = rng.integers(0, n, size=(n_boot, -(-n // block)))  # [n_boot, ceil(n / block)]
    idx = (starts[:, :, None] + np.arange(block)).reshape(n_boot, -1)[:, :n] % n
    lo, hi = percentiles(x[idx].mean(1))
    return interval(x.mean(), lo, hi, method, n, block=block, n_boot=n_boot)
