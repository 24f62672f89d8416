"""How the "massive" section of metrics.json is read (what another folder may import)."""

from __future__ import annotations

from typing import Any


def massive_section(metrics: dict[str, Any]) -> dict[str, Any] | None:
    """The run's "massive" section (None when the run has none)."""
    found = metrics.get("massive")
    return None if not found else dict(found)


def massive_layers(metrics: dict[str, Any]) -> list[dict[str, Any]]:
    """Per-layer rows: layer, median, top1/2/3, ratio, massive, largest, massive_dims."""
    return list((massive_section(metrics) or {}).get("layers", []))
