"""Attention sinks: how much of each head's attention one key position draws, from the
attention probabilities of the capture's first windows (pure computations and the tap).

For a window, layer l and head h with attention probabilities ``A [T, T]`` (queries x keys),
the importance of key position j is the mean attention the queries that can see it give
it (Gu et al. 2025, arXiv 2410.10781, their alpha): ``alpha[j] = sum_{i sees j} A[i, j] /
#{i sees j}`` (a causal model: queries i >= j, so ``T - j`` of them; an encoder: all T).
The first token's is ``alpha[0]``; a head is a sink head when ``alpha[0] > 0.3`` (Gu's
epsilon), and the sink rate is the share of (layer, head) that are (their metric, read at
T = 64). Every key position is kept, so a sink that is not the first token shows.

The tap reads the same first windows the walk's attention tap reads, in the same passes
(no forward pass of its own). On a causal model the attention of the first 64 queries over
the first 64 keys is exactly what a window cut to 64 tokens gives, so the T = 64 numbers
come free from the same probabilities; an encoder would need a second pass and has none.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import torch

from geomlens.analyses.walk.refactor import attention_weight_modules
from geomlens.capturing.hooks import on_calls
from geomlens.errors import GeomlensError
from geomlens.models.view import ModelView
from geomlens.stats.base import check_state

EPSILON = 0.3
"""Gu et al.'s threshold on the first token's importance for a sink head."""

GU_LENGTH = 64
"""The window length Gu et al. read the sink rate at."""

MAX_KEYS = 1024
"""Key positions whose importance the tap keeps (windows longer than this keep their first
``MAX_KEYS``; the sink is found among them)."""

SINK_WINDOWS = 16
"""Windows the report's capture reads attention of for the sinks (the walk's kernel windows:
the same tapped passes, so no pass is added)."""


def importance(attn: torch.Tensor, causal: bool) -> torch.Tensor:
    """Each key position's importance: the mean attention it receives from the queries that
    can see it.

    Args:
        attn: [B, H, T, T] attention probabilities (queries x keys).
        causal: whether query i sees only keys j <= i.

    Returns:
        [B, H, T] float64: ``alpha[b, h, j]``.
    """
    T = int(attn.shape[-1])
    total = attn.double().sum(-2)
    if not causal:
        return total / T
    seen = torch.arange(T, 0, -1, dtype=torch.float64, device=total.device)
    return total / seen


def sink_positions(alpha: torch.Tensor, causal: bool) -> torch.Tensor:
    """Per window, the key position of largest head-mean importance.

    On a causal model only the first half of the keys is searched: a late key's importance
    averages few queries (the last key's, one), so it is not read as a sink.

    Args:
        alpha: [B, H, T] importance (``importance``).

    Returns:
        [B] int64 positions.
    """
    mean = alpha.mean(1)
    span = max(1, mean.shape[-1] // 2) if causal else mean.shape[-1]
    return mean[:, :span].argmax(-1)


@dataclass(frozen=True)
class SinkResult:
    """The sinks of a model over the tapped windows.

    Attributes:
        alpha: [L, H, K] mean importance of each key position (K = min(T, MAX_KEYS)).
        above: [L, H] share of windows where the first token's importance passes EPSILON.
        window_rates: [n] each window's sink rate (share of (layer, head) over EPSILON).
        alpha_64, above_64, window_rates_64: the same read at T = 64 (None: the run's T is
            under 64, or an encoder, whose T = 64 attention needs another pass).
        positions: [n, L] each window's sink position per layer; tokens: [n, L] its token id;
            sink_alpha: [n, L] its head-mean importance.
        length: the run's window length T; causal: whether the model is.
    """

    alpha: npt.NDArray[np.float64]
    above: npt.NDArray[np.float64]
    window_rates: npt.NDArray[np.float64]
    alpha_64: npt.NDArray[np.float64] | None
    above_64: npt.NDArray[np.float64] | None
    window_rates_64: npt.NDArray[np.float64] | None
    positions: npt.NDArray[np.int64]
    tokens: npt.NDArray[np.int64]
    sink_alpha: npt.NDArray[np.float64]
    length: int
    causal: bool

    @property
    def n_windows(self) -> int:
        return int(self.window_rates.size)

    @property
    def sink_rate(self) -> float:
        """Share of (layer, head, window) whose first token's importance passes EPSILON."""
        return float(self.window_rates.mean()) if self.n_windows else float("nan")


class SinkTap:
    """Each key position's importance per layer and head over the first ``windows`` windows
    of the capture (a ``capturing.taps.Tap``; an ``Accumulator``: update, merge, state,
    finalize).

    Each block's probabilities are reduced to importances [B, H, T] as its attention
    returns them (where the model says which module returns them), else from the pass's
    returned attentions; the window's token ids come from the base model's call."""

    attention = True
    what = "attention-sink"

    def __init__(self, view: ModelView, windows: int):
        self.view, self.windows = view, int(windows)
        self.causal = not (view.is_encoder or view.is_seq2seq)
        self.n_layers, self.n_heads = view.n_layers, view.n_heads
        self.keys = min(MAX_KEYS, view.n_ctx or MAX_KEYS)
        L, H, W, K = self.n_layers, self.n_heads, self.windows, self.keys
        self.alpha_sum = np.zeros((L, H, K))
        self.alpha64_sum = np.zeros((L, H, GU_LENGTH))
        self.above = np.zeros((L, H))
        self.above64 = np.zeros((L, H))
        self.rates = np.zeros((W, 2))
        self.positions = np.zeros((W, L), dtype=np.int64)
        self.tokens = np.zeros((W, L), dtype=np.int64)
        self.sink_alpha = np.zeros((W, L))
        self.seen = 0
        self.length = 0
        self._weights = attention_weight_modules(view)
        self.streams = self._weights is not None
        self._pending: dict[int, tuple[torch.Tensor, torch.Tensor | None]] = {}
        self._ids: torch.Tensor | None = None

    # -- the tap ----------------------------------------------------------------------
    @contextmanager
    def during(self, view: ModelView) -> Iterator[None]:
        with ExitStack() as stack:
            self._pending, self._ids = {}, None
            stack.enter_context(on_calls({"base": view.base}, self._base_call))
            weights = {layer: module for layer, (module, _) in (self._weights or {}).items()}
            stack.enter_context(on_calls(weights, self._weights_of))
            yield

    def _base_call(self, _key: str, args: tuple, kwargs: dict, _output: Any) -> None:
        ids = kwargs.get("input_ids", args[0] if args else None)
        if isinstance(ids, torch.Tensor):
            self._ids = ids.detach().cpu()

    def _weights_of(self, layer: int, args: tuple, kwargs: dict, output: Any) -> None:
        index = (self._weights or {})[layer][1]
        weights = output[index] if isinstance(output, (tuple, list)) else None
        if not isinstance(weights, torch.Tensor) or weights.ndim != 4:
            raise GeomlensError(
                f"{self.view.name} returned no attention weights under eager attention."
            )
        self._pending[layer] = self._reduce(weights.detach())

    def after(self, attentions: Sequence[torch.Tensor] | None) -> None:
        """Add the pass just run (its blocks' probabilities, held or returned)."""
        if not self.streams:
            if attentions is None:
                raise GeomlensError(f"{self.view.name} returned no attention weights.")
            self._pending = {i: self._reduce(a) for i, a in enumerate(attentions)}
        pending, ids = self._pending, self._ids
        self._pending, self._ids = {}, None
        if ids is None or len(pending) != self.n_layers:
            raise GeomlensError(
                f"{self.view.name}'s tapped pass gave attention for {len(pending)} of "
                f"{self.n_layers} blocks; the attention sinks cannot be read."
            )
        self._add([pending[layer] for layer in range(self.n_layers)], ids)

    # -- the accumulator ----------------------------------------------------------------
    def update(self, attn: Sequence[torch.Tensor], ids: torch.Tensor) -> None:
        """Add one batch of windows.

        Args:
            attn: per block, [B, H, T, T] attention probabilities.
            ids: [B, T] the windows' token ids.
        """
        self._add([self._reduce(a) for a in attn], ids)

    def _reduce(self, attn: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        """One block's probabilities [B, H, T, T] -> importances [B, H, T] at the run's T
        and [B, H, 64] at T = 64 (None: not causal, or T under 64)."""
        alpha = importance(attn, self.causal)
        if not (self.causal and attn.shape[-1] >= GU_LENGTH):
            return alpha, None
        return alpha, importance(attn[..., :GU_LENGTH, :GU_LENGTH], True)

    def _add(
        self, reduced: Sequence[tuple[torch.Tensor, torch.Tensor | None]], ids: torch.Tensor
    ) -> None:
        B, T = int(ids.shape[0]), int(ids.shape[1])
        if self.length and self.length != T:
            raise GeomlensError(
                f"attention sinks of windows of {T} tokens cannot join those of {self.length}."
            )
        if self.seen + B > self.windows:
            raise GeomlensError(
                f"the attention-sink tap reads {self.windows} windows, not {self.seen + B}."
            )
        self.length = T
        K = min(T, self.keys)
        rows = slice(self.seen, self.seen + B)
        rate, rate64 = np.zeros(B), np.zeros(B)
        for layer, (alpha, a64) in enumerate(reduced):
            self.alpha_sum[layer, :, :K] += alpha[..., :K].sum(0).cpu().numpy()
            first = (alpha[..., 0] > EPSILON).double().cpu().numpy()  # [B, H]
            self.above[layer] += first.sum(0)
            rate += first.mean(1)
            pos = sink_positions(alpha, self.causal)
            self.positions[rows, layer] = pos.cpu().numpy()
            self.tokens[rows, layer] = ids.gather(1, pos.cpu()[:, None])[:, 0].numpy()
            mean = alpha.mean(1)
            self.sink_alpha[rows, layer] = mean.gather(1, pos[:, None])[:, 0].cpu().numpy()
            if a64 is not None:
                self.alpha64_sum[layer] += a64.sum(0).cpu().numpy()
                first64 = (a64[..., 0] > EPSILON).double().cpu().numpy()
                self.above64[layer] += first64.sum(0)
                rate64 += first64.mean(1)
        L = max(1, len(reduced))
        self.rates[rows, 0] = rate / L
        self.rates[rows, 1] = rate64 / L
        self.seen += B

    def merge(self, other: SinkTap) -> SinkTap:
        """Add a tap filled on other windows (in place); return self."""
        if (other.n_layers, other.n_heads, other.keys) != (self.n_layers, self.n_heads, self.keys):
            raise GeomlensError("cannot merge attention sinks of models of other shapes.")
        if self.length and other.length and self.length != other.length:
            raise GeomlensError(
                f"cannot merge attention sinks of windows of {other.length} tokens into "
                f"those of {self.length}."
            )
        if self.seen + other.seen > self.windows:
            raise GeomlensError(
                f"cannot merge attention sinks of {self.seen + other.seen} windows into a "
                f"tap of {self.windows}."
            )
        for name in ("alpha_sum", "alpha64_sum", "above", "above64"):
            getattr(self, name)[...] += getattr(other, name)
        rows = slice(self.seen, self.seen + other.seen)
        for name in ("rates", "positions", "tokens", "sink_alpha"):
            getattr(self, name)[rows] = getattr(other, name)[: other.seen]
        self.seen += other.seen
        self.length = self.length or other.length
        return self

    def state_spec(self) -> dict[str, tuple[tuple[int, ...], torch.dtype]]:
        L, H, W, K, f64 = self.n_layers, self.n_heads, self.windows, self.keys, torch.float64
        return {
            "alpha_sum": ((L, H, K), f64),
            "alpha64_sum": ((L, H, GU_LENGTH), f64),
            "above": ((L, H), f64),
            "above64": ((L, H), f64),
            "rates": ((W, 2), f64),
            "positions": ((W, L), torch.int64),
            "tokens": ((W, L), torch.int64),
            "sink_alpha": ((W, L), f64),
            "seen": ((), torch.int64),
            "length": ((), torch.int64),
        }

    def state_dict(self) -> dict[str, torch.Tensor]:
        state = {name: torch.from_numpy(getattr(self, name).copy()) for name in _ARRAYS}
        state["seen"] = torch.tensor(self.seen, dtype=torch.int64)
        state["length"] = torch.tensor(self.length, dtype=torch.int64)
        return state

    def load_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        """Restore ``state_dict()`` exactly (one sentence when it was saved for another
        model or window count)."""
        check_state(state, self.state_spec(), self.what)
        for name in _ARRAYS:
            setattr(self, name, state[name].cpu().numpy().copy())
        self.seen, self.length = int(state["seen"]), int(state["length"])

    def finalize(self) -> SinkResult:
        n, T = self.seen, self.length
        if n == 0:
            raise GeomlensError("the attention-sink tap read no window.")
        K = min(T, self.keys)
        has64 = self.causal and T >= GU_LENGTH
        return SinkResult(
            alpha=self.alpha_sum[..., :K] / n,
            above=self.above / n,
            window_rates=self.rates[:n, 0].copy(),
            alpha_64=self.alpha64_sum / n if has64 else None,
            above_64=self.above64 / n if has64 else None,
            window_rates_64=self.rates[:n, 1].copy() if has64 else None,
            positions=self.positions[:n].copy(),
            tokens=self.tokens[:n].copy(),
            sink_alpha=self.sink_alpha[:n].copy(),
            length=T,
            causal=self.causal,
        )


_ARRAYS: tuple[str, ...] = (
    *("alpha_sum", "alpha64_sum", "above", "above64"),
    *("rates", "positions", "tokens", "sink_alpha"),
)
