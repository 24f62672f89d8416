"""A fixed histogram of log2 |x|: the streamed median of absolute values.

The bins are ``BINS_PER_OCTAVE`` per octave from 2^LOW to 2^HIGH, with one bin below
(zeros included) and one above. Counts add exactly under merging, so the median of the
merged histogram is the median of the union; read back by interpolating within its bin in
log space, it is off by at most one bin's width (a factor 2^(1/128), 0.54%) from the
exact median of the values counted. (A log2 histogram costs a third of a log10 one and a
fifth of ``torch.histc``, measured on SmolLM2-sized batches.)
"""

from __future__ import annotations

import math

import torch

LOW, HIGH = -30, 30
BINS_PER_OCTAVE = 128
N_BINS = (HIGH - LOW) * BINS_PER_OCTAVE + 2
"""Bins of one histogram: the octaves' bins, one below 2^LOW and one above 2^HIGH."""

WIDTH = 2.0 ** (1 / BINS_PER_OCTAVE) - 1
"""The largest relative error of ``quantile`` (one bin's width)."""


def counts(values: torch.Tensor) -> torch.Tensor:
    """The histogram of |values| (any shape): [N_BINS] float64 counts."""
    logs = torch.log2(values.reshape(-1).float().abs())
    index = logs.sub_(LOW).mul_(BINS_PER_OCTAVE).floor_().add_(1)
    index = index.clamp_(0, N_BINS - 1).to(torch.int64)  # log2(0) = -inf: the bin below
    return torch.bincount(index, minlength=N_BINS).double()


def quantile(hist: torch.Tensor, q: float = 0.5) -> float:
    """The ``q`` quantile of the values a histogram [N_BINS] counted (nan when empty),
    interpolated linearly in log2 within its bin."""
    total = float(hist.sum())
    if total <= 0:
        return math.nan
    cum = torch.cumsum(hist.double(), 0)
    target = q * total
    k = min(int(torch.searchsorted(cum, torch.tensor(target, dtype=torch.float64))), N_BINS - 1)
    if k == 0:
        return 0.0
    if k == N_BINS - 1:
        return 2.0**HIGH
    before = float(cum[k - 1])
    inside = float(hist[k])
    share = (target - before) / inside if inside > 0 else 0.5
    return float(2.0 ** (LOW + (k - 1 + share) / BINS_PER_OCTAVE))
