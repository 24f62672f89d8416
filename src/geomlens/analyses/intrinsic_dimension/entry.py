"""The intrinsic dimension's registration."""

from __future__ import annotations

from geomlens.analyses.base import AnalysisEntry
from geomlens.analyses.intrinsic_dimension.claims import id_claims
from geomlens.analyses.intrinsic_dimension.schema import KEY
from geomlens.analyses.intrinsic_dimension.section import SECTION
from geomlens.analyses.intrinsic_dimension.step import id_stage
from geomlens.analyses.intrinsic_dimension.summary import id_headline

ENTRY = AnalysisEntry(
    "intrinsic_dimension",
    writes=(KEY,),
    section=SECTION,
    stage=id_stage,
    title="intrinsic dimension",
    headline=id_headline,
    claims=id_claims,
    stacks={KEY: "encoder (the decomposition's windows)"},
    glossary={
        "twonn": "TwoNN intrinsic dimension of the windows' mean-pooled states at a layer "
        "(Facco and co-authors, 2017): from the ratio of each window's second to first "
        "nearest-neighbour distance.",
        "gride": "GRIDE intrinsic dimension (Denti and co-authors, 2022) at neighbourhood k: "
        "from the ratio of the 2k-th to the k-th nearest-neighbour distance.",
        "relative_depth": "layer / number of blocks: 0 is the embedding output, 1 the last block.",
    },
)
