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
    traj = m.trajectory
    pairs = zip(traj.tokens, traj.first_top1, strict=True)
    return [
        f"sphere analyses written to {run.path} (metrics.json, sphere_*.json, figures/)",
        f"  identity max_rel_err {m.identity.max_rel_err:.2e} ({m.readout})",
        f"  top tokens by norm: {m.top_tokens.norm.top[:5]}",
        f"  prompt {m.prompt!r} -> {traj.prediction!r}; first top-1 layer per position:",
        "  " + ", ".join(f"{t!r}:{f}" for t, f in pairs),
    ]


def sphere_headline(metrics: dict[str, Any]) -> Pairs:
    """The layer-norm identity's error and the logit lens's prediction."""
    sphere = SphereMetrics.of(metrics)
    if sphere is None:
        return []
    return [
        ("layer-norm identity, max relative error", sphere.identity.max_rel_err),
        ("logit-lens prediction", sphere.trajectory.prediction),
    ]
