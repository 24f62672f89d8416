"""The analysis steps that run on a finished capture: one module per analysis.

Each step is an ``Analysis``: called with the run folder, the loaded model, the windows and
the capture's statistics, it computes its numbers, merges them into ``metrics.json`` and
draws its figures. A command's run (``pipeline.run``) calls one; the report's stages
(``reporting/staged.py``) call each registered analysis's in turn.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from geomlens.capturing.capture import CaptureConfig
from geomlens.corpus import Windows
from geomlens.io.progress import Step
from geomlens.io.runfolder import RunFolder
from geomlens.models.view import ModelView
from geomlens.stats import DecompositionAccumulator


class Analysis(Protocol):
    """What runs after the capture: reads the statistics (and the taps the capture filled,
    ``analyses.taps.filled_tap``), writes its metrics.json section(s) and figures."""

    def __call__(
        self,
        folder: RunFolder,
        view: ModelView,
        windows: Windows,
        acc: DecompositionAccumulator,
    ) -> None: ...


@dataclass(frozen=True)
class StageRequest:
    """What the report's stages read besides the run folder, the model, the windows and
    the statistics."""

    config: CaptureConfig
    text: str | None
    task: str | None
    limit: int
    skip_first: bool
    progress: bool
    words: list[str]


StageFactory = Callable[[StageRequest, Step], Analysis]
"""A registered report stage: the request and the step reporter -> the stage's analysis."""
