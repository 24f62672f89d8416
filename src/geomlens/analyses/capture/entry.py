"""The capture's registration: its finishing lines, headline and figures."""

from __future__ import annotations

from typing import TYPE_CHECKING

from geomlens.analyses.base import AnalysisEntry
from geomlens.analyses.capture.summary import capture_headline, capture_lines, capture_run_figures
from geomlens.errors import GeomlensError

if TYPE_CHECKING:
    from geomlens.capturing.capture import CaptureConfig


def check_contexts(command: str, config: CaptureConfig) -> None:
    """Refuse a capture of one window: its shares (position 1, context 0) would be forced
    by the arithmetic, not measured, and the commands that analyse them refuse it too."""
    if isinstance(config.contexts, int) and config.contexts < 2:
        raise GeomlensError(
            f"--contexts {config.contexts}: the capture splits hidden states into a position "
            f"and a context part by comparing windows, so {command} needs at least 2 (16 or "
            "more for intervals); use --contexts 16."
        )


ENTRY = AnalysisEntry(
    "capture",
    writes=("capture",),
    command="capture",
    summary=capture_lines,
    headline=capture_headline,
    figures=capture_run_figures,
    check=check_contexts,
)
