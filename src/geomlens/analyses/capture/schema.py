"""The "capture" block of metrics.json: the capture's variance shares per layer, read by its
summary (``CaptureMetrics.of(metrics)``). ``pipeline.run.capture_metrics`` writes it: the
pipeline sits below the analyses and cannot import this module, so this is the block's
declaration and its readers' view of it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Self

from geomlens.analyses.common.block import Block


@dataclass(frozen=True, kw_only=True)
class CaptureLayer(Block):
    """One layer's split of the hidden states' variance into position, context and the rest
    (shares unitless, in [0, 1], summing to 1); ``_skip_first``: position 0 left out."""

    layer: int
    share_pos: float
    share_ctx: float
    share_resid: float
    rms_norm: float
    """Root mean square of the hidden states' norm (hidden-state units)."""
    share_pos_skip_first: float
    share_ctx_skip_first: float
    share_resid_skip_first: float
    rms_norm_skip_first: float

    def shares(self, skip_first: bool) -> dict[str, float]:
        """{"share_pos", "share_ctx", "share_resid"} of one view of position 0."""
        if skip_first:
            return {
                "share_pos": self.share_pos_skip_first,
                "share_ctx": self.share_ctx_skip_first,
                "share_resid": self.share_resid_skip_first,
            }
        return {
            "share_pos": self.share_pos,
            "share_ctx": self.share_ctx,
            "share_resid": self.share_resid,
        }


@dataclass(frozen=True, kw_only=True)
class CaptureMetrics(Block):
    """The "capture" block."""

    n_contexts: int
    """Windows captured (C)."""
    length: int
    """Tokens per window (T)."""
    layers: list[CaptureLayer]
    variances_clamped: int | None = None
    """Variances that rounding made negative, clamped to 0."""
    shares_clamped: int | None = None
    """Shares that rounding put outside [0, 1], clamped into it."""
    auto_contexts: dict[str, Any] | None = None
    """The record of ``--contexts auto`` (absent when C was given)."""

    @classmethod
    def of(cls, metrics: dict[str, Any]) -> Self | None:
        """The run's capture block (None when it has none)."""
        found = metrics.get("capture")
        return cls.from_dict(found) if found else None
