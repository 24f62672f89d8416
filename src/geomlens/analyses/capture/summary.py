"""What a capture alone says: its finishing lines, headline and variance-share figure."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from geomlens.analyses.capture.schema import CaptureLayer, CaptureMetrics
from geomlens.reporting import interactive
from geomlens.runs.runfolder import Run

if TYPE_CHECKING:
    import plotly.graph_objects as go

Pairs = list[tuple[str, Any]]


def _median_row(rows: list[CaptureLayer]) -> CaptureLayer:
    return rows[len(rows) // 2]


def capture_lines(run: Run) -> list[str]:
    timing = run.manifest.get("timing", {})
    lines = [f"capture written to {run.path}"]
    if "tokens" in timing:  # absent when a resumed run found its statistics already saved
        lines.append(f"  {timing['tokens']:.0f} tokens at {timing['tokens_per_s']:.0f} tokens/s")
    return lines


def capture_headline(metrics: dict[str, Any]) -> Pairs:
    """The capture's variance shares at the middle layer (a run without a decomposition)."""
    capture = CaptureMetrics.of(metrics)
    if metrics.get("decomposition") or capture is None:
        return []
    mid = _median_row(capture.layers)
    return [
        (f"share_pos, layer {mid.layer}", mid.share_pos),
        (f"share_pos, layer {mid.layer} (position 0 skipped)", mid.share_pos_skip_first),
    ]


def view_name(skip_first: bool) -> str:
    return "position 0 skipped" if skip_first else "all positions"


def capture_figures(capture: CaptureMetrics) -> dict[str, go.Figure]:
    """Variance shares per layer, both views of position 0, from the capture's numbers."""
    import plotly.graph_objects as go

    views = []
    for skip in (False, True):
        rows = [{"layer": r.layer, **r.shares(skip)} for r in capture.layers]
        views.append((view_name(skip), rows))
    return {"shares": go.Figure(interactive.shares(views))}


def capture_run_figures(folder: Path, metrics: dict[str, Any]) -> dict[str, go.Figure]:
    """The capture's shares (a run without a decomposition, which draws its own)."""
    capture = CaptureMetrics.of(metrics)
    if "decomposition" in metrics or capture is None:
        return {}
    return capture_figures(capture)
