"""The concept-space tests' registration."""

from __future__ import annotations

from geomlens.analyses.base import AnalysisEntry
from geomlens.analyses.concepts.claims import concept_claims
from geomlens.analyses.concepts.section import SECTION
from geomlens.analyses.concepts.step import concepts_stage
from geomlens.analyses.concepts.summary import (
    concepts_headline,
    concepts_lines,
    concepts_run_figures,
)

ENTRY = AnalysisEntry(
    "concepts",
    writes=("concepts",),
    section=SECTION,
    stage=concepts_stage,
    title="concept-space tests",
    generating_only=True,
    command="concepts",
    captures=False,  # it scores a task's items; no corpus is captured
    summary=concepts_lines,
    headline=concepts_headline,
    figures=concepts_run_figures,
    claims=concept_claims,
    stacks={
        "concepts": "the encoder reads the context (or its concept vectors); the decoder "
        "scores each choice"
    },
)
