"""Figures of the concept-space tests: schemes against the model's own baseline.

``schemes_bar`` draws one horizontal bar per scheme (its accuracy over the baseline's,
with the 95% bootstrap interval), best first, a line at 1 where a scheme does as well as
reading the text, one at chance and one where the choices alone (no context) land.
``geomlens.reporting.figures.save`` writes it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from geomlens.reporting.figures import new_figure

if TYPE_CHECKING:
    from matplotlib.figure import Figure

MAX_BARS = 30


def schemes_bar(
    results: Sequence[dict[str, Any]],
    *,
    baseline_acc: float,
    chance: float | None = None,
    no_context: float | None = None,
    title: str = "",
    key: str = "normalised_vs_acc",
    max_bars: int = MAX_BARS,
) -> Figure:
    """Normalised accuracy per scheme with its 95% interval (results sorted best first).

    Args:
        results: scheme results, each with "label" and "summary" holding ``key`` and
            ``key + "_ci"``; already ranked.
        baseline_acc: the baseline accuracy the scores are divided by (shown in the title).
        chance: mean of 1/n_choices over the items; drawn as chance / baseline_acc.
        no_context: accuracy of the choices scored without any context (the control a
            scheme should beat); drawn as no_context / baseline_acc.
        title: the figure's title (task and model).
        key: the summary entry drawn.
        max_bars: at most this many schemes (the best).
    """
    from matplotlib.patches import Patch

    rows = [r for r in results if r["summary"].get(key) is not None][:max_bars]
    n = max(1, len(rows))
    fig = new_figure(9.0, 1.2 + 0.28 * n)
    ax = fig.subplots()
    y = np.arange(len(rows))[::-1]
    vals = np.array([r["summary"][key] for r in rows], dtype=float)
    ci = np.array([r["summary"][f"{key}_ci"] for r in rows], dtype=float).reshape(-1, 2)
    colours = ["tab:blue" if r["label"].startswith("P:") else "tab:orange" for r in rows]
    if len(rows):
        err = np.abs(np.stack([vals - ci[:, 0], ci[:, 1] - vals]))
        ax.barh(y, vals, xerr=err, color=colours, ecolor="0.3", capsize=2, height=0.7)
        ax.set_yticks(y, [r["label"] for r in rows], fontsize=7, family="monospace")
    ax.axvline(1.0, color="k", lw=1, ls="--", label="baseline (reads the text)")
    if chance is not None and baseline_acc > 0:
        ax.axvline(chance / baseline_acc, color="0.5", lw=1, ls=":", label="chance")
    if no_context is not None and baseline_acc > 0:
        ax.axvline(no_context / baseline_acc, color="tab:red", lw=1, ls="-.", label="choices alone")
    ax.set_xlabel(f"accuracy / baseline acc ({baseline_acc:.3f}), 95% bootstrap CI")
    handles, _ = ax.get_legend_handles_labels()
    handles += [
        Patch(color="tab:blue", label="test 1: pyramidal"),
        Patch(color="tab:orange", label="test 2: similarity"),
    ]
    ax.legend(handles=handles, fontsize=7, loc="lower right")
    ax.set_title(title or "concept-space tests", fontsize=10)
    ax.set_xlim(left=0)
    return fig
