"""How the "anisotropy" section of metrics.json is read (what another folder may import)."""

from __future__ import annotations

from typing import Any


def anisotropy_section(metrics: dict[str, Any]) -> dict[str, Any] | None:
    """The run's "anisotropy" section (None when the run has none)."""
    found = metrics.get("anisotropy")
    return None if not found else dict(found)


def anisotropy_layers(metrics: dict[str, Any]) -> list[dict[str, Any]]:
    """Per-layer rows: layer, cosine, top_dims, top1_share, top3_share, standardised, ..."""
    return list((anisotropy_section(metrics) or {}).get("layers", []))
