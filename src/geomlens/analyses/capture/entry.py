"""The capture's registration: its finishing lines, headline and figures."""

from __future__ import annotations

from geomlens.analyses.base import AnalysisEntry
from geomlens.analyses.capture.summary import capture_headline, capture_lines, capture_run_figures

ENTRY = AnalysisEntry(
    "capture",
    writes=("capture",),
    command="capture",
    summary=capture_lines,
    headline=capture_headline,
    figures=capture_run_figures,
)
