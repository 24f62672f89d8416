"""The attention sinks' registration."""

from __future__ import annotations

from geomlens.analyses.base import AnalysisEntry, TapSpec
from geomlens.analyses.sinks.claims import sink_claims
from geomlens.analyses.sinks.compute import SinkTap
from geomlens.analyses.sinks.schema import KEY
from geomlens.analyses.sinks.section import SECTION
from geomlens.analyses.sinks.step import sink_stage, sink_windows
from geomlens.analyses.sinks.summary import sink_headline

ENTRY = AnalysisEntry(
    "sinks",
    writes=(KEY,),
    section=SECTION,
    stage=sink_stage,
    title="attention sinks",
    taps={"sinks": TapSpec(SinkTap, sink_windows)},
    headline=sink_headline,
    claims=sink_claims,
    stacks={KEY: "encoder"},
    glossary={
        "sink_position": "The key position whose importance (mean attention from the queries "
        "that see it, averaged over heads) is largest in most windows.",
        "sink_importance": "Mean over windows of the head-mean importance at each window's "
        "sink position.",
        "first_token_importance": "Importance of key position 0: the mean attention the "
        "queries give the first token, averaged over heads and windows.",
    },
)
