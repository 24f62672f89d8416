"""What the decomposition says in brief: its finishing lines, headline and plotly figures."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from geomlens.analyses.decomposition.schema import skip_first_layers
from geomlens.io.runfolder import Run
from geomlens.reporting import interactive

if TYPE_CHECKING:
    import plotly.graph_objects as go

Pairs = list[tuple[str, Any]]


def _median_row(rows: list[dict[str, Any]]) -> dict[str, Any]:
    return rows[len(rows) // 2]


def decompose_lines(run: Run) -> list[str]:
    dec = run.metrics["decomposition"]
    view = "position 0 skipped" if dec["skip_first"] else "all positions"
    lines = [
        f"decomposition written to {run.path} (metrics.json, figures/)",
        f"  layer  share_pos  share_ctx  pos_rank  ({view})",
    ]
    for row in dec["layers"]:
        lines.append(
            f"  {row['layer']:5d}  {row['share_pos']:9.3f}  {row['share_ctx']:9.3f}"
            f"  {row['pos_rank']:8d}"
        )
    return lines


def decomposition_headline(metrics: dict[str, Any]) -> Pairs:
    """Shares and positional rank at the middle layer, position 0 skipped."""
    dec = metrics.get("decomposition")
    if not dec:
        return []
    rows = dec["layers"] if dec["skip_first"] else dec["other_view"]["layers"]
    mid = _median_row(rows)
    return [
        (f"share_pos, layer {mid['layer']} (position 0 skipped)", mid["share_pos"]),
        (f"share_ctx, layer {mid['layer']} (position 0 skipped)", mid["share_ctx"]),
        (f"pos_rank, layer {mid['layer']} (position 0 skipped)", mid["pos_rank"]),
    ]


def view_name(skip_first: bool) -> str:
    return "position 0 skipped" if skip_first else "all positions"


def decomposition_figures(folder: Path, dec: dict[str, Any]) -> dict[str, go.Figure]:
    """Shares (both views), ranks, geometry and spectra of the decomposition."""
    import plotly.graph_objects as go

    views = [
        (view_name(dec["skip_first"]), dec["layers"]),
        (view_name(dec["other_view"]["skip_first"]), dec["other_view"]["layers"]),
    ]
    rows = skip_first_layers({"decomposition": dec})
    figures = {
        "shares": go.Figure(interactive.shares(views)),
        "ranks": go.Figure(
            interactive.per_layer(
                rows,
                interactive.RANK_KEYS,
                "Positional rank (position 0 skipped)",
                "rank",
            )
        ),
        "geometry": go.Figure(
            interactive.per_layer(
                rows,
                interactive.GEOMETRY_KEYS,
                "Frequency, incoherence and topic clustering (position 0 skipped)",
                "value",
            )
        ),
    }
    spectra_path = folder / "decomposition_spectra.json"
    if spectra_path.exists():
        spectra = json.loads(spectra_path.read_text(encoding="utf-8"))
        if "skip_first" in spectra:
            figures["spectra"] = go.Figure(
                interactive.spectra(
                    spectra["skip_first"], "Positional singular values (position 0 skipped)"
                )
            )
    return figures


def decomposition_run_figures(folder: Path, metrics: dict[str, Any]) -> dict[str, go.Figure]:
    if "decomposition" not in metrics:
        return {}
    return decomposition_figures(folder, metrics["decomposition"])
