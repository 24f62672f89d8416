"""``CaptureRunConfig``: the config every capturing command's config extends (what is
captured, where it runs, the run folder and how the run reports itself)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from geomlens.capturing.capture import CaptureConfig
from geomlens.config.figure_level import FigureLevel
from geomlens.config.options import (
    AUTO,
    DEFAULTS,
    RUN_OPTIONS,
    auto_budget,
    auto_max_contexts,
    configs,
    folder_for,
)
from geomlens.engines import EngineConfig

C = TypeVar("C", bound="CaptureRunConfig")

AUTO_OWN = ("out", "budget", "max_contexts")
"""Run options ``of`` sets itself (the run folder, and ``--contexts auto``'s bounds)."""


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
        budget: with ``auto_contexts``, the safety on the minutes of the chunks after the
            first look (None without it: a budget with fixed contexts is refused).
        max_contexts: with ``auto_contexts``, the most windows the looks capture (None
            without it).
        auto_contexts: ``--contexts auto`` (``capture.contexts`` is then the first look).
    """

    capture: CaptureConfig
    engine: EngineConfig
    out: str | Path
    progress: bool = DEFAULTS.progress
    checkpoint_every: float = DEFAULTS.checkpoint_every
    figures: FigureLevel = DEFAULTS.figures
    budget: float | None = DEFAULTS.budget
    max_contexts: int | None = DEFAULTS.max_contexts
    auto_contexts: bool = False

    command: ClassVar[str] = "capture"
    """The command, for the default run folder ``runs/<command>-<model>``."""

    @classmethod
    def of(cls: type[C], arguments: Mapping[str, Any]) -> C:
        """The config of the Python API's keyword arguments (the command line's options
        under the same names: ``capture_options``, then the command's own)."""
        capture, engine = configs(arguments)
        shared = {"capture", "engine", "auto_contexts", *RUN_OPTIONS}
        own = {f.name: arguments[f.name] for f in dataclasses.fields(cls) if f.name not in shared}
        auto = arguments["contexts"] == AUTO
        budget = auto_budget(arguments["contexts"], arguments["budget"])
        most = auto_max_contexts(arguments["contexts"], arguments["max_contexts"])
        return cls(
            capture=capture,
            engine=engine,
            **{name: arguments[name] for name in RUN_OPTIONS if name not in AUTO_OWN},
            out=folder_for(cls.command, arguments["out"], arguments["model"]),
            budget=budget if auto else None,
            max_contexts=most if auto else None,
            auto_contexts=auto,
            **own,
        )
