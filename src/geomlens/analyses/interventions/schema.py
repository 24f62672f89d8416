"""How the "interventions" section of metrics.json is read (the only module another folder
may read these numbers through).

The section holds the run's settings (held-out and estimation windows, control draws, the
layers edited), the unedited model's numbers under "base", and one record per check under
"checks": its arms' effects (loss and neighbour attention with 95% intervals over held-out
windows, ARI change, top tokens kept) and its controls' spread; or, where a check could not
run, its "reason".
"""

from __future__ import annotations

from typing import Any

SECTION = "interventions"


def section(metrics: dict[str, Any]) -> dict[str, Any] | None:
    """The run's interventions section, or None when it has none."""
    found = metrics.get(SECTION)
    return found if isinstance(found, dict) else None


def check(metrics: dict[str, Any], name: str) -> dict[str, Any] | None:
    """One check's record (None: the run did not ask for it)."""
    found = section(metrics)
    return None if found is None else found.get("checks", {}).get(name)


def arm(metrics: dict[str, Any], check_name: str, arm_name: str) -> dict[str, Any] | None:
    """One arm's record (None where the check or the arm is absent)."""
    found = check(metrics, check_name)
    return None if found is None else found.get("arms", {}).get(arm_name)


def control_threshold(spread: dict[str, Any], sign: int) -> float:
    """The rule's threshold from a control spread: the 95th percentile and twice the
    median's size, whichever is further in the claim's direction (``sign`` +1: a rise,
    -1: a fall)."""
    median = abs(float(spread["median"]))
    if sign > 0:
        return max(float(spread["p95"]), 2 * median)
    return min(float(spread["p05"]), -2 * median)
