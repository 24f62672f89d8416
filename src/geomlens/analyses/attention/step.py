"""Attention in the positional basis (``geomlens decompose``, the report's second stage):
the attention logits of a few blocks split into position/context parts, W_QK of every block
in the basis of the top positional directions, and induction heads. It reads the capture's
statistics and the decomposition's per-layer ranks (metrics.json, written by the step before it)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from geomlens.analyses.attention import figures as attn_figs
from geomlens.analyses.attention.induction import induction_heads
from geomlens.analyses.attention.parts import attention_parts
from geomlens.analyses.attention.qk_basis import qk_positional_basis
from geomlens.analyses.attention.schema import (
    AttentionMetrics,
    InductionMetrics,
    LogitParts,
    QKBasis,
)
from geomlens.analyses.base import StageRequest
from geomlens.analyses.common.applicable import not_applicable
from geomlens.analyses.decomposition.schema import outlier_rule, skip_first_layers
from geomlens.capturing.capture import CaptureConfig, capture_contexts
from geomlens.capturing.hooks import hidden_states
from geomlens.corpus import Windows
from geomlens.errors import GeomlensError
from geomlens.io.progress import Step, quiet, step_bar
from geomlens.models.loading import eager_attention
from geomlens.models.view import ModelView
from geomlens.reporting.figures import pick_layers, save_all
from geomlens.runs.runfolder import RunFolder
from geomlens.stats import DecompositionAccumulator

ATTENTION_BLOCKS = 3  # blocks whose attention is split (first, middle, last)
ATTENTION_CONTEXTS = 2  # windows split (x T^2 query-key pairs each; the basis uses all)
QK_BASIS_MAX = 20  # largest positional basis for W_QK
QK_BASIS_MIN = 4  # smallest: a rank-2 plus diagonal fit of a smaller matrix is exact


def block_layers(view: ModelView, acc: DecompositionAccumulator) -> list[int]:
    """The captured layers that are a block's input: the blocks whose W_QK is read."""
    return [x for x in acc.layers if x < view.n_layers]


def attention_in_basis(
    view: ModelView,
    windows: Windows,
    acc: DecompositionAccumulator,
    skip: bool,
    figures: list[tuple[Any, str]],
    basis_ranks: dict[int, int],
    progress: Callable[[int], object] | None = None,
) -> AttentionMetrics:
    """Attention logits of a few blocks split into pos/ctx parts, and W_QK of every captured
    block in the positional basis.

    ``skip`` is the decomposition's primary view (position 0 left out or not);
    ``basis_ranks`` maps a layer to pos_rank95 without position 0 (the W_QK basis size
    before it is clipped to [QK_BASIS_MIN, QK_BASIS_MAX]). ``progress`` hears 1 after the
    forward pass, after each split block and after each W_QK block
    (``ATTENTION_BLOCKS + 1 + len(block_layers(view, acc))`` at most).

    Appends its figures (with file names) to ``figures``.
    """
    skipped = not_applicable(view, "the attention split and W_QK in the positional basis")
    if skipped is not None:
        return AttentionMetrics.from_dict(skipped)
    every = block_layers(view, acc)
    blocks = pick_layers(every, ATTENTION_BLOCKS)
    if not blocks:  # only the last layer was captured: it is no block's input
        return AttentionMetrics(unsupported=not_measured_reason(acc.layers, view.n_layers))
    n_ctx = min(ATTENTION_CONTEXTS, windows.n_contexts)
    ids = torch.tensor(windows.input_ids[:n_ctx])
    hidden = hidden_states(view, ids, blocks)
    tick = progress or (lambda n: None)
    tick(1)
    parts: list[LogitParts] = []
    parts_ctx: list[LogitParts] = []
    qk: list[QKBasis] = []
    splits = []
    for block in blocks:
        stats = acc.finalize(block, skip_first=skip)
        try:
            split = attention_parts(view, block, hidden[block], stats, contexts=range(n_ctx))
            variant = attention_parts(
                view, block, hidden[block], stats, contexts=range(n_ctx), context="ctx"
            )
        except GeomlensError as exc:
            return AttentionMetrics(unsupported=str(exc))
        parts.append(LogitParts.from_dict(split.to_dict()))
        parts_ctx.append(LogitParts.from_dict(variant.to_dict()))
        splits.append(split)
        if block == blocks[len(blocks) // 2]:  # heatmaps for the middle block only
            figures.append((attn_figs.part_heatmaps(split), f"attention_heatmaps_block{block}.png"))
        tick(1)
    for block in every:
        # The W_QK basis always leaves position 0 out: with it, a massive activation at the
        # first token can make pos_rank95 = 1, and a 1-wide basis says nothing about W_QK.
        basis_stats = acc.finalize(block, skip_first=True)
        k = min(QK_BASIS_MAX, max(QK_BASIS_MIN, basis_ranks[block]))
        basis = qk_positional_basis(view, block, basis_stats, k)
        qk.append(QKBasis.from_dict(basis.to_dict()))
        if block == blocks[len(blocks) // 2]:  # W_QK's picture for the middle block only
            figures.append((attn_figs.qk_matrix(basis), f"qk_basis_block{block}.png"))
        tick(1)
    figures.append((attn_figs.part_shares(splits), "attention_parts.png"))
    return AttentionMetrics(
        n_contexts=n_ctx, blocks=blocks, parts=parts, parts_ctx=parts_ctx, qk_basis=qk
    )


def not_measured_reason(layers: list[int], n_layers: int) -> str:
    """Why the attention split is not measured when no captured layer is a block's input
    (``layers`` holds only ``n_layers``, the output of the last block)."""
    named = ", ".join(str(x) for x in layers)
    return (
        f"not measured: the capture holds layer {named} only, the output of the last block, "
        f"and the attention split and W_QK read a block's input (a layer from 0 to "
        f"{n_layers - 1}); add such a layer to --layers to measure them"
    )


def induction(view: ModelView, seed: int, figures: list[tuple[Any, str]]) -> InductionMetrics:
    """Induction heads on repeated random tokens (decoders; needs eager attention).

    Appends its figures (with file names) to ``figures``.
    """
    if view.kind == "encoder":
        return InductionMetrics(
            unsupported=f"{view.name} is an encoder: induction needs a causal model"
        )
    skipped = not_applicable(view, "the induction-head score")
    if skipped is not None:
        return InductionMetrics.from_dict(skipped)
    with eager_attention(view):
        result = induction_heads(view, seed=seed)
    figures.append((attn_figs.induction_scores(result), "induction_scores.png"))
    if result.splits:
        figures.append((attn_figs.induction_splits(result), "induction_splits.png"))
    return InductionMetrics.from_dict(result.to_dict())


def check_basis_length(command: str, config: CaptureConfig) -> None:
    """Refuse windows too short for the W_QK basis, before the model loads: it takes
    ``QK_BASIS_MIN`` singular values of pos without position 0."""
    if config.length < QK_BASIS_MIN + 1:
        raise GeomlensError(
            f"--length {config.length}: the positional basis of W_QK takes {QK_BASIS_MIN} "
            f"positions after the first, so {command} needs --length {QK_BASIS_MIN + 1} or "
            "more."
        )


@dataclass(frozen=True)
class AttentionAnalysis:
    """The attention step (an ``Analysis``): attention in the positional basis and induction
    heads, after the decomposition's step. ``step`` hears each step start."""

    skip_first: bool
    seed: int
    step: Step = quiet
    batch_size: int = 8

    def __call__(
        self, folder: RunFolder, view: ModelView, windows: Windows, acc: DecompositionAccumulator
    ) -> None:
        step, out = self.step, folder.path / "figures"
        metrics = folder.read_metrics()
        rows = skip_first_layers(metrics)
        ranks = {r["layer"]: r["pos_rank95"] for r in rows}
        # the positional basis of the windows the decomposition kept (its outliers out)
        aside = [int(w) for w in outlier_rule(metrics).get("windows_set_aside", [])]
        if aside:
            acc = acc.without(capture_contexts(view, windows, acc, aside, self.batch_size))
        figures: list[tuple[Any, str]] = []
        step("attention in the positional basis")
        passes = ATTENTION_BLOCKS + 1 + len(block_layers(view, acc))
        with step_bar(step, passes, "pass") as bar:
            attention = attention_in_basis(
                view, windows, acc, self.skip_first, figures, ranks, bar.update
            )
        folder.merge_metrics("attention", attention.to_dict())
        step("induction heads")
        with step_bar(step, 1, "pass") as bar:
            folder.merge_metrics("induction", induction(view, self.seed, figures).to_dict())
            bar.update(1)
        save_all([(fig, out / name) for fig, name in figures])


def attention_stage(request: StageRequest, step: Step) -> AttentionAnalysis:
    """The report's attention stage."""
    return AttentionAnalysis(
        request.skip_first, request.config.seed, step, request.config.batch_size
    )
