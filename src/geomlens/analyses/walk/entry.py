"""The walk analyses' registration."""

from __future__ import annotations

from geomlens.analyses.base import AnalysisEntry, TapSpec
from geomlens.analyses.walk.claims import walk_claims
from geomlens.analyses.walk.refactor import AttentionTap
from geomlens.analyses.walk.section import SECTION
from geomlens.analyses.walk.step import kernel_windows, walk_stage
from geomlens.analyses.walk.summary import walk_headline, walk_lines, walk_run_figures

ENTRY = AnalysisEntry(
    "walk",
    writes=("walk",),
    section=SECTION,
    stage=walk_stage,
    title="movement through embedding space",
    taps={"attention": TapSpec(AttentionTap, kernel_windows)},
    command="walk",
    summary=walk_lines,
    headline=walk_headline,
    figures=walk_run_figures,
    saved={"similarity_cos": "walk_similarity_cos", "similarity_dot": "walk_similarity_dot"},
    claims=walk_claims,
    stacks={"walk": "encoder, then the decoder (walk.decoder) and its cross-attention"},
)
