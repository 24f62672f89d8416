"""Cheng et al.'s claim: a high-dimensional phase in the middle layers of language models."""

from __future__ import annotations

from typing import Any

from geomlens.analyses.intrinsic_dimension.schema import KEY, IdMetrics
from geomlens.reporting.claims import Claim, judge, text
from geomlens.reporting.guards import Guard

CHENG = "Cheng et al. 2025"

MIDDLE_PHASE = "cheng.middle_high_dimension"
"""The claim's id (the section quotes its record)."""

CHENG_SCOPE = (
    "pretrained autoregressive (decoder-only) transformer language models: the paper's five "
    "models on three corpora (arXiv 2405.15471); Valeriani et al. 2023 saw the same peak in "
    "protein language models and image transformers. Encoder-only models are outside it"
)


def too_few_windows(n: int, least: int) -> Guard | None:
    """Fewer windows than TwoNN needs for a profile over layers (``compute.MIN_WINDOWS``)."""
    if n >= least:
        return None
    return Guard(
        "few windows",
        f"{n} windows are too few for TwoNN to tell the layers apart (at least {least} are "
        "needed: its spread on a planted 5-dimensional sample is 15% of the dimension at "
        "128 points); run with --contexts "
        f"{least} or more",
    )


def id_claims(metrics: dict[str, Any], model: dict[str, Any]) -> list[Claim]:
    """The middle-phase claim, decided from the run's profile."""
    found = IdMetrics.read(metrics, KEY) if "n_windows" in metrics.get(KEY, {}) else None
    phase = None if found is None else found.phase
    number = None if phase is None else phase.number
    low = None if phase is None else phase.low
    high = None if phase is None else phase.high
    shown = text(number, ".2f", low=low, high=high)
    if phase is not None and number is not None:
        shown += (
            f" (peak {phase.peak:.1f} at layer {phase.peak_layer}; ends {phase.early:.1f} "
            f"and {phase.late:.1f})"
        )
    claim = Claim(
        MIDDLE_PHASE,
        "Language models pass through a high-intrinsic-dimension phase in their middle layers",
        CHENG,
        "largest TwoNN dimension over the middle third of depth minus the larger of the mean "
        "dimensions of the first and last sixth > 0, its 95% bootstrap interval (over windows, "
        "shared by the layers) above 0",
        shown,
        "",
        number,
        low,
        high,
        threshold=0.0,
        interval="bootstrap over windows (the same draws at every layer)",
        published="Cheng et al.: the ID peak sits in the middle of depth in all five models and "
        "three corpora (their Figure 1); ID tens of dimensions against thousands of features",
        scope=CHENG_SCOPE,
        threshold_source="the paper states a peak, not a size: any excess beyond the interval",
    )
    outside = (
        "an encoder-only model: Cheng et al. measure autoregressive language models"
        if model.get("is_encoder")
        else None
    )
    fired = [] if found is None else [too_few_windows(found.n_windows, found.min_windows)]
    missing = "no intrinsic-dimension profile (a region of depth holds no captured layer)"
    return [judge(claim, True, missing, fired, outside)]
