"""The massive-activation analysis's registration."""

from __future__ import annotations

from geomlens.analyses.base import AnalysisEntry, TapSpec
from geomlens.analyses.massive.claims import massive_claims
from geomlens.analyses.massive.compute import MassiveTap
from geomlens.analyses.massive.section import SECTION
from geomlens.analyses.massive.step import massive_stage

ENTRY = AnalysisEntry(
    "massive",
    writes=("massive",),
    section=SECTION,
    stage=massive_stage,
    title="massive activations",
    taps={"massive": TapSpec(MassiveTap)},
    claims=massive_claims,
    glossary={
        "median_abs": "The median |h[t, i]| over every coordinate of the layer's hidden states "
        "(a histogram of log2 |h|, 128 bins per octave).",
        "top1_abs": "A window's largest |h[t, i]|, averaged over the windows.",
        "top2_abs": "A window's second largest |h[t, i]|, averaged over the windows.",
        "top3_abs": "A window's third largest |h[t, i]|, averaged over the windows.",
        "top1_over_median": "top-1 |h| over the median |h| (massive, by Sun and co-authors' rule: "
        "over 100 and about 1,000 x the median).",
        "massive_dims": "Feature dimensions whose largest |h| passes Sun et al.'s rule.",
    },
)
