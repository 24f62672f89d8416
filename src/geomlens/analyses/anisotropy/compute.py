"""The streamed statistics of anisotropy, and what they give per layer.

The expected cosine between random token pairs of the corpus splits over dimensions
(Timkey & van Schijndel's CC_i): for unit vectors û = u / |u|,

    E[cos(u, v)] = sum_i CC_i,    CC_i = E[û_i v̂_i].

Averaged over every ordered pair of tokens from different windows, CC_i has a closed form
in streamed sums: with S_i = sum over tokens of û_i, W_i = sum over windows of
(sum over the window's tokens of û_i)^2, N tokens and M = sum over windows of n_w^2,

    CC_i = (S_i^2 - W_i) / (N^2 - M),

exact over all pairs (no sampling), mergeable (sums add). The sums are kept in ``GROUPS``
groups of windows (window mod GROUPS) for a bootstrap over windows.

Standardising (z_i = (h_i - mean_i) / std_i) needs the corpus's mean and variance before
any pair is scored. They are streamed exactly (float64 sums), and the pairs are scored at
the end on a fixed-size sample of tokens: a bottom-k sample by a key drawn per (window,
position) from a generator seeded with the window's row, the same whatever the batches,
shards or resumes. The standardised cosine is then the mean over the sample's pairs from
different windows with the full corpus's mean and variance (unbiased over pairs for a
uniform sample; the test plants a rogue dimension and checks it against the direct value).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from geomlens.capturing.taps import HiddenTap
from geomlens.errors import GeomlensError
from geomlens.models.view import ModelView
from geomlens.stats.base import CapturedBatch, check_state

GROUPS = 16
"""Groups of windows (window mod GROUPS) the pair sums are kept in."""

SAMPLE = 256
"""Tokens kept for the standardised cosine (the same tokens in every layer)."""

EMPTY = 2.0
"""The key of a sample slot no token holds yet (drawn keys lie in [0, 1); a finite marker,
since a checkpoint refuses non-finite statistics)."""

SEED = 20211107
"""Seeds each window's sampling keys (with the window's row)."""

StateSpec = dict[str, tuple[tuple[int, ...], torch.dtype]]


def sample_keys(rows: torch.Tensor, length: int) -> torch.Tensor:
    """Each token's sampling key [B * T] float64: uniform, a function of its window's row
    and position only."""
    keys = []
    for row in rows.tolist():
        g = torch.Generator().manual_seed(SEED * 1_000_003 + int(row))
        keys.append(torch.rand(length, generator=g, dtype=torch.float64))
    return torch.cat(keys)


class AnisotropyTap(HiddenTap):
    """The sums above for a model of ``n_layers + 1`` hidden-state layers of width ``d``."""

    def __init__(
        self, view: ModelView | None = None, windows: int = 0, *, layers: int = 0, d: int = 0
    ) -> None:
        n = view.n_layers + 1 if view is not None else layers
        d_ = view.d_model if view is not None else d
        self.n_layers, self.d = n, d_
        f = torch.float64
        self.unit_sum = torch.zeros(GROUPS, n, d_, dtype=f)
        self.window_sq = torch.zeros(GROUPS, n, d_, dtype=f)
        self.tokens = torch.zeros(GROUPS, n, dtype=f)
        self.tokens_sq = torch.zeros(GROUPS, n, dtype=f)
        self.total = torch.zeros(n, d_, dtype=f)
        self.total_sq = torch.zeros(n, d_, dtype=f)
        self.keys = torch.full((SAMPLE,), EMPTY, dtype=f)
        self.where = torch.full((SAMPLE, 2), -1, dtype=torch.int64)
        self.sample = torch.zeros(n, SAMPLE, d_, dtype=torch.float32)

    def update(self, batch: CapturedBatch) -> None:
        """Add one batch: layer -> [B, T, d] hidden states, ``context_index`` [B] windows."""
        rows = batch.context_index.cpu().long()
        groups = rows % GROUPS
        first = next(iter(batch.hidden.values()))
        b, t, _ = first.shape
        keys = sample_keys(rows, t)
        take = self._sampled(keys, rows, t)
        for layer, hidden in batch.hidden.items():
            h = hidden.detach().float().cpu()
            inverse = h.norm(dim=-1).clamp_min(1e-30).reciprocal()  # [B, T]
            per_window = torch.bmm(inverse[:, None, :], h)[:, 0].double()  # [B, d]: sum of units
            self.unit_sum[:, layer].index_add_(0, groups, per_window)
            self.window_sq[:, layer].index_add_(0, groups, per_window**2)
            n_w = torch.full((b,), float(t), dtype=torch.float64)
            self.tokens[:, layer].index_add_(0, groups, n_w)
            self.tokens_sq[:, layer].index_add_(0, groups, n_w**2)
            flat = h.reshape(b * t, -1)
            self.total[layer] += flat.sum(0, dtype=torch.float64)
            self.total_sq[layer] += torch.einsum("nd,nd->d", flat, flat).double()
            if take is not None:
                keep, new = take
                self.sample[layer] = torch.cat([self.sample[layer], flat[new]])[keep]

    def _sampled(
        self, keys: torch.Tensor, rows: torch.Tensor, t: int
    ) -> tuple[torch.Tensor, torch.Tensor] | None:
        """Update the sample's keys and places with this batch's tokens; returns which rows
        of (old sample, the batch's candidates) to keep and the candidates (None: none)."""
        new = torch.nonzero(keys < self.keys.max()).reshape(-1)
        if len(new) == 0:
            return None
        where = torch.stack([rows[new // t], new % t], -1)
        both = torch.cat([self.keys, keys[new]])
        keep = torch.argsort(both, stable=True)[:SAMPLE]
        self.keys = both[keep]
        self.where = torch.cat([self.where, where])[keep]
        return keep, new

    def merge(self, other: AnisotropyTap) -> AnisotropyTap:
        """Add ``other`` (the same model, other windows) in place; return self."""
        if (other.n_layers, other.d) != (self.n_layers, self.d):
            raise GeomlensError("cannot merge anisotropy statistics of another model.")
        for name in ("unit_sum", "window_sq", "tokens", "tokens_sq", "total", "total_sq"):
            getattr(self, name).add_(getattr(other, name))
        both = torch.cat([self.keys, other.keys])
        keep = torch.argsort(both, stable=True)[:SAMPLE]
        self.keys = both[keep]
        self.where = torch.cat([self.where, other.where])[keep]
        self.sample = torch.cat([self.sample, other.sample], 1)[:, keep]
        return self

    def state_spec(self) -> StateSpec:
        n, d, g, f = self.n_layers, self.d, GROUPS, torch.float64
        return {
            "unit_sum": ((g, n, d), f),
            "window_sq": ((g, n, d), f),
            "tokens": ((g, n), f),
            "tokens_sq": ((g, n), f),
            "total": ((n, d), f),
            "total_sq": ((n, d), f),
            "keys": ((SAMPLE,), f),
            "where": ((SAMPLE, 2), torch.int64),
            "sample": ((n, SAMPLE, d), torch.float32),
        }

    def state_dict(self) -> dict[str, torch.Tensor]:
        return {name: getattr(self, name).clone() for name in self.state_spec()}

    def load_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        check_state(state, self.state_spec(), "anisotropy")
        for name in self.state_spec():
            setattr(self, name, state[name].clone())


def contributions(
    unit_sum: np.ndarray, window_sq: np.ndarray, tokens: float, tokens_sq: float
) -> np.ndarray:
    """CC_i [d] over ordered pairs of tokens from different windows (see the module)."""
    pairs = tokens**2 - tokens_sq
    if pairs <= 0:
        return np.full(unit_sum.shape, np.nan)
    return (unit_sum**2 - window_sq) / pairs


def pair_contributions(x: np.ndarray, window: np.ndarray) -> np.ndarray:
    """CC_i [d] of the rows of ``x`` [n, d] over their ordered pairs from different
    windows (``window`` [n])."""
    unit = x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-30)
    total = unit.sum(0)
    within = np.zeros_like(total)
    for w in np.unique(window):
        within += unit[window == w].sum(0) ** 2
    counts = np.unique(window, return_counts=True)[1].astype(float)
    return contributions(total, within, float(len(x)), float((counts**2).sum()))


@dataclass(frozen=True)
class LayerResult:
    """One layer's anisotropy."""

    layer: int
    cosine: float
    """E[cos] over every pair of tokens from different windows."""
    top_dims: list[tuple[int, float]]
    """The dimensions of largest CC_i, with CC_i."""
    top1_share: float
    top3_share: float
    """sum of the 3 largest CC_i over E[cos]."""
    standardised: float
    """E[cos] after standardising each dimension (on the sample)."""
    standardised_top_dims: list[tuple[int, float]]
    sample_cosine: float
    """E[cos] on the sample without standardising (a check of the sample)."""


def _top(cc: np.ndarray, k: int) -> list[tuple[int, float]]:
    order = np.argsort(-cc, kind="stable")[:k]
    return [(int(i), float(cc[i])) for i in order]


def layer_results(tap: AnisotropyTap, shown: int = 5) -> list[LayerResult]:
    """Every layer the capture fed, in order."""
    found = []
    kept = tap.keys.numpy() < EMPTY
    window = tap.where[:, 0].numpy()[kept]
    for layer in range(tap.n_layers):
        n = float(tap.tokens[:, layer].sum())
        if n <= 0:
            continue
        cc = contributions(
            tap.unit_sum[:, layer].sum(0).numpy(),
            tap.window_sq[:, layer].sum(0).numpy(),
            n,
            float(tap.tokens_sq[:, layer].sum()),
        )
        cos = float(cc.sum())
        top = _top(cc, max(3, shown))
        mean = tap.total[layer].numpy() / n
        var = np.maximum(tap.total_sq[layer].numpy() / n - mean**2, 0.0)
        x = tap.sample[layer].double().numpy()[kept]
        z = (x - mean) / np.sqrt(np.where(var > 0, var, 1.0))
        std_cc = pair_contributions(z, window)
        found.append(
            LayerResult(
                layer,
                cos,
                top[:shown],
                top[0][1] / cos if cos else float("nan"),
                sum(v for _, v in top[:3]) / cos if cos else float("nan"),
                float(std_cc.sum()),
                _top(std_cc, shown),
                float(pair_contributions(x, window).sum()),
            )
        )
    return found


def share_interval(
    tap: AnisotropyTap, layers: list[int], draws: int = 400, seed: int = 0
) -> tuple[float, float] | None:
    """95% bootstrap interval over the groups of windows of the median over ``layers`` of
    the top-3 dimensions' share of E[cos] (None with under two groups filled).

    A group drawn c times enters with weight c in the unit sums and c^2 in the within-window
    sums, so that a window is never paired with its own copy."""
    if not layers:
        return None
    filled = np.nonzero(tap.tokens[:, layers[0]].numpy() > 0)[0]
    if len(filled) < 2:
        return None
    rng = np.random.default_rng(seed)
    s, w = tap.unit_sum.numpy()[filled], tap.window_sq.numpy()[filled]
    n, m = tap.tokens.numpy()[filled], tap.tokens_sq.numpy()[filled]
    medians = []
    for _ in range(draws):
        c = np.bincount(rng.integers(0, len(filled), len(filled)), minlength=len(filled))
        shares = []
        for layer in layers:
            cc = contributions(
                c @ s[:, layer],
                (c**2) @ w[:, layer],
                float(c @ n[:, layer]),
                float((c**2) @ m[:, layer]),
            )
            cos = cc.sum()
            shares.append(np.sort(cc)[-3:].sum() / cos if cos else np.nan)
        finite = [v for v in shares if np.isfinite(v)]
        if finite:  # a draw of one group pairs no two windows: it says nothing
            medians.append(float(np.median(finite)))
    if len(medians) < draws / 2:  # too few groups filled for the draws to mean anything
        return None
    return float(np.quantile(medians, 0.025)), float(np.quantile(medians, 0.975))
