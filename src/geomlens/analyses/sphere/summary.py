"""What the sphere analyses say in brief: finishing lines and headline."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from geomlens.analyses.sphere.schema import SphereMetrics
from geomlens.runs.runfolder import Run

if TYPE_CHECKING:
    pass

Pairs = list[tuple[str, Any]]


def sphere_lines(run: Run) -> list[str]:
    m = SphereMetrics.of(run.metrics)
    if m is None:
        return [f"sphere analyses written to {run.path} (no sphere section in metrics.json)"]
    traj, top, err = m.trajectory, m.top_tokens, m.identity.max_rel_err
    absent = m.not_available or {}
    lines = [
        f"sphere analyses written to {run.path} (metrics.json, sphere_*.json, figures/)",
        f"  identity: {absent.get('identity')}"
        if err is None
        else f"  identity max_rel_err {err:.2e} ({m.readout})",
        f"  top tokens: {absent.get('top_tokens')}"
        if top is None
        else f"  top tokens by norm: {top.norm.top[:5]}",
    ]
    if traj is None:
        return [*lines, f"  logit lens: {absent.get('trajectory')}"]
    pairs = zip(traj.tokens, traj.first_top1, strict=True)
    return [
        *lines,
        f"  prompt {m.prompt!r} -> {traj.prediction!r}; first top-1 layer per position:",
        "  " + ", ".join(f"{t!r}:{f}" for t, f in pairs),
    ]


def sphere_headline(metrics: dict[str, Any]) -> Pairs:
    """The layer-norm identity's error and the logit lens's prediction."""
    sphere = SphereMetrics.of(metrics)
    if sphere is None:
        return []
    absent = sphere.not_available or {}
    traj = sphere.trajectory
    return [
        (
            "layer-norm identity, max relative error",
            absent.get("identity", sphere.identity.max_rel_err),
        ),
        ("logit-lens prediction", absent.get("trajectory") if traj is None else traj.prediction),
    ]
