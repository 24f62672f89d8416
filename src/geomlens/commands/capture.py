"""``geomlens capture``, and ``CaptureRunConfig``, the config every capturing command's
config extends (the run itself is ``pipeline.run``)."""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from geomlens.capturing.capture import CaptureConfig
from geomlens.commands.options import (
    DEFAULTS,
    RUN_OPTIONS,
    add_capture_options,
    capture_options,
    configs,
    finished,
    folder_for,
)
from geomlens.commands.result import Result, result_of
from geomlens.engines import EngineConfig
from geomlens.io.runfolder import Run
from geomlens.models.view import ModelView
from geomlens.pipeline import run as pipeline
from geomlens.pipeline.request import RunRequest
from geomlens.reporting.figure_level import FigureLevel


def run_capture(config: CaptureConfig, out: str | Path, **kwargs: Any) -> Run:
    """``geomlens capture``: stream the corpus through the model into one run folder
    (``kwargs``: ``RunRequest``'s fields: view, progress, engine, figures, ...)."""
    return pipeline.run(RunRequest("capture", config, out, **kwargs))


C = TypeVar("C", bound="CaptureRunConfig")


@dataclass(frozen=True)
class CaptureRunConfig:
    """What ``geomlens capture`` runs; every command that captures first extends it.

    Attributes:
        capture: what is captured (model, corpus, windows, layers, device, dtype, ...).
        engine: where the capture runs (this process, or Ray).
        out: the run folder.
        progress: show progress bars.
        checkpoint_every: seconds between saves of resumable progress.
        figures: which figures are drawn ("all", "interactive": no static PNGs, "none").
    """

    capture: CaptureConfig
    engine: EngineConfig
    out: str | Path
    progress: bool = DEFAULTS.progress
    checkpoint_every: float = DEFAULTS.checkpoint_every
    figures: FigureLevel = DEFAULTS.figures

    command: ClassVar[str] = "capture"
    """The command, for the default run folder ``runs/<command>-<model>``."""

    @classmethod
    def of(cls: type[C], arguments: Mapping[str, Any]) -> C:
        """The config of the Python API's keyword arguments (the command line's options
        under the same names: ``capture_options``, then the command's own)."""
        capture, engine = configs(arguments)
        shared = {"capture", "engine", *RUN_OPTIONS}
        own = {f.name: arguments[f.name] for f in dataclasses.fields(cls) if f.name not in shared}
        return cls(
            capture=capture,
            engine=engine,
            **{name: arguments[name] for name in RUN_OPTIONS if name != "out"},
            out=folder_for(cls.command, arguments["out"], arguments["model"]),
            **own,
        )

    def result(self, runner: Callable[..., Run], view: ModelView | None, **own: Any) -> Result:
        """The ``Result`` of ``runner`` (``run_capture``, ``run_decompose``, ...) called on
        this config, the command's ``own`` arguments and ``view``."""
        done = runner(
            self.capture,
            self.out,
            view=view,
            progress=self.progress,
            checkpoint_every_s=self.checkpoint_every,
            engine=self.engine,
            figures=self.figures,
            **own,
        )
        return result_of(self.command, done)


def run(config: CaptureRunConfig, *, view: ModelView | None = None) -> Result:
    """``geomlens capture`` (and ``geomlens.capture(...)``); ``view`` reuses a model
    already loaded for ``config.capture.model``."""
    return config.result(run_capture, view)


HELP = "stream a corpus through a model into statistics"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_capture_options(parser)


def main(args: argparse.Namespace) -> int:
    return finished(run(CaptureRunConfig.of(capture_options(args))))
