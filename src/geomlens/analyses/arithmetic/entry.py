"""The addition study's registration: a command of its own, no report stage or section
(its run is not a capture; ``geomlens arithmetic`` writes its own page of figures)."""

from __future__ import annotations

from geomlens.analyses.base import AnalysisEntry

ENTRY = AnalysisEntry("arithmetic", command="arithmetic", captures=False)
