"""``geomlens intervene``: the causal checks on one model; the analysis step is ``step.py``
beside it."""

from __future__ import annotations

import argparse
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, ClassVar

from geomlens.analyses import registry
from geomlens.analyses.interventions.checks import CHECKS
from geomlens.analyses.interventions.step import (
    CONTROLS,
    HELD_OUT,
    InterventionsAnalysis,
    parse_checks,
)
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
from geomlens.errors import GeomlensError
from geomlens.models.view import ModelView
from geomlens.pipeline import run as pipeline
from geomlens.runs.runfolder import Run

HELP = "causal checks: edits of the residual stream against random controls"


def _positive(name: str, value: int, least: int) -> None:
    if value < least:
        raise GeomlensError(f"--{name} must be at least {least} (got {value}).")


def run_intervene(
    config: CaptureConfig,
    out: str | Path,
    *,
    checks: tuple[str, ...] = CHECKS,
    held_out: int = HELD_OUT,
    controls: int = CONTROLS,
    skip_first: bool = True,
    view: ModelView | None = None,
    **kwargs: Any,
) -> Run:
    """Capture the estimation windows (with second moments: the controls are drawn from
    each layer's covariance), then every chosen check on ``held_out`` other windows.

    Args:
        checks: the checks run (``checks.CHECKS``).
        held_out: held-out windows measured.
        controls: random control draws per check.
        skip_first: estimate the positional part without position 0 (decoders).
        **kwargs: ``RunRequest``'s fields (progress, checkpoint_every_s, ...).
    """
    _positive("held-out", held_out, 1)
    _positive("controls", controls, 1)
    config = replace(config, second_moment=True)
    options = {
        "checks": list(checks),
        "held_out": held_out,
        "controls": controls,
        "skip_first": skip_first,
    }
    analysis = InterventionsAnalysis(config, checks, held_out, controls, skip_first)
    request = registry.run_request(
        "intervene", config, out, options=options, analysis=analysis, view=view, **kwargs
    )
    return pipeline.run(replace(request, judge=registry.judged))


@dataclass(frozen=True)
class InterveneConfig(CaptureRunConfig):
    """What ``geomlens intervene`` runs: ``CaptureRunConfig``'s fields, and

    Attributes:
        checks: "all" or a comma-separated subset of the checks.
        held_out: held-out windows measured.
        controls: random control draws per check.
    """

    checks: str = command_option("all", metavar="LIST", help=f"'all' or some of {','.join(CHECKS)}")
    held_out: int = command_option(HELD_OUT, int, metavar="N", help="held-out windows measured")
    controls: int = command_option(CONTROLS, int, metavar="N", help="random controls per check")

    command: ClassVar[str] = "intervene"


def run(config: InterveneConfig, *, view: ModelView | None = None) -> Result:
    """``geomlens intervene``."""
    return run_result(
        config,
        run_intervene,
        view,
        checks=parse_checks(config.checks),
        held_out=config.held_out,
        controls=config.controls,
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The capture options, then the checks' own (``InterveneConfig``'s)."""
    add_capture_options(parser)
    add_options(parser, InterveneConfig)


def main(args: argparse.Namespace) -> int:
    return finished(run(InterveneConfig.of(command_options(args, InterveneConfig))))
