"""The attention analyses' plotly figures for a run (where attention splits)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from geomlens.analyses.attention.schema import AttentionMetrics
from geomlens.reporting import interactive

if TYPE_CHECKING:
    import plotly.graph_objects as go

Pairs = list[tuple[str, Any]]


def attention_run_figures(folder: Path, metrics: dict[str, Any]) -> dict[str, go.Figure]:
    """Where the model's attention splits (``attention_parts``)."""
    import plotly.graph_objects as go

    attention = AttentionMetrics.of(metrics)
    if attention is None or not attention.parts:
        return {}
    blocks = [(b.layer, b.parts, b.share) for b in attention.parts]
    return {"attention_parts": go.Figure(interactive.attention_parts(blocks))}
