"""The causal checks' registration. No report stage: ``geomlens intervene`` runs them (the
report's cost is not yet measured against them); the section shows wherever a run holds
their numbers."""

from __future__ import annotations

from geomlens.analyses.base import AnalysisEntry
from geomlens.analyses.interventions.claims import intervention_claims
from geomlens.analyses.interventions.section import SECTION
from geomlens.analyses.interventions.summary import intervene_lines

ENTRY = AnalysisEntry(
    "interventions",
    writes=("interventions",),
    section=SECTION,
    title="causal checks",
    command="intervene",
    summary=intervene_lines,
    claims=intervention_claims,
    glossary={
        "held_out": "Windows measured after each edit, from documents the estimation "
        "windows do not hold.",
        "n_controls": "Random control draws per check.",
        "neighbour": "Attention mass at |q - k| from 1 to 4, mean over layers and heads.",
        "attention_bins": "Attention mass at |q - k| = 0, 1, 2-4 and 5 or more.",
        "loss_beats_controls": "Whether the edit's loss rise is over the controls' 95th "
        "percentile and at least twice their median.",
        "neighbour_beats_controls": "Whether the edit's neighbour-attention fall is beyond "
        "the controls' 5th percentile and at least twice their median's size.",
        "top_tokens_kept": "Of the unedited readout's 10 top tokens, how many the edited "
        "readout keeps.",
    },
)
