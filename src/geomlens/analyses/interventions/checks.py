"""The causal checks: each edit of the residual stream and its random controls, measured
on held-out windows against the unedited model.

- ``positional``: project out each layer's top-k positional directions (k its ScreeNOT
  rank) from ``start`` on; controls: random k-dimensional subspaces drawn from that
  layer's covariance.
- ``low_frequency`` / ``high_frequency``: project out the top-k directions of the
  positional part's lowest 10% of DCT frequencies over positions (its smooth part), or of
  the rest; the positional controls.
- ``context``: project out each layer's top-k context directions (k the ScreeNOT rank of
  the context part); controls as above, with that k.
- ``massive_zero`` / ``massive_mean``: set each layer's massive coordinates, at the
  positions they sit at, to zero or to their mean over the estimation windows; controls:
  as many random coordinates set to zero at the same places.
- ``final_norm``: read out through the final norm without its gain and bias (one pass,
  readout only); controls: the gain and bias with their coordinates shuffled.

Each arm's effect is the mean over held-out windows of (edited - unedited), for the loss
and for the neighbour attention (|q - k| in 1..4), paired by window.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
import torch

from geomlens.analyses.decomposition.context_clusters import encode_labels, kmeans_ari
from geomlens.analyses.interventions import directions as dirs
from geomlens.analyses.interventions.measure import Measured, measure
from geomlens.capturing.edits import Edit, project_out, set_coordinates
from geomlens.models.view import ModelView
from geomlens.stats import DecompositionAccumulator

Array = npt.NDArray[np.float64]

CHECKS = ("positional", "smoothness", "context", "massive", "final_norm")
"""The checks ``geomlens intervene --checks`` chooses from, in order."""

ARMS = {
    "positional": ("positional",),
    "smoothness": ("low_frequency", "high_frequency"),
    "context": ("context",),
    "massive": ("massive_zero", "massive_mean"),
    "final_norm": ("final_norm",),
}
"""Each check's edited arms (each measured against the check's controls)."""


@dataclass(frozen=True)
class LayerGeometry:
    """What the estimation windows say of one hidden-state layer.

    Attributes:
        layer: the hidden-state layer.
        pos: [T', d] the positional part (position 0 left out where the run skips it).
        ctx: [C, d] the context part.
        cov: [d, d] the covariance of the layer's hidden states (where the capture kept
            no second moments: that of the positional part plus that of the context part).
        position_means: [T, d] the mean state at every position (position 0 included).
    """

    layer: int
    pos: Array
    ctx: Array
    cov: Array
    position_means: Array


def geometry(
    acc: DecompositionAccumulator, layers: Sequence[int], skip_first: bool
) -> list[LayerGeometry]:
    """The ``LayerGeometry`` of each of ``layers`` from the capture's statistics."""
    found = []
    for layer in layers:
        stats = acc.finalize(layer, skip_first=skip_first)
        if stats.second_moment is not None:
            n = stats.n_contexts * len(stats.positions)
            cov = dirs.covariance(stats.second_moment, stats.mean, n)
        else:  # no second moments kept: the parts' own covariances
            cov = stats.pos.T @ stats.pos / len(stats.pos) + stats.ctx.T @ stats.ctx / len(
                stats.ctx
            )
        means = acc.pos_sum[acc.layer_index(layer)].double().cpu().numpy() / acc.n_contexts
        found.append(
            LayerGeometry(
                layer=layer,
                pos=stats.pos,
                ctx=stats.ctx,
                cov=cov,
                position_means=means,
            )
        )
    return found


@dataclass(frozen=True)
class Plan:
    """One check's arms and controls, as edits (or, for the final norm, readouts).

    Attributes:
        arms: arm name -> its edits.
        controls: one list of edits per control draw.
        detail: what the check chose (ranks, coordinates), for metrics.json.
        readouts: for the final norm: arm or control name -> ``h -> logits``.
    """

    arms: dict[str, list[Edit]]
    controls: list[list[Edit]]
    detail: dict[str, Any] = field(default_factory=dict)
    readouts: dict[str, Callable[[torch.Tensor], torch.Tensor]] = field(default_factory=dict)


def _t(x: Array) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(x))


def positional_plan(geo: list[LayerGeometry], draws: int, seed: int) -> Plan:
    ks = [dirs.rank_of(g.pos) for g in geo]
    arms = {
        "positional": [
            project_out(_t(dirs.top_directions(g.pos, k)), [g.layer])
            for g, k in zip(geo, ks, strict=True)
        ]
    }
    low, high = [], []
    for g, k in zip(geo, ks, strict=True):
        lo, hi = dirs.frequency_parts(g.pos)
        low.append(project_out(_t(dirs.top_directions(lo, k)), [g.layer]))
        high.append(project_out(_t(dirs.top_directions(hi, k)), [g.layer]))
    arms["low_frequency"], arms["high_frequency"] = low, high
    return Plan(arms, _random_controls(geo, ks, draws, seed), {"k": ks})


def _random_controls(
    geo: list[LayerGeometry], ks: list[int], draws: int, seed: int
) -> list[list[Edit]]:
    per_layer = [
        dirs.random_bases(g.cov, k, draws, seed + g.layer) for g, k in zip(geo, ks, strict=True)
    ]
    return [
        [project_out(_t(b[i]), [g.layer]) for g, b in zip(geo, per_layer, strict=True)]
        for i in range(draws)
    ]


def context_plan(geo: list[LayerGeometry], draws: int, seed: int) -> Plan:
    ks = [dirs.rank_of(g.ctx) for g in geo]
    arms = {
        "context": [
            project_out(_t(dirs.top_directions(g.ctx, k)), [g.layer])
            for g, k in zip(geo, ks, strict=True)
        ]
    }
    return Plan(arms, _random_controls(geo, ks, draws, seed + 7919), {"k": ks})


def massive_plan(geo: list[LayerGeometry], d: int, draws: int, seed: int) -> Plan:
    zero, mean, found = [], [], {}
    controls: list[list[Edit]] = [[] for _ in range(draws)]
    for g in geo:
        coords, positions = dirs.massive_coordinates(g.position_means)
        if not coords:
            continue
        found[str(g.layer)] = {"coordinates": coords, "positions": positions}
        at = tuple(positions)
        zero.append(set_coordinates(coords, 0.0, [g.layer], positions=at))
        means = g.position_means[positions][:, coords].mean(0)
        mean.append(set_coordinates(coords, _t(means), [g.layer], positions=at))
        picks = dirs.random_coordinates(d, len(coords), coords, draws, seed + g.layer)
        for i, pick in enumerate(picks):
            controls[i].append(set_coordinates(pick, 0.0, [g.layer], positions=at))
    if not found:
        return Plan({}, [], {"found": {}})
    return Plan({"massive_zero": zero, "massive_mean": mean}, controls, {"found": found})


def final_norm_plan(view: ModelView, draws: int, seed: int) -> Plan:
    from geomlens.analyses.interventions.measure import readout_logits

    norm = view.readout_norm
    if norm is None:
        return Plan({}, [], {"reason": "the model has no final norm before its readout"})
    rng = np.random.default_rng([seed, 31])
    readouts: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
        "final_norm": lambda h: readout_logits(view, h, "no-gain")
    }
    for i in range(draws):
        order = torch.from_numpy(rng.permutation(view.d_model))
        readouts[f"control_{i}"] = functools.partial(
            readout_logits, view, readout="shuffled", order=order
        )
    detail = {"bias": norm.bias is not None, "kind": norm.kind}
    return Plan({"final_norm": []}, [], detail, readouts)


def ari(m: Measured, labels: npt.NDArray[np.int64], seed: int) -> float | None:
    """The ARI of k-means on the held-out windows' last-layer context vectors against their
    labels (None with fewer than two labels)."""
    codes = encode_labels(labels, len(labels))
    if int(codes.max()) < 1:
        return None
    ctx = m.context - m.context.mean(0)
    return float(kmeans_ari(ctx, codes, seed))


@dataclass
class ArmResult:
    """One arm (or control draw) against the unedited model, per window."""

    loss: Array
    neighbour: Array
    ari: float | None = None
    top_kept: int | None = None


def make_plans(
    view: ModelView, geo: list[LayerGeometry], checks: Sequence[str], draws: int, seed: int
) -> dict[str, Plan]:
    """The plan of each chosen check (the smoothness check's is the positional plan)."""
    plans: dict[str, Plan] = {}
    for check in checks:
        if check in ("positional", "smoothness"):
            if "positional" not in plans:
                plans["positional"] = positional_plan(geo, draws, seed)
        elif check == "context":
            plans["context"] = context_plan(geo, draws, seed)
        elif check == "massive":
            plans["massive"] = massive_plan(geo, view.d_model, draws, seed)
        elif check == "final_norm":
            plans["final_norm"] = final_norm_plan(view, draws, seed)
    return plans


def run_checks(
    view: ModelView,
    ids: torch.Tensor,
    labels: npt.NDArray[np.int64],
    geo: list[LayerGeometry],
    checks: Sequence[str] = CHECKS,
    draws: int = 8,
    seed: int = 0,
    batch_size: int = 8,
) -> dict[str, Any]:
    """Every chosen check on the held-out windows ``ids`` [W, T] (labels [W]): the
    unedited model's numbers, and each arm's and control's effects per window, with each
    check's seconds (the smoothness check shares the positional check's controls: run
    after it, its seconds are its own arms')."""

    def run(edits: Sequence[Edit]) -> Measured:
        return measure(view, ids, edits, batch_size=batch_size, seed=seed)

    plans = make_plans(view, geo, checks, draws, seed)
    readouts = plans["final_norm"].readouts if "final_norm" in plans else {}
    started = time.perf_counter()
    base = measure(view, ids, (), batch_size=batch_size, seed=seed, readouts=readouts)
    base_seconds = time.perf_counter() - started
    base_ari = ari(base, labels, seed) if "context" in checks else None

    def against(m: Measured, loss: Array | None = None) -> ArmResult:
        kept = len(set(m.top_tokens.tolist()) & set(base.top_tokens.tolist()))
        return ArmResult(
            loss=(m.loss if loss is None else loss) - base.loss,
            neighbour=m.neighbour - base.neighbour,
            ari=None if base_ari is None else _minus(ari(m, labels, seed), base_ari),
            top_kept=kept,
        )

    results: dict[str, Any] = {}
    done: dict[str, list[ArmResult]] = {}
    for check in checks:
        started = time.perf_counter()
        plan = plans["positional" if check in ("positional", "smoothness") else check]
        arms = ARMS[check]
        if check == "final_norm":
            if not plan.readouts:
                results[check] = {"reason": plan.detail["reason"]}
                continue
            zero = base.neighbour * 0
            results[check] = {
                "detail": plan.detail,
                "arms": {
                    "final_norm": ArmResult(base.readout_loss["final_norm"] - base.loss, zero)
                },
                "controls": [
                    ArmResult(base.readout_loss[f"control_{i}"] - base.loss, zero)
                    for i in range(draws)
                ],
                "seconds": time.perf_counter() - started,  # its readouts ride on the base pass
            }
            continue
        if not all(plan.arms.get(a) for a in arms):
            results[check] = {"reason": "no massive coordinates were found", "detail": plan.detail}
            continue
        key = "positional" if check == "smoothness" else check
        if key not in done:  # smoothness shares the positional controls
            done[key] = [against(run(c)) for c in plan.controls]
        controls = done[key]
        results[check] = {
            "detail": plan.detail,
            "arms": {a: against(run(plan.arms[a])) for a in arms},
            "controls": controls,
            "seconds": time.perf_counter() - started,
        }
    return {"base": base, "base_ari": base_ari, "checks": results, "base_seconds": base_seconds}


def _minus(a: float | None, b: float) -> float | None:
    return None if a is None else a - b
