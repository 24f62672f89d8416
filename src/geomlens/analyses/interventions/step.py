"""The causal checks on a finished capture: the estimation windows' statistics give the
directions, held-out windows of the same corpus measure each edit and its controls; the
numbers go to metrics.json under "interventions", the glance figure to ``figures/``."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from geomlens.analyses.interventions import compute
from geomlens.analyses.interventions.checks import CHECKS, geometry, run_checks
from geomlens.analyses.interventions.figures import glance_figure
from geomlens.analyses.interventions.held_out import held_out_windows
from geomlens.analyses.interventions.measure import BIN_NAMES
from geomlens.analyses.interventions.schema import SECTION
from geomlens.capturing.capture import CaptureConfig
from geomlens.corpus import Windows, load_corpus
from geomlens.errors import GeomlensError
from geomlens.models.view import ModelView
from geomlens.reporting.figures import save_later
from geomlens.runs.runfolder import RunFolder
from geomlens.stats import DecompositionAccumulator
from geomlens.stats.rounding import sig

HELD_OUT = 32
"""Held-out windows measured by default."""

CONTROLS = 8
"""Random control draws per check by default."""


def parse_checks(text: str) -> tuple[str, ...]:
    """``--checks``: "all" or a comma-separated subset of ``CHECKS`` (in ``CHECKS`` order)."""
    if text.strip() == "all":
        return CHECKS
    asked = [c.strip() for c in text.split(",") if c.strip()]
    unknown = [c for c in asked if c not in CHECKS]
    if unknown or not asked:
        raise GeomlensError(f"--checks takes 'all' or some of {', '.join(CHECKS)} (got {text!r}).")
    return tuple(c for c in CHECKS if c in asked)


@dataclass(frozen=True)
class InterventionsAnalysis:
    """The checks as an ``Analysis`` (called with the run folder, the model, the estimation
    windows and the capture's statistics)."""

    config: CaptureConfig
    checks: Sequence[str] = CHECKS
    held_out: int = HELD_OUT
    controls: int = CONTROLS
    skip_first: bool = True

    def __call__(
        self, folder: RunFolder, view: ModelView, windows: Windows, acc: DecompositionAccumulator
    ) -> None:
        folder.merge_metrics(SECTION, self.numbers(folder, view, windows, acc))

    def numbers(
        self, folder: RunFolder, view: ModelView, windows: Windows, acc: DecompositionAccumulator
    ) -> dict[str, Any]:
        """The section's numbers (and the glance figure, drawn into ``folder``)."""
        if view.is_seq2seq:
            return {"reason": "an encoder-decoder's checks are not measured"}
        c = self.config
        corpus = load_corpus(c.corpus, c.text_column, c.label_column)
        held = held_out_windows(
            corpus, view.tokenizer, windows, self.held_out, seed=c.seed, offset=c.offset
        )
        layers = [layer for layer in acc.layers if layer >= 1]
        if not layers:
            return {"reason": "the capture kept no layer after the embedding output"}
        geo = geometry(acc, layers, skip_first=self.skip_first and not view.is_encoder)
        ids = torch.tensor(np.asarray(held.input_ids))
        found = run_checks(
            view,
            ids,
            np.asarray(held.labels),
            geo,
            checks=self.checks,
            draws=self.controls,
            seed=c.seed,
            batch_size=c.batch_size,
        )
        base = found["base"]
        section: dict[str, Any] = {
            "held_out": held.n_contexts,
            "estimation_windows": windows.n_contexts,
            "held_out_disjoint": not set(held.doc_ids) & set(windows.doc_ids),
            "n_controls": self.controls,
            "layers": layers,
            "skip_first": self.skip_first and not view.is_encoder,
            "loss_kind": "masked-token" if view.is_encoder else "next-token",
            "trained_head": getattr(view.model, "get_output_embeddings", lambda: None)()
            is not None,
            "control_covariance": "each layer's covariance (second moments)"
            if acc.second is not None
            else "each layer's positional plus context covariance (no second moments kept)",
            "base": {
                "loss": compute.effect_interval(base.loss, c.seed),
                "neighbour": compute.effect_interval(base.neighbour, c.seed + 1),
                "attention_bins": {
                    name: sig(float(v))
                    for name, v in zip(BIN_NAMES, base.attention.mean((0, 1, 2)), strict=True)
                },
                "top_tokens": [view.tokenizer.decode([int(i)]) for i in base.top_tokens],
                "ari": None if found["base_ari"] is None else sig(found["base_ari"]),
                "seconds": sig(found["base_seconds"], 3),
            },
            "checks": {
                name: compute.check_record(result, c.seed)
                for name, result in found["checks"].items()
            },
        }
        fig = glance_figure(section)
        if fig is not None:
            (folder.path / "figures").mkdir(parents=True, exist_ok=True)
            save_later(fig, folder.path / "figures" / "interventions_glance.png")
        return section
