"""The in-process engine: the capture loop of ``geomlens.capture`` in this process."""

from __future__ import annotations

from typing import TYPE_CHECKING

from geomlens.capture.capture import CaptureConfig, capture_windows
from geomlens.engines.threads import torch_threads

if TYPE_CHECKING:
    from geomlens.corpus import Windows
    from geomlens.engines import EngineConfig
    from geomlens.io.runfolder import RunFolder
    from geomlens.models.view import ModelView
    from geomlens.stats import DecompositionAccumulator


def capture_local(
    view: ModelView,
    windows: Windows,
    config: CaptureConfig,
    folder: RunFolder,
    engine: EngineConfig,
    *,
    progress: bool = True,
    checkpoint_every_s: float = 30.0,
) -> tuple[DecompositionAccumulator, dict[str, float]]:
    """Run ``capture_windows`` here, with ``engine.threads`` torch threads if given."""
    activations = None if engine.activations_dir is None else engine.activations_location(folder)
    with torch_threads(engine.threads):
        return capture_windows(
            view,
            windows,
            config,
            folder,
            progress=progress,
            checkpoint_every_s=checkpoint_every_s,
            activations=activations,
        )
