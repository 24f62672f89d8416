"""Where a capture runs: in this process (``local``, the default) or on a Ray cluster (``ray``).

Both engines return the same decomposition accumulator (the Ray engine up to the order of
float64 additions) and the rest of the pipeline does not know which one ran. The engine is
not part of a run's identity: a run started under one engine resumes under the other.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from geomlens.engines.job import ENGINES, CaptureJob, EngineConfig

if TYPE_CHECKING:
    from geomlens.stats import DecompositionAccumulator


def capture(
    job: CaptureJob, engine: EngineConfig
) -> tuple[DecompositionAccumulator, dict[str, float]]:
    """Run ``job`` with the chosen engine: its accumulator and timing facts."""
    if engine.name == "ray":
        from geomlens.engines.ray import capture_ray

        return capture_ray(job, engine)
    from geomlens.engines.local import capture_local

    return capture_local(job, engine)


__all__ = ["ENGINES", "CaptureJob", "EngineConfig", "capture"]
