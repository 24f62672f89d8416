"""The attention-sink section: the sink-rate heat map first, then what it says."""

from __future__ import annotations

from collections import Counter

from geomlens.analyses.sinks.claims import EXIST, FIRST
from geomlens.analyses.sinks.compute import GU_LENGTH
from geomlens.analyses.sinks.schema import KEY, SinkMetrics
from geomlens.reporting.claims import claim_record, verdict_sentence
from geomlens.reporting.html import number, readings, table, warning
from geomlens.reporting.section import Section
from geomlens.runs.runfolder import Run

OPENING = (
    '<p class="paper">How much of each head\'s attention one key position draws: its '
    "importance, the mean attention the queries that see it give it. A head whose first "
    "token's importance exceeds 0.3 is a sink head, and the sink rate is their share "
    '(Gu et al., <a href="https://arxiv.org/abs/2410.10781">arXiv:2410.10781</a>); the '
    "initial tokens as attention sinks are Xiao et al.'s (<a href=\"https://arxiv.org/abs/"
    '2309.17453">arXiv:2309.17453</a>).</p>'
)


def _lines(found: SinkMetrics) -> list[str]:
    lines = [
        f"{found.n_windows} windows of {found.length} tokens; "
        + ("causal attention." if found.causal else "bidirectional attention (an encoder).")
    ]
    rate = f"Sink rate {number(found.sink_rate)} at T = {found.length}"
    if found.sink_rate_64 is not None:
        rate += f", {number(found.sink_rate_64)} with the windows cut to T = {GU_LENGTH} (Gu's T)"
    elif found.causal:
        rate += f" (the windows are shorter than Gu's T = {GU_LENGTH})"
    else:
        rate += " (an encoder's T = 64 attention needs a pass of its own: not read)"
    lines.append(rate + ".")
    at_zero = [r.layer for r in found.layers if r.position == 0]
    others = Counter(r.position for r in found.layers if r.position != 0)
    lines.append(
        f"The key drawing the most attention is position 0 in {len(at_zero)} of "
        f"{len(found.layers)} blocks"
        + (
            "; elsewhere "
            + ", ".join(f"position {p} ({n} blocks)" for p, n in others.most_common(3))
            if others
            else ""
        )
        + "."
    )
    if found.elsewhere:
        lines.append(
            f"{len(found.elsewhere)} heads put more than {found.epsilon:g} of their attention on "
            "a key other than the first (table below)."
        )
    return lines


def sink_section(run: Run) -> str:
    block = run.metrics.get(KEY, {})
    if "n_windows" not in block:
        return warning(str(block.get("unsupported", "attention sinks not measured")))
    found = SinkMetrics.from_dict(block)
    figure = SECTION.static_figures(run.path, ("sinks_",))
    lines = _lines(found)
    for claim_id in (EXIST, FIRST):
        record = claim_record(run.metrics.get("claims") or [], claim_id)
        if record is not None:
            lines.append(verdict_sentence(record))
    per_layer = table(
        ["layer", "sink position", "share of windows", "importance", "first token", "token ids"],
        [
            [
                r.layer,
                r.position,
                r.share,
                r.alpha,
                r.first_token,
                ", ".join(str(t) for t in sorted(set(r.token_ids))[:6]),
            ]
            for r in found.layers
        ],
        "Per block: the key of largest head-mean importance (most windows') and its token ids",
        ["layer", "sink_position", None, "sink_importance", "first_token_importance", None],
    )
    heads = (
        table(
            ["layer", "head", "position", "importance"],
            [[h.layer, h.head, h.position, h.alpha] for h in found.elsewhere[:20]],
            "Heads whose importance peaks at a key other than the first",
        )
        if found.elsewhere
        else ""
    )
    return figure + OPENING + readings(lines) + per_layer + heads


SECTION = Section(
    "sinks",
    "Attention sinks",
    sink_section,
    present=lambda run: KEY in run.metrics,
    captions={"sinks_rate": "Sink rate per layer and head"},
    how={
        "sinks_rate": "one cell per layer and head: the share of windows whose first token "
        "receives more than 0.3 of the head's attention (mean over queries); bright rows are "
        "blocks where most heads sink."
    },
)
