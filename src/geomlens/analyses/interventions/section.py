"""The causal checks' section of report.html: the unedited model on the held-out windows,
then each edit's effect beside its random controls."""

from __future__ import annotations

from typing import Any

from geomlens.analyses.interventions import schema
from geomlens.reporting.html import readings, table
from geomlens.reporting.section import Section
from geomlens.runs.runfolder import Run


def _effect(record: dict[str, Any] | None) -> str:
    if record is None:
        return "–"
    return f"{record['value']:.4g} [{record['low']:.4g}, {record['high']:.4g}]"


def _spread(controls: dict[str, Any] | None, key: str) -> str:
    spread = (controls or {}).get(key)
    if spread is None:
        return "–"
    return f"{spread['median']:.4g} ({spread['p05']:.4g} to {spread['p95']:.4g})"


def interventions_section(run: Run) -> str:
    found = schema.section(run.metrics)
    if found is None:
        return readings(["Not computed in this run (geomlens intervene)."])
    if "reason" in found:
        return readings([f"Not measured: {found['reason']}."])
    base = found["base"]
    lines = [
        f"{found['held_out']} held-out windows (no document shared with the "
        f"{found['estimation_windows']} estimation windows), {found['n_controls']} random "
        f"control draws per check; edited layers {found['layers'][0]}..{found['layers'][-1]}.",
        f"Unedited {found['loss_kind']} loss {base['loss']['value']:.4g}; attention mass at "
        f"|q - k| = 0, 1, 2-4, 5+: "
        + ", ".join(f"{v:.3f}" for v in base["attention_bins"].values())
        + ".",
        f"Controls: random subspaces drawn from {found['control_covariance']}, of each "
        "layer's dimension; random coordinates for the massive ones.",
    ]
    rows = []
    for name, record in found["checks"].items():
        if "arms" not in record:
            rows.append([name, "–", "–", "–", "–", record.get("reason", "")])
            continue
        for arm, rec in record["arms"].items():
            rows.append(
                [
                    arm,
                    _effect(rec["loss"]),
                    _spread(record["controls"], "loss"),
                    _effect(rec["neighbour"]),
                    _spread(record["controls"], "neighbour"),
                    "" if rec.get("ari") is None else f"ARI change {rec['ari']:.3g}",
                ]
            )
    header = [
        "edit",
        "loss change [95%]",
        "controls: median (5-95%)",
        "neighbour attention change [95%]",
        "controls: median (5-95%)",
        "",
    ]
    return readings(lines) + table(header, rows, keys=[None] * len(header))


SECTION = Section(
    "interventions",
    "Causal checks: edits of the residual stream against random controls",
    interventions_section,
    present=lambda run: schema.SECTION in run.metrics,
    captions={"interventions_glance": "Each edit's effect beside its random controls"},
    how={
        "interventions_glance": "a red point outside the grey bar (the controls' 5-95%) "
        "is an effect random edits of the same size do not give."
    },
)
