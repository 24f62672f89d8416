"""The "intrinsic_dimension" block of metrics.json, as its step writes it and its section,
summary and claims read it (``IdMetrics.read(metrics, KEY)``)."""

from __future__ import annotations

from dataclasses import dataclass

from geomlens.analyses.common.block import Block

KEY = "intrinsic_dimension"
"""The block's key in metrics.json."""


@dataclass(frozen=True, kw_only=True)
class IdLayer(Block):
    """One layer's intrinsic dimension."""

    layer: int
    depth: float
    """layer / number of blocks (0 = embedding output, 1 = last block)."""
    twonn: float | None
    """TwoNN dimension of the windows' mean-pooled states (unitless)."""
    low: float | None = None
    high: float | None = None
    """Its 95% bootstrap interval over windows."""
    gride: list[float | None] | None = None
    """GRIDE's dimension at each k of ``IdMetrics.gride_k``."""
    gride_scale: list[float] | None = None
    """The mean distance r_2k each GRIDE estimate reads (hidden-state units)."""


@dataclass(frozen=True, kw_only=True)
class IdPhase(Block):
    """Cheng et al.'s middle phase: the middle third's peak against both ends."""

    number: float | None
    """Middle-third peak TwoNN minus the larger of the first and last sixth's means."""
    low: float | None = None
    high: float | None = None
    peak_layer: int | None = None
    peak: float | None = None
    early: float | None = None
    late: float | None = None


@dataclass(frozen=True, kw_only=True)
class IdMetrics(Block):
    """The intrinsic dimension of the windows per layer."""

    n_windows: int
    """Points per layer (one per window)."""
    pooling: str
    """How a window becomes one point."""
    estimator: str
    """Which estimator and whose code."""
    min_windows: int
    """Windows the phase claim needs (its guard)."""
    gride_k: list[int]
    layers: list[IdLayer]
    phase: IdPhase | None = None
    n_boot: int | None = None
