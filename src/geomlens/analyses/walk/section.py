"""The movement-through-embedding-space section (Singh): similarity, walks, kernels."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from geomlens.analyses.common.readout import untrained_readout
from geomlens.analyses.walk.schema import DecoderStack, Encoding, Kernels, WalkMetrics
from geomlens.reporting import interactive as plots
from geomlens.reporting.html import paper, plot, readings, table
from geomlens.reporting.section import Section, pct
from geomlens.runs.runfolder import Run


def leave_reading(enc: Encoding) -> str:
    """How many positions see their own token leave its neighbourhood (an encoding walk)."""
    cos = enc.cos
    ci = cos.frac_never_leave_ci  # runs before the block bootstrap have none
    shown = "" if not ci else f" (95% interval {pct(1 - ci['high'])}-{pct(1 - ci['low'])})"
    return (
        f"{pct(1 - cos.frac_never_leave)}{shown} of positions see their own token leave "
        f"the top-{enc.k} nearest tokens (cosine), at median layer "
        f"{cos.leave_layer_median}."
    )


def walk_section(run: Run) -> str:
    w, folder = WalkMetrics.of(run.metrics), run.path
    if w is None:
        return readings(["Not computed in this run."])
    enc, kern, ref = w.encoding, w.kernels, w.refactor
    lines = [
        f"Encoding and decoding walks: {w.not_available or 'not computed'}."
        if enc is None
        else f"Along the layers, {leave_reading(enc)}"
    ]
    if w.text.shortened:  # a model of fewer positions than the packaged text's tokens
        lines.insert(0, w.text.shortened)
    if kern.not_applicable is not None or ref.max_rel_err is None:
        why = (kern.not_applicable or {}).get("unsupported", "not applicable")
        lines.append(f"Position kernels and the per-head refactoring: {why}.")
    else:
        lines += [
            f"{pct(kern.negative_self_bias_fraction)} of heads attend less to their own "
            f"position than to others (negative self-bias; {kern.windows_used} windows).",
            "Per-head outputs O = sum_h A_h X W_vo,h rebuild the attention output to "
            f"{ref.max_rel_err:.1e}.",
        ]
    if w.decoder:
        lines += decoder_readings(w.decoder, kern)
    for mode, d in w.decodings.items():
        lines.append(f"Decoding walk ({mode}): {d.text!r}")
    sim_rows = [
        [r.layer, r.mean_cos, r.mean_cos_adjacent, r.section_contrast, r.mean_norm]
        for r in w.similarity.layers
    ]
    return "".join(
        [
            paper(
                "singh",
                "Hidden states as points moving through the token embedding space: similarity "
                "between positions, the walk of each position among the tokens, position "
                "kernels of attention, and the per-head refactoring of attention.",
            ),
            untrained_readout(run.metrics),
            readings(lines),
            table(
                ["layer", "mean cos", "adjacent cos", "section contrast", "mean norm"],
                sim_rows,
                "Similarity between positions",
                keys=["layer", "mean_cos", "mean_cos_adjacent", "section_contrast", "mean_norm"],
            ),
            similarity_plot(folder),
            SECTION.static_figures(folder, ("walk_",)),
        ]
    )


PAGE_LAYERS = 4
"""Layers of the cosine similarity map drawn on the page (the figure file has up to 12)."""


def similarity_plot(folder: Path) -> str:
    """The cosine similarity map with a layer slider, cut to ``PAGE_LAYERS`` layers."""
    path = folder / "figures" / "walk_similarity_cos.plotly.json"
    if not path.exists():
        return ""
    figure = plots.fewer_slider_steps(json.loads(path.read_text(encoding="utf-8")), PAGE_LAYERS)
    return plot(
        figure,
        "plot-similarity",
        SECTION.captions["walk_similarity_cos"]
        + f" ({len(figure['data'])} layers here; every layer in figures/walk_similarity_cos.html)",
        SECTION.how_to_read("walk_similarity_cos"),
    )


def far_reading(name: str, numbers: dict[str, Any] | None) -> str | None:
    """One clause on far-position amplification of a kernel, or None where not measured."""
    far = (numbers or {}).get("far_position", numbers) or {}
    fraction = far.get("far_amplification_fraction")
    if fraction is None:
        return None
    return f"{name} {pct(fraction)}"


def decoder_readings(d: DecoderStack, encoder_kernels: Kernels) -> list[str]:
    """The walk's lines for an encoder-decoder's decoder stack and cross-attention."""
    enc, own, cross = d.encoding, d.kernels, d.cross_attention
    lines = [
        f"Decoder stack (teacher-forced on the text): {leave_reading(enc)}",
        f"Negative self-bias: decoder self-attention {pct(own.negative_self_bias_fraction)} "
        f"of heads, cross-attention {pct(cross.negative_self_bias_fraction)} (offset "
        "i - j between decoder and encoder positions).",
    ]
    far = [
        far_reading("encoder bias table", encoder_kernels.bias_table),
        far_reading("decoder bias table", own.bias_table),
        far_reading("measured encoder attention", encoder_kernels.to_dict()),
        far_reading("measured decoder attention", own.to_dict()),
        far_reading("cross-attention", cross.to_dict()),
    ]
    shown = [x for x in far if x]
    if shown:
        lines.append(
            "Heads that weigh far offsets (32-63) above middle ones (8-31): "
            + ", ".join(shown)
            + "."
        )
    return lines


HOW = {
    "walk_similarity": "one cell per pair of positions (query row, key column) at the chosen "
    "layer; blocks along the diagonal are sections of the text the model keeps together.",
    "walk_encoding_ranks": "the rank of each position's own token (and of the next token) "
    "among the nearest token embeddings, per layer: a rising own-token rank means the vector "
    "leaves its token behind.",
    "walk_encoding_table": "the nearest tokens of each position's hidden state, layer by "
    "layer: the walk from the input token towards the next one.",
    "walk_decoding": "generated tokens' hidden states among the token embeddings; each step "
    "moves to the next token's neighbourhood.",
    "walk_kernels": "mean attention by relative offset i - j, one line per layer: a dip at "
    "offset 0 below its neighbours is negative self-bias.",
    "walk_head_norms": "each head's output norm in the per-head refactoring, per layer: a "
    "few large heads carry most of the attention output.",
}
"""A line under each figure of the section saying how to read it."""


SECTION = Section(
    "walk",
    "Movement through embedding space",
    walk_section,
    present=lambda run: "walk" in run.metrics,
    captions={
        "walk_similarity_cos": "Cosine similarity between positions per layer",
        "walk_similarity_dot": "Dot-product similarity between positions per layer",
        "walk_encoding_ranks_decoder": "Decoder stack: rank of a position's own and next token",
        "walk_encoding_table_decoder": "Decoder stack: nearest tokens along the encoding walk",
        "walk_encoding_ranks": "Rank of a position's own and next token along the layers",
        "walk_encoding_table": "Nearest tokens along the encoding walk",
        "walk_decoding": "Decoding walks among token embeddings",
        "walk_kernels_decoder": "Decoder self-attention: mean attention by relative offset",
        "walk_kernels_cross": "Cross-attention: mean attention by offset (decoder i - encoder j)",
        "walk_kernels": "Mean attention by relative offset (position kernels)",
        "walk_head_norms": "Per-head output norms (refactoring check)",
    },
    how=HOW,
    interactive=("walk_similarity_cos",),
)
