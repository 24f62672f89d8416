"""``geomlens capture``: the corpus streamed through the model into statistics (the run
itself is ``pipeline.run``; its config is ``config.run.CaptureRunConfig``)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from geomlens.analyses import registry
from geomlens.analyses.result import Result, run_result
from geomlens.capturing.capture import CaptureConfig
from geomlens.config.options import (
    add_capture_options,
    capture_options,
    finished,
)
from geomlens.config.run import CaptureRunConfig
from geomlens.models.view import ModelView
from geomlens.pipeline import run as pipeline
from geomlens.runs.runfolder import Run


def run_capture(config: CaptureConfig, out: str | Path, **kwargs: Any) -> Run:
    """``geomlens capture``: stream the corpus through the model into one run folder
    (``kwargs``: ``RunRequest``'s fields: view, progress, engine, figures, ...)."""
    return pipeline.run(registry.run_request("capture", config, out, **kwargs))


def run(config: CaptureRunConfig, *, view: ModelView | None = None) -> Result:
    """``geomlens capture`` (and ``geomlens.capture(...)``); ``view`` reuses a model
    already loaded for ``config.capture.model``."""
    return run_result(config, run_capture, view)


HELP = "stream a corpus through a model into statistics"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_capture_options(parser)


def main(args: argparse.Namespace) -> int:
    return finished(run(CaptureRunConfig.of(capture_options(args))))
