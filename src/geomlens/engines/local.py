"""The in-process engine: the capture loop of ``geomlens.capture`` in this process."""

from __future__ import annotations

from typing import TYPE_CHECKING

from geomlens.capturing.capture import AT_START, capture_windows
from geomlens.engines.threads import torch_threads

if TYPE_CHECKING:
    from geomlens.engines.job import CaptureJob, EngineConfig
    from geomlens.stats import DecompositionAccumulator


def capture_local(
    job: CaptureJob, engine: EngineConfig
) -> tuple[DecompositionAccumulator, dict[str, float]]:
    """Run ``capture_windows`` here (filling ``job.taps``), with ``engine.threads`` torch
    threads if given."""
    activations = (
        None if engine.activations_dir is None else engine.activations_location(job.folder)
    )
    with torch_threads(engine.threads):
        return capture_windows(
            job.view,
            job.windows,
            job.config,
            job.folder,
            progress=job.progress,
            checkpoint_every_s=job.checkpoint_every_s,
            activations=activations,
            taps=job.taps,
            store_offset=job.store_offset or AT_START,
        )
