"""A fixed histogram of log10 |x|: the streamed median of absolute values.

The bins are ``BINS_PER_DECADE`` per decade from 10^LOW to 10^HIGH, with one bin below
(zeros included) and one above. Counts add exactly under merging, so the median of the
merged histogram is the median of the union; read back by interpolating within its bin in
log space, it is off by at most one bin's width (a factor 10^(1/BINS_PER_DECADE), 0.58%
at 400 bins per decade) from the exact median of the values counted.
"""

from __future__ import annotations

import math

import torch

LOW, HIGH = -8, 8
BINS_PER_DECADE = 400
N_BINS = (HIGH - LOW) * BINS_PER_DECADE + 2
"""Bins of one histogram: the decades' bins, one below 10^LOW and one above 10^HIGH."""


def bin_index(values: torch.Tensor) -> torch.Tensor:
    """The bin of each |value| (int64, same shape): 0 below 10^LOW, N_BINS - 1 above 10^HIGH."""
    logs = torch.log10(values.abs().float().clamp_min(10.0**LOW / 2))
    index = torch.floor((logs - LOW) * BINS_PER_DECADE).long() + 1
    return index.clamp_(0, N_BINS - 1)


def counts(values: torch.Tensor) -> torch.Tensor:
    """The histogram of ``values`` (any shape): [N_BINS] float64 counts."""
    return torch.bincount(bin_index(values).reshape(-1), minlength=N_BINS).double()


def quantile(hist: torch.Tensor, q: float = 0.5) -> float:
    """The ``q`` quantile of the values a histogram [N_BINS] counted (nan when empty),
    interpolated linearly in log10 within its bin."""
    total = float(hist.sum())
    if total <= 0:
        return math.nan
    cum = torch.cumsum(hist.double(), 0)
    target = q * total
    k = int(torch.searchsorted(cum, torch.tensor(target, dtype=torch.float64)))
    k = min(k, N_BINS - 1)
    if k == 0:
        return 0.0
    if k == N_BINS - 1:
        return 10.0**HIGH
    before = float(cum[k - 1]) if k else 0.0
    inside = float(hist[k])
    share = (target - before) / inside if inside > 0 else 0.5
    return float(10.0 ** (LOW + (k - 1 + share) / BINS_PER_DECADE))
