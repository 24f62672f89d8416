"""Each arm's effect against its controls: the numbers metrics.json keeps, and the rule the
claims apply.

The rule (the issue's, for every check): an arm's effect beats its controls when, in the
claim's direction, it is beyond the 95th percentile of the control draws' effects and at
least twice the median control effect's size. The effect's interval is a paired bootstrap
over held-out windows.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from geomlens.analyses.interventions.checks import ArmResult
from geomlens.stats.intervals import interval, percentiles, resamples
from geomlens.stats.rounding import sig

Array = npt.NDArray[np.float64]

MIN_WINDOWS = 8
"""Fewer held-out windows than this: no check is decided (an interval over windows of so
few says little)."""

MIN_CONTROLS = 3
"""Fewer control draws than this: no check is decided (no spread to judge against)."""


def effect_interval(per_window: Array, seed: int) -> dict[str, Any]:
    """The mean of a per-window effect with a 95% bootstrap interval over windows."""
    x = np.asarray(per_window, dtype=np.float64)
    draws = x[resamples(x.size, seed)].mean(1)
    lo, hi = percentiles(draws)
    return interval(float(x.mean()), lo, hi, "bootstrap over held-out windows", x.size)


def beats_controls(effect: float, controls: Array, sign: int) -> bool:
    """Whether ``sign * effect`` is beyond the 95th percentile of ``sign * controls`` and at
    least twice the size of their median."""
    c = sign * np.asarray(controls, dtype=np.float64)
    e = sign * effect
    return bool(e > np.percentile(c, 95) and e >= 2 * abs(float(np.median(c))))


def spread(controls: Array) -> dict[str, Any]:
    """The control draws' effects: median, 5th and 95th percentiles, each draw."""
    c = np.asarray(controls, dtype=np.float64)
    return {
        "median": sig(float(np.median(c))),
        "p05": sig(float(np.percentile(c, 5))),
        "p95": sig(float(np.percentile(c, 95))),
        "draws": [sig(float(v)) for v in c],
    }


def arm_record(arm: ArmResult, seed: int) -> dict[str, Any]:
    """One arm's numbers for metrics.json."""
    found: dict[str, Any] = {
        "loss": effect_interval(arm.loss, seed),
        "neighbour": effect_interval(arm.neighbour, seed + 1),
    }
    if arm.ari is not None:
        found["ari"] = sig(arm.ari)
    if arm.top_kept is not None:
        found["top_tokens_kept"] = int(arm.top_kept)
    return found


def controls_record(controls: list[ArmResult]) -> dict[str, Any]:
    """The controls' spread of each measure."""
    found = {
        "loss": spread(np.array([c.loss.mean() for c in controls])),
        "neighbour": spread(np.array([c.neighbour.mean() for c in controls])),
    }
    aris = [c.ari for c in controls if c.ari is not None]
    if aris:
        found["ari"] = spread(np.array(aris))
    return found


def check_record(result: dict[str, Any], seed: int) -> dict[str, Any]:
    """A check's section of metrics.json: its arms' effects with intervals, the controls'
    spread, and whether each arm's loss, neighbour-attention and ARI effects beat the
    controls (rising loss, falling neighbour attention, falling ARI)."""
    if "arms" not in result:
        return {
            "reason": result["reason"],
            **({"detail": result["detail"]} if "detail" in result else {}),
        }
    controls: list[ArmResult] = result["controls"]
    out: dict[str, Any] = {"detail": result.get("detail", {}), "n_controls": len(controls)}
    if "seconds" in result:
        out["seconds"] = sig(result["seconds"], 3)
    out["controls"] = controls_record(controls) if controls else None
    arms = {}
    for name, arm in result["arms"].items():
        rec = arm_record(arm, seed)
        if controls:
            loss_c = np.array([c.loss.mean() for c in controls])
            near_c = np.array([c.neighbour.mean() for c in controls])
            rec["loss_beats_controls"] = beats_controls(float(arm.loss.mean()), loss_c, +1)
            rec["neighbour_beats_controls"] = beats_controls(
                float(arm.neighbour.mean()), near_c, -1
            )
            aris = [c.ari for c in controls if c.ari is not None]
            if arm.ari is not None and aris:
                rec["ari_beats_controls"] = beats_controls(arm.ari, np.array(aris), -1)
            rec["loss_interval_clear"] = bool(rec["loss"]["low"] > float(np.percentile(loss_c, 95)))
            rec["neighbour_interval_clear"] = bool(
                rec["neighbour"]["high"] < float(np.percentile(near_c, 5))
            )
        arms[name] = rec
    out["arms"] = arms
    return out
