"""``geomlens sphere``: layer norm and the hypersphere (Molina 2023, "Traveling Words");
the analysis step is ``step.py`` beside it. See docs/sphere.md."""

from __future__ import annotations

import argparse
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from geomlens.analyses import registry
from geomlens.analyses.result import Result, run_result
from geomlens.analyses.sphere.compute import NormTap
from geomlens.analyses.sphere.step import (
    DEFAULT_PROMPT,
    SphereAnalysis,
    check_probe_layers,
    check_prompt,
    identity_windows,
    load_nouns,
)
from geomlens.capturing.capture import CaptureConfig
from geomlens.config.options import (
    add_capture_options,
    add_options,
    command_option,
    command_options,
    finished,
    parse_layers,
)
from geomlens.config.run import CaptureRunConfig
from geomlens.io.progress import StepLines
from geomlens.models.facts import check_before_loading
from geomlens.models.loading import load_configured
from geomlens.models.view import ModelView
from geomlens.pipeline import run as pipeline
from geomlens.pipeline.taps import tap_factory
from geomlens.runs.runfolder import Run


def run_sphere(
    config: CaptureConfig,
    out: str | Path,
    *,
    nouns: str | Path | None = None,
    prompt: str = DEFAULT_PROMPT,
    layers: Sequence[int] | None = None,
    **kwargs: Any,
) -> Run:
    """Capture, then the sphere analyses: identity, orientation, top tokens, heads, FFN, lens.

    Args:
        config: the capture config.
        out: the run folder.
        nouns: a file of probe nouns (None: the packaged list).
        prompt: the prompt of the logit lens and the FFN contributions.
        layers: blocks whose heads and FFN rows are probed (None: first, middle, last).
        **kwargs: ``RunRequest``'s fields (view, progress, checkpoint_every_s, ...).
    """
    words = load_nouns(nouns)
    probe = None if layers is None else sorted({int(x) for x in layers})
    check_probe_layers(config.model, kwargs.get("view"), probe)
    if kwargs.get("view") is None:  # the prompt and the layers are checked before the capture
        config.validate()

        def check(model: ModelView) -> None:  # on the files' facts, before the weights load
            check_probe_layers(config.model, model, probe)
            check_prompt(model, prompt)

        check_before_loading(config.model, check, config.revision)
        kwargs["view"] = load_configured(config)
    check_probe_layers(config.model, kwargs["view"], probe)
    check_prompt(kwargs["view"], prompt)
    options = {
        "nouns": None if nouns is None else str(nouns),
        "nouns_sha256": hashlib.sha256("\n".join(words).encode()).hexdigest(),
        "prompt": prompt,
        "probe_layers": probe,
    }
    step = StepLines("sphere", kwargs.get("progress", True))
    request = registry.run_request(
        "sphere",
        config,
        out,
        options=options,
        analysis=SphereAnalysis(config, words, prompt, probe, step),
        taps=tap_factory({"norms": (NormTap, identity_windows())}),
        **kwargs,
    )
    return pipeline.run(request)


@dataclass(frozen=True)
class SphereConfig(CaptureRunConfig):
    """What ``geomlens sphere`` runs: ``CaptureRunConfig``'s fields, and

    Attributes:
        nouns: a file of probe nouns, one per line (None: the packaged list).
        prompt: the prompt of the logit lens (None: ``DEFAULT_PROMPT``).
        probe_layers: blocks whose heads and FFN rows are probed (None: first, middle,
            last).
    """

    nouns: str | Path | None = command_option(
        None, metavar="FILE", help="probe nouns, one per line"
    )
    prompt: str | None = command_option(None, metavar="TEXT", help="prompt of the logit lens")
    probe_layers: Sequence[int] | None = command_option(
        None,
        parse_layers,
        help="blocks whose heads and FFN rows are probed (default: first, middle, last)",
    )

    command: ClassVar[str] = "sphere"


def run(config: SphereConfig, *, view: ModelView | None = None) -> Result:
    """``geomlens sphere`` (and ``geomlens.sphere(...)``)."""
    return run_result(
        config,
        run_sphere,
        view,
        nouns=None if config.nouns is None else str(config.nouns),
        prompt=config.prompt if config.prompt is not None else DEFAULT_PROMPT,
        layers=None if config.probe_layers is None else tuple(config.probe_layers),
    )


HELP = "layer norm and the hypersphere (Molina 2023)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The capture options, then the sphere's own (``SphereConfig``'s)."""
    add_capture_options(parser)
    add_options(parser, SphereConfig)


def main(args: argparse.Namespace) -> int:
    return finished(run(SphereConfig.of(command_options(args, SphereConfig))))
