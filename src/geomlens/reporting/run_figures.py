"""Plotly figures of a run folder, rebuilt from what the run saved (nothing is recomputed).

Two sources, both written by the commands themselves:

- numbers in ``metrics.json`` (and ``decomposition_spectra.json``), drawn by the builders
  of ``geomlens.reporting.interactive`` that ``report.html`` uses;
- figures the analyses saved as ``figures/<name>.plotly.json`` (3-D spiral, trajectory,
  similarity maps).

The static PNGs in ``figures/`` (Gram matrices, heatmaps, walks, ...) are matplotlib
drawings with no plotly counterpart: ``images`` lists them by name.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from geomlens.reporting import interactive

if TYPE_CHECKING:
    import plotly.graph_objects as go

SAVED = {
    "spiral": "decomposition_spiral",
    "trajectory": "sphere_trajectory",
    "similarity_cos": "walk_similarity_cos",
    "similarity_dot": "walk_similarity_dot",
}
"""Figure name -> stem of the ``figures/<stem>.plotly.json`` an analysis saves."""


def view_name(skip_first: bool) -> str:
    return "position 0 skipped" if skip_first else "all positions"


def skip_first_rows(dec: dict[str, Any]) -> list[dict[str, Any]]:
    """The decomposition's per-layer rows of the view without position 0."""
    rows: list[dict[str, Any]] = dec["layers"] if dec["skip_first"] else dec["other_view"]["layers"]
    return rows


def capture_figures(capture: dict[str, Any]) -> dict[str, go.Figure]:
    """Variance shares per layer, both views of position 0, from the capture's numbers."""
    import plotly.graph_objects as go

    views = []
    for skip in (False, True):
        suffix = "_skip_first" if skip else ""
        rows = [
            {"layer": r["layer"], **{k: r[k + suffix] for k in interactive.SHARE_COLOURS}}
            for r in capture["layers"]
        ]
        views.append((view_name(skip), rows))
    return {"shares": go.Figure(interactive.shares(views))}


def decomposition_figures(folder: Path, dec: dict[str, Any]) -> dict[str, go.Figure]:
    """Shares (both views), ranks, geometry and spectra of the decomposition."""
    import plotly.graph_objects as go

    views = [
        (view_name(dec["skip_first"]), dec["layers"]),
        (view_name(dec["other_view"]["skip_first"]), dec["other_view"]["layers"]),
    ]
    rows = skip_first_rows(dec)
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


def concepts_figures(concepts: dict[str, Any]) -> dict[str, go.Figure]:
    """Each scheme's accuracy over the baseline's, best first, with 95% intervals."""
    import plotly.graph_objects as go

    headline = concepts.get("headline", "normalised_vs_acc")
    ranking, schemes = concepts.get("ranking") or [], concepts.get("schemes") or {}
    if not ranking:
        return {}
    values = [schemes[name].get(headline) for name in ranking]
    errors = []
    for name in ranking:
        low, high = schemes[name].get(f"{headline}_ci") or (None, None)
        errors.append((low or 0.0, high or 0.0))
    bars = interactive.bars(
        ranking, values, "Accuracy over the baseline's", "normalised accuracy", errors=errors
    )
    return {"schemes": go.Figure(bars)}


def walk_figures(walk: dict[str, Any]) -> dict[str, go.Figure]:
    """Mean cosine similarity between positions per layer."""
    import plotly.graph_objects as go

    rows = walk["similarity"]["layers"]
    keys = ["mean_cos", "mean_cos_adjacent", "section_contrast"]
    present = [k for k in keys if any(k in r for r in rows)]
    title = "Similarity between positions by layer"
    return {"similarity_layers": go.Figure(interactive.per_layer(rows, present, title, "cosine"))}


def saved_figures(folder: Path) -> dict[str, go.Figure]:
    """The figures the analyses saved as plotly JSON."""
    import plotly.io

    found = {}
    for name, stem in SAVED.items():
        path = folder / "figures" / f"{stem}.plotly.json"
        if path.exists():
            found[name] = plotly.io.from_json(path.read_text(encoding="utf-8"))
    return found


def capture_run_figures(folder: Path, metrics: dict[str, Any]) -> dict[str, go.Figure]:
    """The capture's shares (a run without a decomposition, which draws its own)."""
    if "decomposition" in metrics or "capture" not in metrics:
        return {}
    return capture_figures(metrics["capture"])


def decomposition_run_figures(folder: Path, metrics: dict[str, Any]) -> dict[str, go.Figure]:
    if "decomposition" not in metrics:
        return {}
    return decomposition_figures(folder, metrics["decomposition"])


def attention_run_figures(folder: Path, metrics: dict[str, Any]) -> dict[str, go.Figure]:
    """Where the model's attention splits (``attention_parts``)."""
    import plotly.graph_objects as go

    attention = metrics.get("attention") or {}
    if not attention.get("parts"):
        return {}
    return {"attention_parts": go.Figure(interactive.attention_parts(attention["parts"]))}


def walk_run_figures(folder: Path, metrics: dict[str, Any]) -> dict[str, go.Figure]:
    return walk_figures(metrics["walk"]) if metrics.get("walk") else {}


def concepts_run_figures(folder: Path, metrics: dict[str, Any]) -> dict[str, go.Figure]:
    concepts = metrics.get("concepts") or {}
    if not concepts or "unsupported" in concepts:
        return {}
    return concepts_figures(concepts)


def images_of(folder: Path) -> dict[str, Path]:
    """The run's static PNG figures by file stem."""
    figures = folder / "figures"
    if not figures.is_dir():
        return {}
    return {p.stem: p for p in sorted(figures.glob("*.png"))}
