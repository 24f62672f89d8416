"""The position/context analysis of one captured run (``geomlens decompose``, the report's
first stage; attention in the positional basis is the attention folder's step, after it).

Joins the pure analyses and the figures: outlier windows (a massive hidden state past
position 0 in a few windows, ``outliers.py``) are set aside first, both views of position
0 are computed on the windows left (the chosen one is primary; the view without position
0 on every window is kept under "with_outliers"), numbers go to ``metrics.json`` under
"decomposition" (the outliers under "outlier_windows", the rule under "outlier_rule"), the
first 64 singular values of each positional part to ``decomposition_spectra.json`` (the
noise-free ones under ``*_corrected``), and
figures to ``figures/`` (the Gram matrices and the spiral with a second row: the view the
claims read, position 0 skipped and the noise removed).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from geomlens.analyses.base import StageRequest
from geomlens.analyses.decomposition import figures as figs
from geomlens.analyses.decomposition import outliers, position_noise
from geomlens.analyses.decomposition.compute import LayerDecomposition, analyse_layers
from geomlens.analyses.decomposition.intervals import decomposition_intervals
from geomlens.analyses.decomposition.sequential import reused_draws
from geomlens.capturing.capture import CaptureConfig, capture_contexts
from geomlens.corpus import Windows
from geomlens.errors import GeomlensError
from geomlens.io.progress import Step, quiet, step_bar
from geomlens.models.view import ModelView
from geomlens.reporting.figures import pick_layers, save_in_background
from geomlens.runs.runfolder import RunFolder, write_json
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
    acc: DecompositionAccumulator,
    results: list[LayerDecomposition],
    labels: np.ndarray,
    skip_rows: list[LayerDecomposition] | None = None,
) -> list[tuple[Any, str]]:
    """Every decomposition figure of the primary view of position 0, with its file name
    (``labels``: [C] the label name of each of ``acc``'s windows). With ``skip_rows`` (the
    view without position 0, noise-corrected), the Gram and spiral figures carry a second
    row: the claims' view, P_r of the shown layers with the noise removed.

    The figures read no second moments: leaving their d x d copies out keeps them out of
    the process that forks to draw (its peak counts against decompose's memory)."""
    skip = results[0].skip_first
    stats = [acc.finalize(layer, skip_first=skip, second_moment=False) for layer in acc.layers]
    shown = pick_layers(acc.layers, GRAM_PANELS)
    beside = denoised_parts(acc, skip_rows, shown) if skip_rows else None
    # beside the noise-removed view, the spiral shows the Gram figure's layers (else up to 6)
    spiral_layers = shown if beside else None
    return [
        (figs.shares_figure(results), "decomposition_shares.png"),
        (figs.spectra_figure(results), "decomposition_spectra.png"),
        (
            figs.spiral_figure(stats, spiral_layers, beside=beside or None),
            "decomposition_spiral.png",
        ),
        (
            figs.spiral_figure_interactive(stats, spiral_layers, beside=beside or None),
            "decomposition_spiral.html",
        ),
        (figs.gram_figure(stats, layers=shown, beside=beside or None), "decomposition_gram.png"),
        (figs.context_figure(stats, labels), "decomposition_contexts.png"),
    ]


GRAM_PANELS = 4
"""Layers the Gram and (beside the noise-removed view) spiral figures show."""


def denoised_parts(
    acc: DecompositionAccumulator, rows: list[LayerDecomposition], layers: list[int]
) -> list[figs.PositionalPart]:
    """The noise-removed positional parts P_r of ``layers`` in the view without position 0
    (``rows``, its ``pos_rank_corrected`` directions); layers without interval groups or
    without a direction above the noise floor are left out."""
    rank = {r.layer: r.pos_rank_corrected for r in rows}
    parts = []
    for layer in layers:
        groups = position_noise.group_positions(acc, layer, skip_first=True)
        part = None if groups is None else figs.denoised_part(groups, rank.get(layer), layer)
        if part is not None:
            parts.append(part)
    return parts


@dataclass(frozen=True)
class DecompositionAnalysis:
    """The decomposition's analysis step (an ``Analysis``): the outlier windows set aside
    (``outliers``), both views of position 0 on the windows left, the view without
    position 0 on every window too (``with_outliers``) where any was set aside, the
    intervals and the spectra. ``batch_size`` is the capture's: the outlier windows are
    rerun in batches of at most that.
    ``step`` hears each step start, and the per-layer steps show a bar (``step_bar``)."""

    skip_first: bool
    seed: int
    step: Step = quiet
    batch_size: int = 8

    def __call__(
        self, folder: RunFolder, view: ModelView, windows: Windows, acc: DecompositionAccumulator
    ) -> None:
        skip_first, seed, step = self.skip_first, self.seed, self.step
        step("outlier windows")
        found = outliers.set_aside(
            acc, lambda rows: capture_contexts(view, windows, acc, rows, self.batch_size)
        )
        clean, aside = found.clean, bool(found.windows)
        every_label = np.asarray(windows.labels)
        labels = every_label[found.kept]
        names = np.array([windows.label_names[i] for i in labels])
        out = folder.path / "figures"
        step("both views of every layer")
        with step_bar(step, (3 if aside else 2) * len(acc.layers), "layer") as bar:
            primary = analyse_layers(clean, labels, skip_first, seed, progress=bar.update)
            other = analyse_layers(clean, labels, not skip_first, seed, progress=bar.update)
            # The decomposition figures render in a forked process while the rest is computed.
            figures = decomposition_figures(clean, primary, names, primary if skip_first else other)
            wait = save_in_background([(fig, out / name) for fig, name in figures])
            everything = (
                analyse_layers(acc, every_label, True, seed, progress=bar.update) if aside else []
            )
        views: list[dict[str, Any]] = [
            {"skip_first": skip_first, "layers": layer_rows(primary)},
            {"skip_first": not skip_first, "layers": layer_rows(other)},
        ]
        with_outliers: dict[str, Any] = {"skip_first": True, "layers": layer_rows(everything)}
        # intervals over contexts for the view without position 0 (the claims' view)
        skip_rows = views[0] if skip_first else views[1]
        step("intervals over contexts")
        drawn = (2 if aside else 1) * len(acc.layers) if acc.groups else 0
        with step_bar(step, drawn, "layer") as bar:
            # --contexts auto: the last look's draws of the noise-corrected numbers, taken
            # on this accumulator, are not drawn again
            skip_rows["intervals"] = decomposition_intervals(
                clean,
                skip_rows["layers"],
                labels,
                seed=seed,
                progress=bar.update,
                reused=reused_draws(acc, seed),
            )
            if aside:
                with_outliers["intervals"] = decomposition_intervals(
                    acc, with_outliers["layers"], every_label, seed=seed, progress=bar.update
                )
        found_record = {
            "outlier_windows": [o.to_dict() for o in found.outliers] if found.checked else None,
            "outlier_rule": found.record,
        }
        if aside:
            found_record["with_outliers"] = with_outliers
        folder.merge_metrics("decomposition", {**views[0], "other_view": views[1], **found_record})
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
    config = request.config
    return DecompositionAnalysis(request.skip_first, config.seed, step, config.batch_size)


def check_decomposable(command: str, config: CaptureConfig) -> None:
    """Refuse windows too few for the position/context analyses, before the model loads:
    the context part and its intervals compare at least 2 windows."""
    if config.contexts < 2:
        raise GeomlensError(
            f"--contexts {config.contexts}: the position/context split compares windows, so "
            f"{command} needs at least 2 (16 or more for its intervals); use --contexts 16."
        )
