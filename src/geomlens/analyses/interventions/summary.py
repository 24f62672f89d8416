"""``geomlens intervene``'s finishing lines."""

from __future__ import annotations

from typing import Any

from geomlens.analyses.interventions import schema


def intervene_lines(run: Any) -> list[str]:
    """One line per arm: its loss and neighbour-attention change beside the controls'."""
    found = schema.section(run.metrics)
    if found is None:
        return []
    if "reason" in found:
        return [f"  causal checks not measured: {found['reason']}"]
    lines = [
        f"  {found['held_out']} held-out windows, {found['n_controls']} controls per check; "
        f"unedited loss {found['base']['loss']['value']:.4g}"
    ]
    for name, record in found["checks"].items():
        if "arms" not in record:
            lines.append(f"  {name}: {record.get('reason', 'not run')}")
            continue
        spread = record.get("controls") or {}
        for arm, rec in record["arms"].items():
            loss = spread.get("loss", {}).get("median")
            ctl = "" if loss is None else f" (controls median {loss:.4g})"
            lines.append(
                f"  {arm}: loss {rec['loss']['value']:+.4g}{ctl}, neighbour attention "
                f"{rec['neighbour']['value']:+.4g}"
            )
    return lines
