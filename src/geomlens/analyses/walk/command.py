"""``geomlens walk``: movement through embedding space (Singh, 2023) on one model; the
analysis step is ``step.py`` beside it."""

from __future__ import annotations

import argparse
import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from geomlens.analyses import registry
from geomlens.analyses.result import Result, run_result
from geomlens.analyses.walk.kernels import N_OFFSETS
from geomlens.analyses.walk.refactor import AttentionTap
from geomlens.analyses.walk.step import (
    KERNEL_WINDOWS,
    TOP_K,
    WalkAnalysis,
    check_generate,
    default_text,
    encode_text,
    read_text_file,
)
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
from geomlens.io.files import utf8_text
from geomlens.io.progress import StepLines
from geomlens.models.facts import check_before_loading
from geomlens.models.loading import load_configured
from geomlens.models.view import ModelView
from geomlens.pipeline import run as pipeline
from geomlens.pipeline.taps import tap_factory
from geomlens.runs.runfolder import Run

GENERATE_NEEDS = (
    "--generate needs a decoder-only model or an encoder-decoder; {name} is an encoder "
    "(drop --generate)."
)


def _load_eager(config: CaptureConfig) -> ModelView:
    """The model of ``config``, loaded with eager attention (attention weights are read)."""
    config.validate()
    return load_configured(config, attention="eager")


def _check_numbers(generate: int, top_k: int, kernel_windows: int) -> None:
    """Refuse a negative ``generate`` and ``top_k`` or ``kernel_windows`` below 1."""
    if generate < 0:
        raise GeomlensError(f"--generate must be 0 or more (got {generate}).")
    if top_k < 1 or kernel_windows < 1:
        raise GeomlensError("top_k and kernel_windows must be at least 1.")


def run_walk(
    config: CaptureConfig,
    out: str | Path,
    *,
    text: str | None = None,
    generate: int = 0,
    top_k: int = TOP_K,
    kernel_windows: int = KERNEL_WINDOWS,
    view: ModelView | None = None,
    **kwargs: Any,
) -> Run:
    """Capture, then similarity maps, walks, kernels and the refactoring check.

    Args:
        config: the capture config (its seed also seeds sampled decoding).
        out: the run folder.
        text: the text walked (default: ``default_text()``).
        generate: tokens to generate in the decoding walks (0: none; decoder-only models and
            encoder-decoders, whose decoder generates).
        top_k: neighbours of each vector kept.
        kernel_windows: corpus windows for kernels and the refactoring check.
        view: a model already loaded for ``config.model`` with eager attention.
        **kwargs: ``RunRequest``'s fields (progress, checkpoint_every_s, ...).
    """
    _check_numbers(generate, top_k, kernel_windows)
    source = "given" if text is not None else "default"
    text = default_text() if text is None else text

    def check(model: ModelView) -> None:  # refuse a bad text before the capture
        if generate and model.is_encoder and not model.is_seq2seq:
            raise GeomlensError(GENERATE_NEEDS.format(name=model.name))
        ids, _ = encode_text(model, text)
        check_generate(model, len(ids), generate)

    if view is None:  # the files' facts first: a refusal comes before the weights load
        config.validate()
        check_before_loading(config.model, check, config.revision)
    view = view or _load_eager(config)
    check(view)
    options = {
        "text_source": source,
        "text_sha256": hashlib.sha256(text.encode()).hexdigest(),
        "generate": generate,
        "top_k": top_k,
        "kernel_windows": kernel_windows,
        "kernel_offsets": N_OFFSETS,
    }
    step = StepLines("walk", kwargs.get("progress", True))
    request = registry.run_request(
        "walk",
        config,
        out,
        options=options,
        analysis=WalkAnalysis(text, generate, top_k, kernel_windows, config.seed, step),
        view=view,
        taps=tap_factory({"attention": (AttentionTap, kernel_windows)}),
        **kwargs,
    )
    return pipeline.run(request)


@dataclass(frozen=True)
class WalkConfig(CaptureRunConfig):
    """What ``geomlens walk`` runs: ``CaptureRunConfig``'s fields, and

    Attributes:
        text: the text walked (None: ``default_text()``).
        text_file: read the text from this file instead (wins over ``text``).
        generate: tokens generated in the decoding walks (0: none).
    """

    text: str | None = command_option(
        None, group="source", help="the text walked (default: a few-shot prompt)"
    )
    text_file: str | Path | None = command_option(
        None, group="source", metavar="F", help="read the text from F"
    )
    generate: int = command_option(0, int, metavar="N", help="decoding walks of N tokens")

    command: ClassVar[str] = "walk"


def run(config: WalkConfig, *, view: ModelView | None = None) -> Result:
    """``geomlens walk`` (and ``geomlens.walk(...)``); ``view`` is loaded with eager
    attention."""
    text = config.text if config.text_file is None else read_text_file(str(config.text_file))
    if text is not None:
        utf8_text(text, "--text", "give UTF-8 text, or save it in a UTF-8 file for --text-file")
    return run_result(config, run_walk, view, text=text, generate=config.generate)


HELP = "movement through embedding space (Singh 2023)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The capture options, then the walk's own (``WalkConfig``'s)."""
    add_capture_options(parser)
    add_options(parser, WalkConfig)


def main(args: argparse.Namespace) -> int:
    return finished(run(WalkConfig.of(command_options(args, WalkConfig))))
