"""The report's anisotropy stage: reads the capture's ``AnisotropyTap`` and writes the
"anisotropy" section of metrics.json (no forward pass of its own)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from geomlens.analyses.anisotropy.compute import (
    EMPTY,
    SAMPLE,
    AnisotropyTap,
    LayerResult,
    layer_results,
    share_interval,
)
from geomlens.analyses.anisotropy.figures import glance_figure
from geomlens.analyses.base import StageRequest
from geomlens.corpus import Windows
from geomlens.io.progress import Step
from geomlens.models.view import ModelView
from geomlens.pipeline.taps import filled_tap
from geomlens.reporting.figures import save_later
from geomlens.runs.runfolder import RunFolder
from geomlens.stats import DecompositionAccumulator
from geomlens.stats.rounding import sig

MIN_COSINE = 0.05
"""Layers whose E[cos] is under this are left out of the claims' medians (a share of, or a
ratio to, a number near 0 says nothing)."""


def layer_record(r: LayerResult) -> dict[str, Any]:
    return {
        "layer": r.layer,
        "pair_cosine": sig(r.cosine),
        "top_dims": [{"dim": i, "cc": sig(v)} for i, v in r.top_dims],
        "top1_share": sig(r.top1_share),
        "top3_share": sig(r.top3_share),
        "standardised_cosine": sig(r.standardised),
        "standardised_top_dims": [{"dim": i, "cc": sig(v)} for i, v in r.standardised_top_dims],
        "sample_cosine": sig(r.sample_cosine),
    }


def anisotropy_metrics(tap: AnisotropyTap) -> dict[str, Any]:
    """The "anisotropy" section of metrics.json."""
    rows = layer_results(tap)
    # the embedding output left out, and layers whose E[cos] is near 0 (a share of it, or
    # a ratio to it, says nothing there)
    inner = [r for r in rows if r.layer > 0 and r.cosine >= MIN_COSINE]
    shares = [r.top3_share for r in inner]
    ci = share_interval(tap, [r.layer for r in inner])
    ratios = [r.standardised / r.cosine for r in inner]
    return {
        "pairs": "every ordered pair of tokens from different windows (exact streamed sums)",
        "standardised_on": f"a fixed sample of {int((tap.keys.numpy() < EMPTY).sum())} "
        f"tokens (at most {SAMPLE}) with the corpus's exact mean and variance",
        "layers": [layer_record(r) for r in rows],
        "top3_share_median": None if not shares else sig(float(np.median(shares))),
        "top3_share_low": None if ci is None else sig(ci[0]),
        "top3_share_high": None if ci is None else sig(ci[1]),
        "standardised_ratio_median": None if not ratios else sig(float(np.median(ratios))),
        "layers_judged": len(inner),
    }


@dataclass(frozen=True)
class AnisotropyStage:
    """The stage: the capture's statistics -> metrics.json's "anisotropy"."""

    step: Step

    def __call__(
        self, folder: RunFolder, view: ModelView, windows: Windows, acc: DecompositionAccumulator
    ) -> None:
        self.step("anisotropy and rogue dimensions")
        tap = filled_tap(folder, "anisotropy", AnisotropyTap(view))
        found = anisotropy_metrics(tap)
        folder.merge_metrics("anisotropy", found)
        save_later(
            glance_figure(found["layers"], view.name),
            folder.path / "figures" / "anisotropy_glance.png",
        )


def anisotropy_stage(request: StageRequest, step: Step) -> AnisotropyStage:
    """The report's anisotropy stage."""
    return AnisotropyStage(step)
