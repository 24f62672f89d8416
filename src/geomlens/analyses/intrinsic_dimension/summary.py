"""The intrinsic dimension's headline numbers."""

from __future__ import annotations

from typing import Any

from geomlens.analyses.intrinsic_dimension.schema import KEY, IdMetrics


def id_headline(metrics: dict[str, Any]) -> list[tuple[str, Any]]:
    """The middle-third peak of TwoNN and its layer."""
    if "n_windows" not in metrics.get(KEY, {}):
        return []
    found = IdMetrics.read(metrics, KEY)
    phase = None if found is None else found.phase
    if phase is None or phase.peak is None:
        return []
    return [(f"intrinsic dimension, middle peak (layer {phase.peak_layer})", phase.peak)]
