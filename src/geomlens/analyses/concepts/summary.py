"""What the concept-space tests say in brief: finishing lines, headline and plotly figures."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from geomlens.analyses.concepts import step as concepts_stage
from geomlens.analyses.concepts.schema import ConceptsMetrics
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
    concepts = ConceptsMetrics.of(metrics)
    if concepts is None or not concepts.baseline:
        return []
    base = concepts.baseline
    found: Pairs = [
        ("baseline acc", base.acc),
        ("baseline acc_norm", base.acc_norm),
        ("baseline acc_bytes", base.acc_bytes),
    ]
    if ranked := concepts.ranked():
        best, scores = ranked[0]
        key = concepts.headline_key
        found.append((f"best scheme ({best}), {key}", scores.value(key)))
    return found


def concepts_figures(concepts: ConceptsMetrics) -> dict[str, go.Figure]:
    """Each scheme's accuracy over the baseline's, best first, with 95% intervals."""
    import plotly.graph_objects as go

    headline, ranked = concepts.headline_key, concepts.ranked()
    if not ranked:
        return {}
    values = [scores.value(headline) for _, scores in ranked]
    errors = []
    for _, scores in ranked:
        low, high = scores.interval(headline)
        errors.append((low or 0.0, high or 0.0))
    bars = interactive.bars(
        [name for name, _ in ranked],
        values,
        "Accuracy over the baseline's",
        "normalised accuracy",
        errors=errors,
    )
    return {"schemes": go.Figure(bars)}


def concepts_run_figures(folder: Path, metrics: dict[str, Any]) -> dict[str, go.Figure]:
    concepts = ConceptsMetrics.of(metrics)
    if concepts is None or concepts.unsupported is not None:
        return {}
    return concepts_figures(concepts)
