"""``geomlens decompose``: the position/context analysis of one captured run
(its step: ``step.py`` beside it)."""

from __future__ import annotations

import argparse
import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from geomlens.analyses import registry
from geomlens.analyses.base import StageRequest
from geomlens.analyses.result import Result, run_result
from geomlens.capturing.capture import CaptureConfig
from geomlens.config.options import (
    add_capture_options,
    add_options,
    command_option,
    command_options,
    finished,
)
from geomlens.config.run import CaptureRunConfig
from geomlens.io.progress import StepLines
from geomlens.models.view import ModelView
from geomlens.pipeline import run as pipeline
from geomlens.runs.runfolder import Run


def run_decompose(
    config: CaptureConfig, out: str | Path, *, skip_first: bool = False, **kwargs: Any
) -> Run:
    """Capture (with second moments) and analyse the position/context decomposition."""
    if not config.second_moment:
        config = dataclasses.replace(config, second_moment=True)
    progress = kwargs.get("progress", True)
    stages = StageRequest(config, None, None, 0, skip_first, progress, [])
    analysis = registry.command_steps("decompose", stages, StepLines("decompose", progress))
    request = registry.run_request(
        "decompose", config, out, options={"skip_first": skip_first}, analysis=analysis, **kwargs
    )
    return pipeline.run(request)


@dataclass(frozen=True)
class DecomposeConfig(CaptureRunConfig):
    """What ``geomlens decompose`` runs: ``CaptureRunConfig``'s fields, and

    Attributes:
        skip_first: the primary view leaves position 0 out (both views are computed).
    """

    skip_first: bool = command_option(
        False, help="leave position 0 out of every number (both views are computed and kept)"
    )

    command: ClassVar[str] = "decompose"


def run(config: DecomposeConfig, *, view: ModelView | None = None) -> Result:
    """``geomlens decompose`` (and ``geomlens.decompose(...)``)."""
    return run_result(config, run_decompose, view, skip_first=config.skip_first)


HELP = "position/context decomposition of the hidden states"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The capture options, then the decomposition's own (``DecomposeConfig``'s)."""
    add_capture_options(parser)
    add_options(parser, DecomposeConfig)


def main(args: argparse.Namespace) -> int:
    return finished(run(DecomposeConfig.of(command_options(args, DecomposeConfig))))
