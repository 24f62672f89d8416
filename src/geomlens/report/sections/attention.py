"""The attention section: logit parts per head, W_QK in the positional basis, induction heads."""

from __future__ import annotations

from geomlens.io.runfolder import Run
from geomlens.report import interactive as plots
from geomlens.report.html import plot, readings, table
from geomlens.report.section import Section, pct


def attention_section(run: Run) -> str:
    m, folder = run.metrics, run.path
    att, ind = m.get("attention") or {}, m.get("induction") or {}
    parts = []
    if "unsupported" in att:
        parts.append(readings([f"Attention split not available: {att['unsupported']}"]))
    elif att:
        lines = []
        for block in att["parts"]:
            names = block["parts"]
            means = [
                sum(row[p] for row in block["share"]) / len(block["share"])
                for p in range(len(names))
            ]
            best = max(range(len(names)), key=lambda p: means[p])
            lines.append(
                f"Block {block['layer']}: averaged over heads, {names[best]} carries "
                f"{pct(means[best])} of the logit variance; the parts rebuild the real logits to "
                f"{block['max_rel_error']:.1e}."
            )
        parts.append(readings(lines))
        parts.append(
            plot(plots.attention_parts(att["parts"]), "plot-attention", "Logit parts per head")
        )
        whole = ("whole_residual", "whole_baseline_residual", "whole_low_rank_in_basis")
        qk_rows = [
            [b["layer"], h["head"], h["residual"], h["baseline_residual"], h["share_in_basis"]]
            + [h.get(key, "–") for key in whole]
            for b in att.get("qk_basis", [])
            for h in b["heads"]
        ]
        parts.append(
            table(
                ["block", "head", "low-rank+diag residual", "random residual", "share in basis"]
                + ["whole W_QK residual", "random head", "low-rank part in basis"],
                qk_rows,
                "W_QK in the top positional directions, and the whole W_QK",
            )
        )
    if ind and "unsupported" not in ind:
        heads = ind.get("heads") or ind.get("top_heads") or []
        if heads and isinstance(heads[0], dict):
            keys = [k for k in heads[0] if isinstance(heads[0][k], (int, float))]
            parts.append(table(keys, [[h.get(k) for k in keys] for h in heads], "Induction heads"))
    elif ind:
        parts.append(readings([f"Induction heads: {ind['unsupported']}"]))
    parts.append(SECTION.static_figures(folder, ("attention_", "qk_basis", "induction_")))
    return "".join(parts)


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
)
