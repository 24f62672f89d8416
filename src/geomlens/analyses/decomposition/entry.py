"""The decomposition's registration (see ``analyses/base.py``, ``AnalysisEntry``)."""

from __future__ import annotations

from geomlens.analyses.base import AnalysisEntry
from geomlens.analyses.decomposition.claims import position_claims
from geomlens.analyses.decomposition.schema import published_section
from geomlens.analyses.decomposition.section import SECTION
from geomlens.analyses.decomposition.sequential import RULE
from geomlens.analyses.decomposition.step import check_decomposable, decomposition_stage
from geomlens.analyses.decomposition.summary import (
    decompose_lines,
    decomposition_headline,
    decomposition_run_figures,
)

ENTRY = AnalysisEntry(
    "decomposition",
    writes=("decomposition",),
    section=SECTION,
    stage=decomposition_stage,
    title="position and context",
    command="decompose",
    summary=decompose_lines,
    headline=decomposition_headline,
    figures=decomposition_run_figures,
    saved={"spiral": "decomposition_spiral"},
    claims=position_claims,
    published=published_section,
    stacks={"decomposition": "encoder"},
    check=check_decomposable,
    contexts_rule=RULE,
)
