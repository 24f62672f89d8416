"""``RunRequest``: everything one run of the pipeline needs, as one object."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from geomlens.capturing.capture import CaptureConfig
from geomlens.capturing.taps import TapsFactory
from geomlens.config.figure_level import FigureLevel
from geomlens.corpus import Windows
from geomlens.engines import EngineConfig
from geomlens.io.runfolder import RunFolder
from geomlens.models.view import ModelView
from geomlens.stats import DecompositionAccumulator


class Analysis(Protocol):
    """What runs after the capture: reads the statistics (and the taps the capture filled,
    ``pipeline.taps.filled_tap``), writes its metrics.json section(s) and figures."""

    def __call__(
        self,
        folder: RunFolder,
        view: ModelView,
        windows: Windows,
        acc: DecompositionAccumulator,
    ) -> None: ...


Judge = Callable[[dict[str, Any], dict[str, Any]], dict[str, Any]]
"""(metrics, the manifest's model record) -> the sections the run's numbers decide (its
claims, a paper's numbers beside them), merged into metrics.json after the analysis."""

Check = Callable[[str, CaptureConfig], None]
"""(command, config) -> None, or a ``GeomlensError`` before the model loads."""


@dataclass(frozen=True)
class RunRequest:
    """One command's run: what to capture, where, and what runs on the capture.

    Attributes:
        command: the command ("capture", "decompose", "sphere", "walk", "report"); it names
            the run in its config and says which metrics.json sections a finished run holds.
        config: what is captured (model, corpus, windows, layers, device, dtype, ...).
        out: the run folder.
        options: the command's own options, recorded in the run's config (its identity).
        analysis: what runs on the finished capture (None: the capture alone).
        view: a model already loaded for ``config.model`` (None: loaded when needed).
        progress: progress bars on stderr.
        checkpoint_every_s: seconds between saves of resumable progress.
        engine: where the capture runs (this process, or Ray); not part of the identity.
        sections: the metrics.json sections a finished run holds (None: the command's, from
            the analyses' registry).
        taps: the statistics the capture fills besides the decomposition (``capture.taps``).
        figures: which figures the analyses draw (``config.figure_level.FigureLevel``).
        judge: decides the claims from the numbers written (None: none).
        check: refuses a config the analysis cannot analyse, before the model loads.
    """

    command: str
    config: CaptureConfig
    out: str | Path
    options: dict[str, Any] = field(default_factory=dict)
    analysis: Analysis | None = None
    view: ModelView | None = None
    progress: bool = True
    checkpoint_every_s: float = 30.0
    engine: EngineConfig = field(default_factory=EngineConfig)
    sections: tuple[str, ...] | None = None
    taps: TapsFactory | None = None
    figures: FigureLevel = "all"
    judge: Judge | None = None
    check: Check | None = None

    def identity(self) -> dict[str, Any]:
        """The run's config as its run folder records it (what makes two runs the same)."""
        options = dict(self.options)
        if self.figures != "all":  # the default leaves earlier runs' configs as they were
            options["figures"] = self.figures
        return {**self.config.to_dict(), "command": self.command, **options}
