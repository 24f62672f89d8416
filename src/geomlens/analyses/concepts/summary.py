"""What the concept-space tests say in brief: finishing lines, headline and plotly figures."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from geomlens.analyses.concepts import step as concepts_stage
from geomlens.reporting import interactive
from geomlens.runs.runfolder import Run

if TYPE_CHECKING:
    import plotly.graph_objects as go

Pairs = list[tuple[str, Any]]


def concepts_lines(run: Run) -> list[str]:
    return [
        f"concept-space tests written to {run.path} (metrics.json, predictions.jsonl,",
        "  sweep_table.md, top10.md, schemes/, figures/)",
        *concepts_stage.summary_lines(run),
    ]


def concepts_headline(metrics: dict[str, Any]) -> Pairs:
    """The baseline's accuracies and the best scheme's headline ratio."""
    concepts = metrics.get("concepts") or {}
    if not concepts.get("baseline"):
        return []
    base = concepts["baseline"]
    found: Pairs = [(f"baseline {k}", base[k]) for k in ("acc", "acc_norm", "acc_bytes")]
    if concepts.get("ranking"):
        best = concepts["ranking"][0]
        key = concepts.get("headline", "normalised_vs_acc")
        found.append((f"best scheme ({best}), {key}", concepts["schemes"][best].get(key)))
    return found


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


def concepts_run_figures(folder: Path, metrics: dict[str, Any]) -> dict[str, go.Figure]:
    concepts = metrics.get("concepts") or {}
    if not concepts or "unsupported" in concepts:
        return {}
    return concepts_figures(concepts)
