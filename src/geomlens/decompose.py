"""``geomlens decompose``: the position/context analysis of one captured run.

Joins capture, the pure analyses and the figures: both views of position 0 are computed
(the chosen one is primary), numbers go to ``metrics.json`` under "decomposition", the
first 64 singular values of each positional part to ``decomposition_spectra.json``, and
figures to ``figures/``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from geomlens.analyses.decomposition import LayerDecomposition, analyse_layers
from geomlens.capture.capture import CaptureConfig
from geomlens.corpus import Windows
from geomlens.models.view import ModelView
from geomlens.pipeline import run_command
from geomlens.report import decomposition_figures as figs
from geomlens.runfolder import Run, RunFolder, write_json
from geomlens.stats import DecompositionAccumulator


def layer_rows(results: list[LayerDecomposition]) -> list[dict[str, Any]]:
    """metrics.json rows: every number but the spectrum (which goes to a side file)."""
    rows = []
    for r in results:
        row = r.to_dict()
        row.pop("pos_singular_values")
        rows.append(row)
    return rows


def write_figures(
    folder: Path, acc: DecompositionAccumulator, results: list[LayerDecomposition], windows: Windows
) -> list[Path]:
    """Every decomposition figure of the primary view of position 0."""
    skip = results[0].skip_first
    stats = [acc.finalize(layer, skip_first=skip) for layer in acc.layers]
    labels = np.array([windows.label_names[i] for i in windows.labels])
    out = folder / "figures"
    return [
        figs.save(figs.shares_figure(results), out / "decomposition_shares.png"),
        figs.save(figs.spectra_figure(results), out / "decomposition_spectra.png"),
        figs.save(figs.spiral_figure(stats), out / "decomposition_spiral.png"),
        figs.save(figs.spiral_figure_interactive(stats), out / "decomposition_spiral.html"),
        figs.save(figs.gram_figure(stats), out / "decomposition_gram.png"),
        figs.save(figs.context_figure(stats, labels), out / "decomposition_contexts.png"),
    ]


def analyse_decomposition(skip_first: bool, seed: int):  # type: ignore[no-untyped-def]
    """The analysis step of ``run_command`` for ``decompose``."""

    def analyse(
        folder: RunFolder, view: ModelView, windows: Windows, acc: DecompositionAccumulator
    ) -> None:
        labels = np.asarray(windows.labels)
        primary = analyse_layers(acc, labels, skip_first=skip_first, seed=seed)
        other = analyse_layers(acc, labels, skip_first=not skip_first, seed=seed)
        folder.merge_metrics(
            "decomposition",
            {
                "skip_first": skip_first,
                "layers": layer_rows(primary),
                "other_view": {"skip_first": not skip_first, "layers": layer_rows(other)},
            },
        )
        write_json(
            folder.path / "decomposition_spectra.json",
            {
                ("skip_first" if r.skip_first else "all_positions"): {
                    str(x.layer): list(x.pos_singular_values) for x in rs
                }
                for rs in (primary, other)
                for r in rs[:1]
            },
        )
        write_figures(folder.path, acc, primary, windows)

    return analyse


def run_decompose(
    config: CaptureConfig, out: str | Path, *, skip_first: bool = False, **kwargs: Any
) -> Run:
    """Capture (with second moments) and analyse the position/context decomposition."""
    if not config.second_moment:
        config = CaptureConfig(
            **{**config.to_dict(), "layers": config.layers, "second_moment": True}
        )
    return run_command(
        "decompose",
        config,
        out,
        options={"skip_first": skip_first},
        analyse=analyse_decomposition(skip_first, config.seed),
        **kwargs,
    )
