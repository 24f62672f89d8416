"""The causal checks at a glance: each arm's effect on the loss and on neighbour attention,
with its 95% interval over held-out windows, beside its random controls' draws and their
5-95% spread."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from geomlens.reporting.figures import new_figure

if TYPE_CHECKING:
    from matplotlib.figure import Figure

MEASURES = (("loss", "loss change (nats)"), ("neighbour", "neighbour attention change"))


def arms_of(section: dict[str, Any]) -> list[tuple[str, dict[str, Any], dict[str, Any] | None]]:
    """(arm name, its record, its check's controls) for every arm measured, in order."""
    found = []
    for record in section.get("checks", {}).values():
        for name, arm in record.get("arms", {}).items():
            found.append((name, arm, record.get("controls")))
    return found


def glance_figure(section: dict[str, Any]) -> Figure | None:
    """Two panels (loss, neighbour attention): one row per arm; the arm's effect and its
    interval in colour, each control draw a grey dot, the controls' 5-95% range a grey bar.
    None when no arm was measured."""
    arms = arms_of(section)
    if not arms:
        return None
    fig = new_figure(10, 0.45 * len(arms) + 1.4)
    axes = fig.subplots(1, 2, sharey=True)
    for ax, (key, label) in zip(axes, MEASURES, strict=True):
        for row, (_, arm, controls) in enumerate(arms):
            spread = (controls or {}).get(key)
            if spread is not None:
                ax.plot([spread["p05"], spread["p95"]], [row, row], color="0.75", lw=6)
                ax.scatter(spread["draws"], [row] * len(spread["draws"]), color="0.45", s=10)
            effect = arm[key]
            err = [[effect["value"] - effect["low"]], [effect["high"] - effect["value"]]]
            ax.errorbar(effect["value"], row, xerr=err, fmt="o", color="C3", capsize=3)
        ax.axvline(0.0, color="0.3", lw=0.8)
        ax.set_xlabel(label)
    axes[0].set_yticks(range(len(arms)), [name.replace("_", " ") for name, _, _ in arms])
    axes[0].invert_yaxis()
    fig.suptitle("edits (red, 95% interval) against random controls (grey: draws, 5-95%)")
    return fig
