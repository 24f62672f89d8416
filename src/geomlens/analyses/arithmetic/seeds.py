"""The spread of the addition study's numbers over seeds.

One model per seed is trained, evaluated and measured alike; the study's result is the
distribution of each number over those seeds, summarised by its smallest, median and
largest value, mean and sample standard deviation. A finding is one that holds for every
seed, not for the one a machine happened to round its way to.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

SPREAD_KEYS = ("n", "min", "median", "max", "mean", "sd")

ACCURACY_KEYS = (
    "accuracy_in_range",
    "accuracy_out_of_range",
    "accuracy_shorter",
    "accuracy_longer",
)
"""Per-seed accuracy means that get a spread."""

GEOMETRY_KEYS = (
    "share_pos",
    "pos_rank",
    "pos_low_freq",
    "pos_smoothness",
    "untrained_cos_within",
    "untrained_cos_across",
)
"""Per-layer geometry numbers that get a spread."""


def spread(values: Iterable[float | None]) -> dict[str, float | int | None]:
    """n, min, median, max, mean and sample standard deviation (ddof 1) of the values
    that are not None or nan; every statistic is None when none are left, ``sd`` is None
    for a single value."""
    kept = np.array(
        [float(v) for v in values if v is not None and not math.isnan(float(v))], dtype=float
    )
    if kept.size == 0:
        return {"n": 0, "min": None, "median": None, "max": None, "mean": None, "sd": None}
    return {
        "n": int(kept.size),
        "min": float(kept.min()),
        "median": float(np.median(kept)),
        "max": float(kept.max()),
        "mean": float(kept.mean()),
        "sd": float(kept.std(ddof=1)) if kept.size > 1 else None,
    }


def side_means(
    accuracy: Mapping[int, float], train_range: Sequence[int]
) -> tuple[float | None, float | None]:
    """(mean accuracy over lengths shorter than the training range, mean over longer
    ones); None where there are none."""
    lo, hi = train_range
    shorter = [a for n, a in accuracy.items() if n < lo]
    longer = [a for n, a in accuracy.items() if n > hi]
    return (
        float(np.mean(shorter)) if shorter else None,
        float(np.mean(longer)) if longer else None,
    )


def seed_spread(runs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The spread over seeds of one kind of model's numbers.

    Args:
        runs: per seed the section ``analyses.arithmetic.command`` writes: ``steps``, ``stopped``,
            ``accuracy_by_length`` (length -> accuracy), the ``ACCURACY_KEYS`` and
            ``geometry`` (per measured length, ``layers`` with the ``GEOMETRY_KEYS``).

    Returns:
        ``seeds``, ``criterion_met`` (how many stopped on the target), ``steps``, each
        accuracy key, ``accuracy_by_length`` per length, and ``geometry`` per measured
        length and layer, each a ``spread``.
    """
    lengths = sorted({n for r in runs for n in r["accuracy_by_length"]}, key=int)
    out: dict[str, Any] = {
        "seeds": len(runs),
        "criterion_met": sum(r["stopped"] == "target" for r in runs),
        "steps": spread(r["steps"] for r in runs),
    }
    for key in ACCURACY_KEYS:
        out[key] = spread(r[key] for r in runs)
    out["accuracy_by_length"] = {
        n: spread(r["accuracy_by_length"].get(n) for r in runs) for n in lengths
    }
    geometry = []
    for i, first in enumerate(runs[0]["geometry"]):
        layers = []
        for j, row in enumerate(first["layers"]):
            entry: dict[str, Any] = {"layer": row["layer"]}
            for key in GEOMETRY_KEYS:
                entry[key] = spread(r["geometry"][i]["layers"][j][key] for r in runs)
            layers.append(entry)
        geometry.append({"operand_length": first["operand_length"], "layers": layers})
    out["geometry"] = geometry
    return out
