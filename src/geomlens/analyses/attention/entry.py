"""The attention analyses' registration: a step of ``geomlens decompose`` and of the report,
after the decomposition's."""

from __future__ import annotations

from geomlens.analyses.attention.claims import attention_claims
from geomlens.analyses.attention.section import SECTION
from geomlens.analyses.attention.step import attention_stage, check_basis_length
from geomlens.analyses.attention.summary import attention_run_figures
from geomlens.analyses.base import AnalysisEntry

ENTRY = AnalysisEntry(
    "attention",
    writes=("attention", "induction"),
    section=SECTION,
    stage=attention_stage,
    title="attention in the positional basis",
    command="decompose",
    figures=attention_run_figures,
    claims=attention_claims,
    stacks={
        "attention": "encoder",
        "induction": "decoder self-attention (the encoder reads one end-of-sequence token)",
    },
    check=check_basis_length,
    glossary={
        "qk_rank": "Rank of the head's W_QK low-rank part: ScreeNOT's count of its singular "
        "values above the optimal hard threshold.",
        "whole_low_rank_share": "Share of W_QK's squared norm in the whole fit's low-rank part.",
    },
)
