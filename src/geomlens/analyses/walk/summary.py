"""What the walk analyses say in brief: finishing lines, headline and plotly figures."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from geomlens.analyses.walk import step as walk_stage
from geomlens.analyses.walk.schema import WalkMetrics
from geomlens.reporting import interactive
from geomlens.runs.runfolder import Run

if TYPE_CHECKING:
    import plotly.graph_objects as go

Pairs = list[tuple[str, Any]]


def walk_lines(run: Run) -> list[str]:
    header = f"walk written to {run.path} (metrics.json, similarity.safetensors, figures/)"
    return [header, *walk_stage.summary_lines(run)]


def walk_headline(metrics: dict[str, Any]) -> Pairs:
    """The share of heads with negative self-bias and the refactoring's error."""
    walk = WalkMetrics.of(metrics)
    if walk is None:
        return []
    return [
        ("heads with negative self-bias", walk.kernels.negative_self_bias_fraction),
        ("per-head refactoring, max relative error", walk.refactor.max_rel_err),
    ]


def walk_figures(walk: WalkMetrics) -> dict[str, go.Figure]:
    """Mean cosine similarity between positions per layer."""
    import plotly.graph_objects as go

    rows = [r.to_dict() for r in walk.similarity.layers]
    keys = ["mean_cos", "mean_cos_adjacent", "section_contrast"]
    present = [k for k in keys if any(k in r for r in rows)]
    title = "Similarity between positions by layer"
    return {"similarity_layers": go.Figure(interactive.per_layer(rows, present, title, "cosine"))}


def walk_run_figures(folder: Path, metrics: dict[str, Any]) -> dict[str, go.Figure]:
    walk = WalkMetrics.of(metrics)
    return {} if walk is None else walk_figures(walk)
