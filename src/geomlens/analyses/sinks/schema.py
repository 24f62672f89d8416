"""The "sinks" block of metrics.json, as its step writes it and its section, summary and
claims read it (``SinkMetrics.read(metrics, KEY)``). Per layer it names the key position
that draws the most attention and the token id there in each window, so another analysis
(massive activations) joins on (layer, position, token id) with no computation."""

from __future__ import annotations

from dataclasses import dataclass

from geomlens.analyses.common.block import Block

KEY = "sinks"
"""The block's key in metrics.json."""


@dataclass(frozen=True, kw_only=True)
class SinkLayer(Block):
    """One layer's sink: where the heads' attention piles up."""

    layer: int
    """Block index (0 = the first block)."""
    position: int
    """The key position most windows' largest head-mean importance sits at."""
    share: float
    """Share of windows whose sink is at ``position``."""
    alpha: float
    """Mean over windows of the head-mean importance at each window's sink."""
    first_token: float
    """Head-mean importance of key position 0 (mean over windows)."""
    positions: list[int]
    """Each window's sink position."""
    token_ids: list[int]
    """Each window's token id at its sink position."""
    top: list[list[float]] | None = None
    """The three key positions of largest head-mean importance: [position, importance]."""


@dataclass(frozen=True, kw_only=True)
class SinkHead(Block):
    """A head whose largest importance is at a key other than the first, above epsilon."""

    layer: int
    head: int
    position: int
    alpha: float


@dataclass(frozen=True, kw_only=True)
class SinkMetrics(Block):
    """Attention sinks over the tapped windows."""

    n_windows: int
    length: int
    """The run's window length T."""
    causal: bool
    epsilon: float
    """Gu et al.'s threshold on the first token's importance."""
    sink_rate: float
    """Share of (layer, head, window) whose first token's importance passes epsilon, at T."""
    sink_rate_low: float | None = None
    sink_rate_high: float | None = None
    sink_rate_64: float | None = None
    """The same with each window cut to its first 64 tokens (Gu's T; causal models only)."""
    sink_rate_64_low: float | None = None
    sink_rate_64_high: float | None = None
    first_token: list[list[float]]
    """[layer][head] importance of the first token (mean over windows), at T."""
    rate_map: list[list[float]]
    """[layer][head] share of windows whose first token's importance passes epsilon, at T."""
    first_token_64: list[list[float]] | None = None
    rate_map_64: list[list[float]] | None = None
    layers: list[SinkLayer]
    elsewhere: list[SinkHead]
    """Heads whose largest importance is at a key other than the first and above epsilon."""
    max_keys: int | None = None
    """Key positions kept (longer windows keep their first ``max_keys``)."""
