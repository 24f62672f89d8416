"""The streamed statistics of massive activations, and what they give per layer.

``MassiveTap`` (a ``capturing.taps.HiddenTap``) is fed every captured batch's hidden states
and keeps, per hidden-state layer, a state that does not grow with the corpus:

- a histogram of log2 |h[t, i]| over every coordinate (``histogram``): the median |h|;
- each feature dimension's largest |h| and the (window, position) holding it;
- the ``TOP`` largest |h[t, i]| of the layer with their (window, position, dimension), over
  every position and over the positions after the first (a second massive activation, as
  in the decomposition's outlier windows, shows there);
- per window its three largest |h|, summed in ``GROUPS`` groups of windows (window mod
  ``GROUPS``): the mean top-1/2/3 of a window (the paper's per-sequence numbers) and a
  bootstrap over groups of windows.

Sun et al.'s rule (arXiv 2402.17762, section 2): an activation is massive when its magnitude
is over 100 and about 1,000 times the median magnitude of its hidden state.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import torch

from geomlens.analyses.massive import histogram
from geomlens.capturing.taps import HiddenTap
from geomlens.errors import GeomlensError
from geomlens.models.view import ModelView
from geomlens.stats.base import CapturedBatch, check_state

TOP = 32
"""Largest coordinates kept per layer (each list: every position, positions after 0)."""

GROUPS = 16
"""Groups of windows (window mod GROUPS) the per-window top-3 sums are kept in."""

ABSOLUTE = 100.0
"""Sun et al.'s floor: a massive activation is over 100 in magnitude."""

RATIO = 1000.0
"""Sun et al.'s ratio: about 1,000 times the median magnitude."""

StateSpec = dict[str, tuple[tuple[int, ...], torch.dtype]]


class MassiveTap(HiddenTap):
    """The per-layer state above for a model of ``n_layers + 1`` hidden-state layers of
    width ``d`` (``windows`` is unused: it reads every window)."""

    def __init__(
        self, view: ModelView | None = None, windows: int = 0, *, layers: int = 0, d: int = 0
    ) -> None:
        self.n_layers = view.n_layers + 1 if view is not None else layers
        self.d = view.d_model if view is not None else d
        n, d_ = self.n_layers, self.d
        self.hist = torch.zeros(n, histogram.N_BINS, dtype=torch.float64)
        self.dim_max = torch.full((n, d_), -1.0, dtype=torch.float64)
        self.dim_where = torch.zeros(n, d_, 2, dtype=torch.int64)
        self.top = torch.full((n, TOP), -1.0, dtype=torch.float64)
        self.top_where = torch.zeros(n, TOP, 3, dtype=torch.int64)
        self.rest = torch.full((n, TOP), -1.0, dtype=torch.float64)
        self.rest_where = torch.zeros(n, TOP, 3, dtype=torch.int64)
        self.win_top = torch.zeros(GROUPS, n, 3, dtype=torch.float64)
        self.win_n = torch.zeros(GROUPS, n, dtype=torch.float64)

    def update(self, batch: CapturedBatch) -> None:
        """Add one batch: layer -> [B, T, d] hidden states, ``context_index`` [B] windows."""
        rows = batch.context_index.cpu().long()
        for layer, hidden in batch.hidden.items():
            a = hidden.detach().abs().float().cpu()
            self._layer(int(layer), a, rows)

    def _layer(self, layer: int, a: torch.Tensor, rows: torch.Tensor) -> None:
        b, t, d = a.shape
        self.hist[layer] += histogram.counts(a)
        flat = a.reshape(b * t, d)
        best = flat.amax(0)
        at = (flat == best).int().argmax(0)  # the first (window, position) of a tie
        where = torch.stack([rows[at // t], at % t], -1)
        better = _beats(best.double(), where, self.dim_max[layer], self.dim_where[layer])
        self.dim_max[layer] = torch.where(better, best.double(), self.dim_max[layer])
        self.dim_where[layer] = torch.where(better[:, None], where, self.dim_where[layer])
        token_max = flat.amax(1).reshape(b, t)  # [B, T]
        self._merge_top(self.top, self.top_where, layer, *_largest(a, token_max, rows, 0))
        if t > 1:
            rest = _largest(a[:, 1:], token_max[:, 1:], rows, 1)
            self._merge_top(self.rest, self.rest_where, layer, *rest)
        k = min(3, t * d)
        self.win_top[:, layer, :k].index_add_(0, rows % GROUPS, _window_top(a, token_max, k))
        self.win_n[:, layer].index_add_(0, rows % GROUPS, torch.ones(b, dtype=torch.float64))

    @staticmethod
    def _merge_top(
        top: torch.Tensor, where: torch.Tensor, layer: int, vals: torch.Tensor, at: torch.Tensor
    ) -> None:
        both = torch.cat([top[layer], vals])
        both_at = torch.cat([where[layer], at])
        keep = _order(both, both_at)[:TOP]
        top[layer], where[layer] = both[keep], both_at[keep]

    def merge(self, other: MassiveTap) -> MassiveTap:
        """Add ``other`` (the same model, other windows) in place; return self."""
        if (other.n_layers, other.d) != (self.n_layers, self.d):
            raise GeomlensError("cannot merge massive-activation statistics of another model.")
        self.hist += other.hist
        better = _beats(other.dim_max, other.dim_where, self.dim_max, self.dim_where)
        self.dim_max = torch.where(better, other.dim_max, self.dim_max)
        self.dim_where = torch.where(better[..., None], other.dim_where, self.dim_where)
        for layer in range(self.n_layers):
            self._merge_top(
                self.top, self.top_where, layer, other.top[layer], other.top_where[layer]
            )
            self._merge_top(
                self.rest, self.rest_where, layer, other.rest[layer], other.rest_where[layer]
            )
        self.win_top += other.win_top
        self.win_n += other.win_n
        return self

    def state_spec(self) -> StateSpec:
        n, d, f, i = self.n_layers, self.d, torch.float64, torch.int64
        return {
            "hist": ((n, histogram.N_BINS), f),
            "dim_max": ((n, d), f),
            "dim_where": ((n, d, 2), i),
            "top": ((n, TOP), f),
            "top_where": ((n, TOP, 3), i),
            "rest": ((n, TOP), f),
            "rest_where": ((n, TOP, 3), i),
            "win_top": ((GROUPS, n, 3), f),
            "win_n": ((GROUPS, n), f),
        }

    def state_dict(self) -> dict[str, torch.Tensor]:
        return {name: getattr(self, name).clone() for name in self.state_spec()}

    def load_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        check_state(state, self.state_spec(), "massive-activation")
        for name in self.state_spec():
            setattr(self, name, state[name].clone())


def _beats(
    value: torch.Tensor, where: torch.Tensor, old: torch.Tensor, old_where: torch.Tensor
) -> torch.Tensor:
    """Where (value, its place) comes before (old, its place): larger, or equal at an
    earlier (window, position), so that ties resolve the same in any order of batches."""
    earlier = (where[..., 0] < old_where[..., 0]) | (
        (where[..., 0] == old_where[..., 0]) & (where[..., 1] < old_where[..., 1])
    )
    return (value > old) | ((value == old) & earlier)


def _order(vals: torch.Tensor, where: torch.Tensor) -> torch.Tensor:
    """Indices of entries by value (largest first), ties by (window, position, dim)."""
    keys = np.lexsort(
        (where[:, 2].numpy(), where[:, 1].numpy(), where[:, 0].numpy(), -vals.numpy())
    )
    return torch.from_numpy(keys)


def _largest(
    a: torch.Tensor, token_max: torch.Tensor, rows: torch.Tensor, first: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """The ``TOP`` largest entries of ``a`` [B, T, d] (its positions counted from
    ``first``; ``token_max`` [B, T] each token's largest) and their (window, position,
    dimension) [k, 3], ties ordered by place (``_order``). The largest entries sit in the
    tokens of largest maxima: only those tokens are searched."""
    b, t, d = a.shape
    n = min(4 * TOP, b * t)
    tokens = token_max.reshape(-1).topk(n).indices
    vals, inside = a.reshape(b * t, d)[tokens].reshape(-1).topk(min(4 * TOP, n * d))
    token = tokens[inside // d]
    where = torch.stack([rows[token // t], token % t + first, inside % d], -1)
    keep = _order(vals.double(), where)[:TOP]
    return vals.double()[keep], where[keep]


def _window_top(a: torch.Tensor, token_max: torch.Tensor, k: int) -> torch.Tensor:
    """Each window's ``k`` largest entries [B, k] float64, searched in its ``k`` tokens of
    largest maxima (where they must sit)."""
    b, t, d = a.shape
    tokens = token_max.topk(min(k, t), dim=1).indices  # [B, k]
    rows = torch.gather(a, 1, tokens[..., None].expand(-1, -1, d))  # [B, k, d]
    return rows.reshape(b, -1).topk(k, dim=1).values.double()


@dataclass(frozen=True)
class Entry:
    """One large coordinate: its magnitude and where it sits."""

    value: float
    window: int
    position: int
    dim: int


@dataclass(frozen=True)
class LayerResult:
    """One hidden-state layer's numbers (magnitudes |h|)."""

    layer: int
    median: float
    top: tuple[float, float, float]
    """Mean over windows of each window's top-1, top-2, top-3 |h|."""
    ratio: float
    """top-1 over the median."""
    largest: list[Entry]
    """The layer's largest coordinates over the corpus (every position), largest first."""
    after_first: list[Entry]
    """The same over positions after the first."""
    massive_dims: list[Entry]
    """Dimensions whose largest |h| passes Sun's rule, with where it sits."""

    @property
    def massive(self) -> bool:
        return self.top[0] > ABSOLUTE and self.ratio >= RATIO


def _entries(vals: torch.Tensor, where: torch.Tensor, limit: int) -> list[Entry]:
    return [
        Entry(float(v), int(w[0]), int(w[1]), int(w[2]))
        for v, w in zip(vals[:limit], where[:limit], strict=True)
        if float(v) >= 0
    ]


def layer_results(tap: MassiveTap, shown: int = 8) -> list[LayerResult]:
    """Every layer the capture fed, in order (``shown`` largest entries kept of each list)."""
    found = []
    n_win = tap.win_n.sum(0)
    for layer in range(tap.n_layers):
        if n_win[layer] <= 0:
            continue
        median = histogram.quantile(tap.hist[layer])
        top = tap.win_top[:, layer].sum(0) / n_win[layer]
        top1 = float(top[0])
        ratio = top1 / median if median > 0 else math.inf
        floor = max(ABSOLUTE, RATIO * median)
        dims = [
            Entry(
                float(tap.dim_max[layer, i]),
                int(tap.dim_where[layer, i, 0]),
                int(tap.dim_where[layer, i, 1]),
                i,
            )
            for i in torch.nonzero(tap.dim_max[layer] > floor).reshape(-1).tolist()
        ]
        found.append(
            LayerResult(
                layer,
                median,
                (top1, float(top[1]), float(top[2])),
                ratio,
                _entries(tap.top[layer], tap.top_where[layer], shown),
                _entries(tap.rest[layer], tap.rest_where[layer], shown),
                sorted(dims, key=lambda e: -e.value),
            )
        )
    return found


def ratio_interval(
    tap: MassiveTap, layer: int, draws: int = 400, seed: int = 0
) -> tuple[float, float] | None:
    """95% bootstrap interval of the layer's top-1 / median over the groups of windows
    (the median held at the corpus's; None with under two groups filled)."""
    n = tap.win_n[:, layer].numpy()
    filled = np.nonzero(n > 0)[0]
    if len(filled) < 2:
        return None
    median = histogram.quantile(tap.hist[layer])
    sums, counts = tap.win_top[filled, layer, 0].numpy(), n[filled]
    rng = np.random.default_rng(seed)
    pick = rng.integers(0, len(filled), size=(draws, len(filled)))
    ratios = sums[pick].sum(1) / counts[pick].sum(1) / median
    return float(np.quantile(ratios, 0.025)), float(np.quantile(ratios, 0.975))


@dataclass(frozen=True)
class Profile:
    """Where Sun's rule holds along the layers."""

    appear: int | None
    """The first layer where it holds (None: none)."""
    vanish: int | None
    """The layer after the last where it holds (None: it holds at the last layer, or never)."""
    jump: float | None
    """top-1 ratio at ``appear`` over the layer before it (None at the first layer)."""
    held: float | None
    """Share of the layers from ``appear`` to the last where it holds."""
    dims: list[int] = field(default_factory=list)
    """Every dimension that passes the rule in some layer, most layers first."""


def profile(rows: list[LayerResult]) -> Profile:
    """Where the massive activations appear, how abruptly, and how long they stay."""
    holds = [r.massive for r in rows]
    if not any(holds):
        return Profile(None, None, None, None, [])
    first = holds.index(True)
    last = len(holds) - 1 - holds[::-1].index(True)
    jump = rows[first].ratio / rows[first - 1].ratio if first > 0 else None
    held = sum(holds[first:]) / len(holds[first:])
    counted: dict[int, int] = {}
    for r in rows:
        for e in r.massive_dims:
            counted[e.dim] = counted.get(e.dim, 0) + 1
    dims = sorted(counted, key=lambda k: (-counted[k], k))
    vanish = rows[last + 1].layer if last + 1 < len(rows) else None
    return Profile(rows[first].layer, vanish, jump, held, dims)
