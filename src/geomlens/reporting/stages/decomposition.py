"""The position/context analysis of one captured run (``geomlens decompose``, the report's
first stage).

Joins the pure analyses and the figures: both views of position 0 are computed
(the chosen one is primary), numbers go to ``metrics.json`` under "decomposition", the
first 64 singular values of each positional part to ``decomposition_spectra.json`` (the
noise-free ones under ``*_corrected``), and
figures to ``figures/``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from geomlens.analyses.attention_parts import attention_parts
from geomlens.analyses.decomposition import LayerDecomposition, analyse_layers
from geomlens.analyses.decomposition_intervals import decomposition_intervals
from geomlens.analyses.induction import induction_heads
from geomlens.analyses.qk_basis import qk_positional_basis
from geomlens.capturing.hooks import hidden_states
from geomlens.corpus import Windows
from geomlens.errors import GeomlensError
from geomlens.io.progress import Step, quiet, step_bar
from geomlens.io.runfolder import RunFolder, write_json
from geomlens.models.loading import eager_attention
from geomlens.models.view import ModelView
from geomlens.reporting import attention_figures as attn_figs
from geomlens.reporting import decomposition_figures as figs
from geomlens.reporting.figures import pick_layers, save_all, save_in_background
from geomlens.reporting.stages import StageRequest
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


ATTENTION_BLOCKS = 3  # blocks whose attention is split (first, middle, last)
ATTENTION_CONTEXTS = 2  # windows split (x T^2 query-key pairs each; the basis uses all)
QK_BASIS_MAX = 20  # largest positional basis for W_QK
QK_BASIS_MIN = 4  # smallest: a rank-2 plus diagonal fit of a smaller matrix is exact


def attention_in_basis(
    view: ModelView,
    windows: Windows,
    acc: DecompositionAccumulator,
    results: list[LayerDecomposition],
    figures: list[tuple[Any, str]],
    basis_ranks: dict[int, int],
    progress: Callable[[int], object] | None = None,
) -> dict[str, Any]:
    """Attention logits split into pos/ctx parts and W_QK in the positional basis.

    ``basis_ranks`` maps a layer to pos_rank95 without position 0 (the W_QK basis size
    before it is clipped to [QK_BASIS_MIN, QK_BASIS_MAX]). ``progress`` hears 1 after the
    forward pass and after each block (``ATTENTION_BLOCKS + 1`` in all).

    Appends its figures (with file names) to ``figures``.
    """
    skip = results[0].skip_first
    blocks = pick_layers([x for x in acc.layers if x < view.n_layers], ATTENTION_BLOCKS)
    n_ctx = min(ATTENTION_CONTEXTS, windows.n_contexts)
    ids = torch.tensor(windows.input_ids[:n_ctx])
    hidden = hidden_states(view, ids, blocks)
    tick = progress or (lambda n: None)
    tick(1)
    parts, parts_ctx, qk, splits = [], [], [], []
    for block in blocks:
        stats = acc.finalize(block, skip_first=skip)
        try:
            split = attention_parts(view, block, hidden[block], stats, contexts=range(n_ctx))
            variant = attention_parts(
                view, block, hidden[block], stats, contexts=range(n_ctx), context="ctx"
            )
        except GeomlensError as exc:
            return {"unsupported": str(exc)}
        # The W_QK basis always leaves position 0 out: with it, a massive activation at the
        # first token can make pos_rank95 = 1, and a 1-wide basis says nothing about W_QK.
        basis_stats = acc.finalize(block, skip_first=True)
        k = min(QK_BASIS_MAX, max(QK_BASIS_MIN, basis_ranks[block]))
        basis = qk_positional_basis(view, block, basis_stats, k)
        parts.append(split.to_dict())
        parts_ctx.append(variant.to_dict())
        qk.append(basis.to_dict())
        splits.append(split)
        if block == blocks[len(blocks) // 2]:  # heatmaps and W_QK for the middle block only
            figures.append((attn_figs.part_heatmaps(split), f"attention_heatmaps_block{block}.png"))
            figures.append((attn_figs.qk_matrix(basis), f"qk_basis_block{block}.png"))
        tick(1)
    figures.append((attn_figs.part_shares(splits), "attention_parts.png"))
    return {
        "n_contexts": n_ctx,
        "blocks": blocks,
        "parts": parts,
        "parts_ctx": parts_ctx,
        "qk_basis": qk,
    }


def induction(view: ModelView, seed: int, figures: list[tuple[Any, str]]) -> dict[str, Any]:
    """Induction heads on repeated random tokens (decoders; needs eager attention).

    Appends its figures (with file names) to ``figures``.
    """
    if view.kind == "encoder":
        return {"unsupported": f"{view.name} is an encoder: induction needs a causal model"}
    with eager_attention(view):
        result = induction_heads(view, seed=seed)
    figures.append((attn_figs.induction_scores(result), "induction_scores.png"))
    if result.splits:
        figures.append((attn_figs.induction_splits(result), "induction_splits.png"))
    return result.to_dict()


@dataclass(frozen=True)
class DecompositionAnalysis:
    """The decomposition's analysis step (an ``Analysis``): both views of position 0, the
    intervals, the spectra, attention in the positional basis and induction heads.
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
        attention_figures: list[tuple[Any, str]] = []
        skip_view = primary if skip_first else other
        ranks = {r.layer: r.pos_rank95 for r in skip_view}
        step("attention in the positional basis")
        with step_bar(step, ATTENTION_BLOCKS + 1, "pass") as bar:
            attention = attention_in_basis(
                view, windows, acc, primary, attention_figures, ranks, bar.update
            )
        folder.merge_metrics("attention", attention)
        step("induction heads")
        with step_bar(step, 1, "pass") as bar:
            folder.merge_metrics("induction", induction(view, seed, attention_figures))
            bar.update(1)
        save_all([(fig, out / name) for fig, name in attention_figures])
        wait()


def decomposition_stage(request: StageRequest, step: Step) -> DecompositionAnalysis:
    """The report's position and context stage."""
    return DecompositionAnalysis(request.skip_first, request.config.seed, step)
