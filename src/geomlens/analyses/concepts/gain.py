"""Whether a task lets the model use its context, and how much of that a scheme keeps.

A concept scheme replaces the context by vectors. Its accuracy alone cannot say whether
those vectors carry the text: on a task where the model scores the same with and without
its context (SmolLM2 on timedial), every scheme keeps "all" of the baseline by reading
nothing. Two numbers answer it, both paired over the same items:

- the context test: the model's own baseline against its no-context control (the choices
  scored alone), an exact two-sided McNemar test on the items the two score differently.
  Only a task where the baseline is above the control at ``ALPHA`` can decide a concept
  claim;
- the retained context gain of a scheme, (scheme - no context) / (baseline - no context)
  in accuracy: 1 keeps all the context adds, 0 keeps nothing of it (the scheme reads as
  little as the choices alone), below 0 is worse than reading nothing. Its 95% interval
  resamples the items with one draw for the three scorings (a paired bootstrap).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from geomlens.stats.intervals import N_BOOT, percentiles, resamples

ALPHA = 0.05
"""The level of the context test: the baseline must beat the no-context control at it."""

Correct = Sequence[bool] | Sequence[float] | npt.NDArray[Any]
"""[n] 0/1 correctness per item."""


@dataclass(frozen=True)
class ContextTest:
    """The baseline against the no-context control, paired over items.

    Attributes:
        n: items.
        baseline_only: items the baseline answers right and the control wrong.
        no_context_only: items the control answers right and the baseline wrong.
        p: exact two-sided McNemar p-value (a binomial test of ``baseline_only`` among
            the discordant items at one half); 1.0 with no discordant item.
        alpha: the level the test is read at.
        qualifies: the baseline is above the control (``baseline_only`` larger) and
            ``p < alpha``.
    """

    n: int
    baseline_only: int
    no_context_only: int
    p: float
    alpha: float
    qualifies: bool

    def to_dict(self) -> dict[str, Any]:
        return {
            "n": self.n,
            "baseline_only": self.baseline_only,
            "no_context_only": self.no_context_only,
            "p": float(f"{self.p:.6g}"),
            "alpha": self.alpha,
            "qualifies": self.qualifies,
            "method": "exact two-sided McNemar test over items (binomial on the discordant "
            "items at one half)",
        }


def context_test(baseline: Correct, no_context: Correct, alpha: float = ALPHA) -> ContextTest:
    """Whether the baseline beats the no-context control on the same items."""
    from scipy.stats import binomtest  # only when a task is tested (slow to import)

    b = np.asarray(baseline, dtype=bool)
    c = np.asarray(no_context, dtype=bool)
    if b.shape != c.shape:
        raise ValueError("the baseline and the control must score the same items")
    only_b, only_c = int(np.sum(b & ~c)), int(np.sum(c & ~b))
    discordant = only_b + only_c
    p = 1.0 if discordant == 0 else float(binomtest(only_b, discordant, 0.5).pvalue)
    return ContextTest(int(b.size), only_b, only_c, p, alpha, only_b > only_c and p < alpha)


def retained_gain(
    scheme: Correct, baseline: Correct, no_context: Correct, seed: int = 0, n_boot: int = N_BOOT
) -> tuple[float | None, float | None, float | None]:
    """(scheme - no context) / (baseline - no context) in accuracy, and its paired 95%
    bootstrap interval (low, high).

    None for all three when the baseline is not above the control on the items (the gain
    has no denominator). A draw whose resampled baseline is not above its resampled control
    has no gain either: it counts as the lowest possible for the low end and as the highest
    for the high end, so that such draws widen the interval on both sides; an end that they
    reach is None (unbounded).
    """
    s, b, c = (np.asarray(x, dtype=np.float64) for x in (scheme, baseline, no_context))
    if not s.size == b.size == c.size:
        raise ValueError("the scheme, the baseline and the control must score the same items")
    if s.size == 0 or b.mean() <= c.mean():
        return None, None, None
    value = float((s.mean() - c.mean()) / (b.mean() - c.mean()))
    idx = resamples(s.size, seed, n_boot)
    top = s[idx].mean(1) - c[idx].mean(1)
    bottom = b[idx].mean(1) - c[idx].mean(1)
    ok = bottom > 0
    ratio = np.zeros(n_boot)
    ratio[ok] = top[ok] / bottom[ok]
    low = percentiles(np.where(ok, ratio, -UNBOUNDED))[0]
    high = percentiles(np.where(ok, ratio, UNBOUNDED))[1]
    return (
        value,
        None if low <= -UNBOUNDED / 2 else low,
        None if high >= UNBOUNDED / 2 else high,
    )


UNBOUNDED = 1e300
"""Stands for an infinite gain in the percentiles (a draw with no denominator)."""
