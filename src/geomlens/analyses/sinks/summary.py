"""The attention sinks' headline numbers."""

from __future__ import annotations

from typing import Any

from geomlens.analyses.sinks.schema import KEY, SinkMetrics


def sink_headline(metrics: dict[str, Any]) -> list[tuple[str, Any]]:
    """The sink rate, at T = 64 where the run has it."""
    if "n_windows" not in metrics.get(KEY, {}):
        return []
    found = SinkMetrics.read(metrics, KEY)
    if found is None:
        return []
    if found.sink_rate_64 is not None:
        return [("sink rate (first token > 0.3, T = 64)", found.sink_rate_64)]
    return [(f"sink rate (first token > 0.3, T = {found.length})", found.sink_rate)]
