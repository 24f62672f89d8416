"""The attention section: logit parts per head, W_QK in the positional basis, induction heads."""

from __future__ import annotations

from geomlens.analyses.attention.schema import AttentionMetrics, InductionMetrics, QKBasis, QKHead
from geomlens.reporting import interactive as plots
from geomlens.reporting.html import paper, plot, readings, table
from geomlens.reporting.section import Section, pct
from geomlens.runs.runfolder import Run


def attention_section(run: Run) -> str:
    att, ind = AttentionMetrics.of(run.metrics), InductionMetrics.of(run.metrics)
    parts = [
        paper(
            "song",
            "Each head's attention logits split into position-position, position-context, "
            "context-position, context-context and rest terms; W_QK read in the positional "
            "basis; induction heads.",
        )
    ]
    if att is not None and att.unsupported is not None:
        parts.append(readings([f"Attention split not available: {att.unsupported}"]))
    elif att is not None and att.parts is not None:
        parts.extend(split_part(att))
    if ind is not None and ind.unsupported is None:
        parts.append(induction_part(ind))
    elif ind is not None:
        parts.append(readings([f"Induction heads: {ind.unsupported}"]))
    parts.append(SECTION.static_figures(run.path, ("attention_", "qk_basis", "induction_")))
    return "".join(parts)


QK_KEYS = ["block", "head", "qk_rank", "residual", "baseline_residual", "share_in_basis"] + [
    "whole_residual",
    "whole_baseline_residual",
    "whole_low_rank_share",
    "whole_low_rank_in_basis",
]
"""The columns of the W_QK table (the first is the block, the rest each head's fields)."""


def qk_row(block: QKBasis, h: QKHead) -> list[str | float]:
    """One head's row of the W_QK table ("–" for a number not measured)."""
    row: list[str | float] = [block.layer, h.head, block.head_rank(h), h.residual]
    row += [h.baseline_residual, h.share_in_basis]
    for v in (
        h.whole_residual,
        h.whole_baseline_residual,
        h.whole_low_rank_share,
        h.whole_low_rank_in_basis,
    ):
        row.append("–" if v is None else v)
    return row


def split_part(att: AttentionMetrics) -> list[str]:
    """The readings per block, the logit parts' plot and the W_QK table."""
    lines = []
    blocks = att.parts or []
    for block in blocks:
        names = block.parts
        means = [
            sum(row[p] or 0.0 for row in block.share) / len(block.share) for p in range(len(names))
        ]
        best = max(range(len(names)), key=lambda p: means[p])
        lines.append(
            f"Block {block.layer}: averaged over heads, {names[best]} has "
            f"{pct(means[best])} of the summed variances of the parts (var(part) over the "
            "sum of var(part) over parts, not a share of the logits' own variance, as the "
            "parts covary); the parts rebuild the real logits to "
            f"{block.max_rel_error:.1e}."
        )
    qk_rows = [qk_row(b, h) for b in att.qk_basis or [] for h in b.heads]
    return [
        readings(lines),
        plot(
            plots.attention_parts([(b.layer, b.parts, b.share) for b in blocks]),
            "plot-attention",
            "Logit parts per head",
            HOW["attention_parts"],
        ),
        table(
            ["block", "head", "rank", "low-rank+diag residual", "random residual"]
            + ["share in basis", "whole W_QK residual", "random head", "low-rank part's share"]
            + ["low-rank part in basis"],
            qk_rows,
            "W_QK in the top positional directions, and the whole W_QK",
            keys=QK_KEYS,
        ),
    ]


def induction_part(ind: InductionMetrics) -> str:
    """The induction reading and the table of the heads found and the top heads."""
    found = ind.found or []
    splits = ind.splits or []
    named = ", ".join(f"block {layer} head {head}" for layer, head in found[:5])
    line = (
        f"{len(found)} head(s) score above {ind.threshold} on repeated random tokens "
        f"(score: attention from the second copy of a token to the token after its first "
        f"copy; {ind.batch} sequences of 2 x {ind.n} tokens)" + (f": {named}." if named else ".")
    )
    rows = [
        [s.layer, s.head, s.score, s.same_token, s.neighbours_local, s.neighbours_earlier, s.other]
        for s in splits
    ]
    return readings([line]) + (
        table(
            ["block", *INDUCTION_KEYS[1:]],
            rows,
            "Induction heads: where each chosen head attends (shares of its attention)",
            keys=INDUCTION_KEYS,
        )
        if rows
        else ""
    )


INDUCTION_KEYS = [
    "layer",
    "head",
    "score",
    "same_token",
    "neighbours_local",
    "neighbours_earlier",
    "other",
]
"""The columns of the induction table (each head's attention split, from ``splits``)."""


HOW = {
    "attention_parts": "one stacked bar per head (grouped by block): each colour is a logit "
    "part's variance over the summed variances of the parts; a tall pos_pos bar means the "
    "head's pattern is mostly set by positions.",
    "induction_scores": "one cell per block and head: bright cells attend from a repeated "
    "token to the token that followed its first copy.",
    "induction_splits": "for each chosen head, how its attention divides between the same "
    "token, nearby tokens and the induction target.",
    "attention_heatmaps": "mean attention per query (row) and key (column) position; a "
    "bright diagonal band is attention to nearby positions.",
    "qk_basis": "W_QK in the top positional directions: a bright diagonal with little "
    "elsewhere is the low-rank plus diagonal structure.",
}
"""A line under each figure of the section saying how to read it."""


SECTION = Section(
    "attention",
    "Attention",
    attention_section,
    present=lambda run: "attention" in run.metrics or "induction" in run.metrics,
    captions={
        "attention_parts": "Attention logit parts per head",
        "induction_scores": "Induction scores per head",
        "induction_splits": "Attention of induction heads: same token, neighbours, induction",
    },
    how=HOW,
    interactive=("attention_parts",),
)
