"""Every bounded quantity of a run keeps its bounds, in its value and in both ends of its
interval: a walk over metrics.json's per-layer decomposition rows (both views of position
0, the view with the outlier windows) and their intervals."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

UNIT = (0.0, 1.0)
BOUNDS: dict[str, tuple[float, float]] = {
    **dict.fromkeys(("share_pos", "share_ctx", "share_resid"), UNIT),
    **dict.fromkeys(
        (
            "pos_low_freq",
            "pos_low_freq_corrected",
            "pos_low_freq_noise",
            "pos_low_freq_energy",
            "pos_low_freq_energy_noise",
            "pos_explained",
            "rel_norm_pos_centred",
        ),
        UNIT,
    ),
    **dict.fromkeys(
        (
            "coherence_max",
            "coherence_mean",
            "coherence_max_corrected",
            "coherence_mean_corrected",
            "coherence_max_noise",
            "coherence_random_max",
            "coherence_random_mean",
            "incoherence_max",
            "incoherence_mean",
            "incoherence_mean_corrected",
            "incoherence_mean_noise",
            "incoherence_random",
            "ctx_cos_within",
            "ctx_cos_between",
        ),
        UNIT,
    ),
    "ctx_cluster_ari": (-1.0, 1.0),
    **dict.fromkeys(
        (
            "pos_stable_rank",
            "pos_stable_rank_corrected",
            "pos_stable_rank_noise",
            "pos_rank_margin",
        ),
        (1.0, math.inf),
    ),
    **dict.fromkeys(
        (
            "pos_rank",
            "pos_rank95",
            "pos_rank95_corrected",
            "pos_rank95_noise",
            "pos_rank_corrected",
            "pos_noise_share",
            "pos_eigen_floor",
            "pos_gram_negative_share",
            "pos_smoothness",
            "pos_smoothness_corrected",
            "rel_norm_pos",
        ),
        (0.0, math.inf),
    ),
}
"""Each per-layer key's documented bounds (docs/decomposition.md, "Numbers per layer"). The
noise-corrected low-frequency energy is left out: it reads the unbiased K, whose share may
leave [0, 1] by its noise (docs/claims.md)."""

SLACK = 1e-9
"""Rounding allowed past a bound (values are stored to 8 significant digits)."""


def views(dec: dict[str, Any]) -> Iterator[tuple[str, list[dict[str, Any]], dict[str, Any]]]:
    """(name, layer rows, intervals) of every view a decomposition section holds."""
    yield "primary", dec.get("layers") or [], dec.get("intervals") or {}
    other = dec.get("other_view") or {}
    yield "other view", other.get("layers") or [], other.get("intervals") or {}
    kept = dec.get("with_outliers") or {}
    yield "with outliers", kept.get("layers") or [], kept.get("intervals") or {}


def out_of_bounds(metrics: dict[str, Any]) -> list[str]:
    """Every bounded value or interval end outside its bounds, named."""
    found = []
    for name, rows, intervals in views(metrics["decomposition"]):
        per_layer = intervals.get("layers") or {}
        for row in rows:
            ends = per_layer.get(str(row["layer"])) or {}
            for key, (low, high) in BOUNDS.items():
                values = [("value", row.get(key))]
                ends_of = ends.get(key) or (None, None)
                values += list(zip(("low end", "high end"), ends_of, strict=True))
                for what, value in values:
                    if isinstance(value, (int, float)) and not (
                        low - SLACK <= value <= high + SLACK
                    ):
                        found.append(f"{name}, layer {row['layer']}: {key} {what} {value}")
    return found


def test_every_bound_holds_in_a_report(minilm_report: Path) -> None:
    metrics = json.loads((minilm_report / "metrics.json").read_text())
    rows = metrics["decomposition"]["layers"]
    assert rows and any(k in rows[0] for k in BOUNDS)
    assert out_of_bounds(metrics) == []


def test_the_walk_finds_a_value_out_of_its_bounds() -> None:
    row = {"layer": 2, "share_pos": 1.2, "pos_stable_rank_corrected": 0.83}
    intervals = {"layers": {"2": {"pos_stable_rank_corrected": [0.35, 1.3]}}}
    found = out_of_bounds({"decomposition": {"layers": [row], "intervals": intervals}})
    assert found == [
        "primary, layer 2: share_pos value 1.2",
        "primary, layer 2: pos_stable_rank_corrected value 0.83",
        "primary, layer 2: pos_stable_rank_corrected low end 0.35",
    ]
