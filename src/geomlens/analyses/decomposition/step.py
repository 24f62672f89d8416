"""The position/context analysis of one captured run (``geomlens decompose``, the report's
first stage; attention in the positional basis is the attention folder's step, after it).

Joins the pure analyses and the figures: both views of position 0 are computed
(the chosen one is primary), numbers go to ``metrics.json`` under "decomposition", the
first 64 singular values of each positional part to ``decomposition_spectra.json`` (the
noise-free ones under ``*_corrected``), and
figures to ``figures/``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from geomlens.analyses.base import StageRequest
from geomlens.analyses.decomposition import figures as figs
from geomlens.analyses.decomposition.compute import LayerDecomposition, analyse_layers
from geomlens.analyses.decomposition.intervals import decomposition_intervals
from geomlens.capturing.capture import CaptureConfig
from geomlens.corpus import Windows
from geomlens.errors import GeomlensError
from geomlens.io.progress import Step, quiet, step_bar
from geomlens.io.runfolder import RunFolder, write_json
from geomlens.models.view import ModelView
from geomlens.reporting.figures import save_in_background
from geomlens.stats import DecompositionAccumulator


def layer_rows(results: list[LayerDecomposition]) -> list[dict[str, Any]]:
    """metrics.json rows: every number but the spectrum (which goes to a side file)."""
    rows = []
    for r in results:
        row = r.to_dict()
        row.pop("pos_singular_values")
        row.pop("pos_singular_values_corrected")
        rows.append(row)
    return rows


def decomposition_figures(
    acc: DecompositionAccumulator, results: list[LayerDecomposition], windows: Windows
) -> list[tuple[Any, str]]:
    """Every decomposition figure of the primary view of position 0, with its file name.

    The figures read no second moments: leaving their d x d copies out keeps them out of
    the process that forks to draw (its peak counts against decompose's memory)."""
    skip = results[0].skip_first
    stats = [acc.finalize(layer, skip_first=skip, second_moment=False) for layer in acc.layers]
    labels = np.array([windows.label_names[i] for i in windows.labels])
    return [
        (figs.shares_figure(results), "decomposition_shares.png"),
        (figs.spectra_figure(results), "decomposition_spectra.png"),
        (figs.spiral_figure(stats), "decomposition_spiral.png"),
        (figs.spiral_figure_interactive(stats), "decomposition_spiral.html"),
        (figs.gram_figure(stats), "decomposition_gram.png"),
        (figs.context_figure(stats, labels), "decomposition_contexts.png"),
    ]


@dataclass(frozen=True)
class DecompositionAnalysis:
    """The decomposition's analysis step (an ``Analysis``): both views of position 0, the
    intervals and the spectra.
    ``step`` hears each step start, and the per-layer steps show a bar (``step_bar``)."""

    skip_first: bool
    seed: int
    step: Step = quiet

    def __call__(
        self, folder: RunFolder, view: ModelView, windows: Windows, acc: DecompositionAccumulator
    ) -> None:
        skip_first, seed, step = self.skip_first, self.seed, self.step
        labels = np.asarray(windows.labels)
        out = folder.path / "figures"
        step("both views of every layer")
        with step_bar(step, 2 * len(acc.layers), "layer") as bar:
            primary = analyse_layers(acc, labels, skip_first, seed, progress=bar.update)
            # The decomposition figures render in a forked process while the rest is computed.
            figures = decomposition_figures(acc, primary, windows)
            wait = save_in_background([(fig, out / name) for fig, name in figures])
            other = analyse_layers(acc, labels, not skip_first, seed, progress=bar.update)
        views: list[dict[str, Any]] = [
            {"skip_first": skip_first, "layers": layer_rows(primary)},
            {"skip_first": not skip_first, "layers": layer_rows(other)},
        ]
        # intervals over contexts for the view without position 0 (the claims' view)
        skip_rows = views[0] if skip_first else views[1]
        step("intervals over contexts")
        with step_bar(step, len(acc.layers) if acc.groups else 0, "layer") as bar:
            skip_rows["intervals"] = decomposition_intervals(
                acc, skip_rows["layers"], labels, seed=seed, progress=bar.update
            )
        folder.merge_metrics("decomposition", {**views[0], "other_view": views[1]})
        spectra = {
            ("skip_first" if results[0].skip_first else "all_positions"): {
                str(r.layer): list(r.pos_singular_values) for r in results
            }
            for results in (primary, other)
        }
        spectra.update(  # the noise-free spectra (sqrt of K's eigenvalues), where measured
            {
                ("skip_first" if results[0].skip_first else "all_positions") + "_corrected": {
                    str(r.layer): list(r.pos_singular_values_corrected or ()) for r in results
                }
                for results in (primary, other)
                if results[0].pos_singular_values_corrected is not None
            }
        )
        write_json(folder.path / "decomposition_spectra.json", spectra)
        wait()


def decomposition_stage(request: StageRequest, step: Step) -> DecompositionAnalysis:
    """The report's position and context stage."""
    return DecompositionAnalysis(request.skip_first, request.config.seed, step)


def check_decomposable(command: str, config: CaptureConfig) -> None:
    """Refuse windows too few for the position/context analyses, before the model loads:
    the context part and its intervals compare at least 2 windows."""
    if config.contexts < 2:
        raise GeomlensError(
            f"--contexts {config.contexts}: the position/context split compares windows, so "
            f"{command} needs at least 2 (16 or more for its intervals); use --contexts 16."
        )
