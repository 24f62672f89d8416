"""The sphere analyses' registration."""

from __future__ import annotations

from geomlens.analyses.base import AnalysisEntry, TapSpec
from geomlens.analyses.sphere.claims import sphere_claims
from geomlens.analyses.sphere.compute import NormTap
from geomlens.analyses.sphere.section import SECTION
from geomlens.analyses.sphere.step import identity_windows, sphere_stage
from geomlens.analyses.sphere.summary import sphere_headline, sphere_lines

ENTRY = AnalysisEntry(
    "sphere",
    writes=("sphere",),
    section=SECTION,
    stage=sphere_stage,
    title="layer norm and the hypersphere",
    taps={"norms": TapSpec(NormTap, identity_windows)},
    command="sphere",
    summary=sphere_lines,
    headline=sphere_headline,
    saved={"trajectory": "sphere_trajectory"},
    claims=sphere_claims,
    stacks={"sphere": "encoder"},
)
