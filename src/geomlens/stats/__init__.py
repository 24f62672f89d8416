"""Mergeable accumulators: ``update(batch)``, ``merge(other)``, ``finalize()``.

Nothing here imports a model; the same code runs in-process, per GPU or per worker.
"""

from geomlens.stats.base import Accumulator, CapturedBatch
from geomlens.stats.decomposition import (
    DecompositionAccumulator,
    DecompositionStats,
    NonFiniteError,
)

__all__ = [
    "Accumulator",
    "CapturedBatch",
    "DecompositionAccumulator",
    "DecompositionStats",
    "NonFiniteError",
]
