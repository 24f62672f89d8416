"""The intrinsic-dimension step: after the capture, the windows' mean-pooled states of each
captured layer (from the decomposition's sums) -> TwoNN with intervals, GRIDE across
scales, the middle-phase number; numbers to metrics.json under "intrinsic_dimension", the
profile figure to ``figures/intrinsic_dimension_profile.png``. See
docs/intrinsic_dimension.md."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from geomlens.analyses.base import StageRequest
from geomlens.analyses.intrinsic_dimension import figures
from geomlens.analyses.intrinsic_dimension.compute import (
    MIN_WINDOWS,
    Phase,
    Profile,
    phase,
    pooled,
    profile,
)
from geomlens.analyses.intrinsic_dimension.estimators import DISCARD, GRIDE_SCALES
from geomlens.analyses.intrinsic_dimension.schema import KEY, IdLayer, IdMetrics, IdPhase
from geomlens.corpus import Windows
from geomlens.io.progress import Step, quiet
from geomlens.models.view import ModelView
from geomlens.reporting.figures import drawn, rendered_in_background, save_later
from geomlens.runs.runfolder import RunFolder
from geomlens.stats import DecompositionAccumulator
from geomlens.stats.intervals import N_BOOT
from geomlens.stats.rounding import sig

POOLING = "mean over positions 1..T-1 of each window (position 0 left out)"
ESTIMATOR = (
    f"TwoNN (Facco et al. 2017; linear fit, largest {DISCARD:.0%} of ratios left out) and "
    "GRIDE (Denti et al. 2022; maximum likelihood of r_2k / r_k), geomlens's own code, "
    "checked against scikit-dimension's TwoNN"
)


def _num(x: float | None) -> float | None:
    return None if x is None or not np.isfinite(x) else sig(float(x))


def metrics_block(found: Profile, middle: Phase) -> IdMetrics:
    """The metrics.json block of a profile and its phase."""
    rows = [
        IdLayer(
            layer=layer,
            depth=sig(float(found.depth[j])),
            twonn=_num(found.twonn[j]),
            low=_num(found.low[j]),
            high=_num(found.high[j]),
            gride=[_num(g.dimension) for g in found.gride[j]],
            gride_scale=[sig(g.scale) for g in found.gride[j]],
        )
        for j, layer in enumerate(found.layers)
    ]
    return IdMetrics(
        n_windows=found.n_windows,
        pooling=POOLING,
        estimator=ESTIMATOR,
        min_windows=MIN_WINDOWS,
        gride_k=[k for k in GRIDE_SCALES if 2 * k < found.n_windows],
        layers=rows,
        phase=IdPhase(
            number=_num(middle.number),
            low=_num(middle.low),
            high=_num(middle.high),
            peak_layer=middle.peak_layer,
            peak=_num(middle.peak),
            early=_num(middle.early),
            late=_num(middle.late),
        ),
        n_boot=N_BOOT,
    )


@dataclass(frozen=True)
class IntrinsicDimensionAnalysis:
    """The step on a finished capture (an ``Analysis``)."""

    seed: int
    step: Step = quiet

    def __call__(
        self, folder: RunFolder, view: ModelView, windows: Windows, acc: DecompositionAccumulator
    ) -> None:
        self.step("intrinsic dimension")
        if acc.n_contexts < 3:
            folder.merge_metrics(KEY, {"not_measured": "fewer than 3 windows: no neighbours"})
            return
        points = {layer: pooled(acc, layer) for layer in acc.layers}
        found = profile(points, view.n_layers, self.seed)
        block = metrics_block(found, phase(found))
        folder.merge_metrics(KEY, block.to_dict())
        if drawn():
            with rendered_in_background():
                out = folder.path / "figures" / "intrinsic_dimension_profile.png"
                save_later(figures.profile_figure(block), out)


def id_stage(request: StageRequest, step: Step) -> IntrinsicDimensionAnalysis:
    """The report's intrinsic-dimension stage."""
    return IntrinsicDimensionAnalysis(request.config.seed, step)
