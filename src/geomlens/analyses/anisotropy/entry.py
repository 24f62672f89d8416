"""The anisotropy analysis's registration."""

from __future__ import annotations

from geomlens.analyses.anisotropy.claims import anisotropy_claims
from geomlens.analyses.anisotropy.compute import AnisotropyTap
from geomlens.analyses.anisotropy.section import SECTION
from geomlens.analyses.anisotropy.step import anisotropy_stage
from geomlens.analyses.base import AnalysisEntry, TapSpec

ENTRY = AnalysisEntry(
    "anisotropy",
    writes=("anisotropy",),
    section=SECTION,
    stage=anisotropy_stage,
    title="anisotropy and rogue dimensions",
    taps={"anisotropy": TapSpec(AnisotropyTap)},
    claims=anisotropy_claims,
    glossary={
        "pair_cosine": "E[cos] between hidden states of random token pairs from different "
        "windows (Ethayarajh's anisotropy).",
        "top3_share": "The 3 largest per-dimension contributions CC_i = E[u_i v_i / "
        "(|u| |v|)] over E[cos] (Timkey & van Schijndel's rogue dimensions).",
        "standardised_cosine": "E[cos] after standardising each dimension with the corpus's "
        "mean and variance, on a fixed sample of tokens.",
    },
)
