"""The papers' claims, each checked against the number of this run that decides it.

A claim reads numbers already in metrics.json and compares one with a stated rule; it
never computes a new statistic. Before the comparison, in this order:

1. **Scope.** A claim applies only to the models and parts its paper made it about (model
   kind, position scheme); elsewhere it is "not applicable: <why>", with its number still
   shown.
2. **Guards** (``reporting.guards``). A positional estimate whose sampling noise is over 10% of
   its energy, a baseline at chance, a no-context control inside the interval, two compared
   numbers that are the same, tokens a frequency list cannot score, a degenerate scheme:
   any of them makes the claim "inconclusive", and ``why`` says which fired.
3. **The interval.** A 95% interval that holds the threshold: "inconclusive".

Position/context claims read the view with position 0 left out (the original authors'
default), and the numbers with the sampling noise removed
(``analyses.decomposition.position_noise``).
Each record says what it is (``kind``): a claim of a paper, a geomlens variant of one, or
an identity (a check of a construction); the summary counts claims only. docs/claims.md
lists every claim with its scope, rule, guards and the source of its threshold.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

from geomlens.papers.published import published_scores
from geomlens.reporting import guards
from geomlens.reporting.guards import Guard
from geomlens.stats.rounding import sig

NO_INTERVAL = (
    "none: this run has no intervals over contexts (too few contexts or a run made before them)"
)


KINDS = ("claim", "variant", "identity")
"""What a record is: a paper's claim, a geomlens variant of one, or an identity check."""


@dataclass(frozen=True)
class Claim:
    """One claim: where it comes from, where it applies, the rule, and what this run says.

    Attributes:
        id: a stable short name ("song.pos_low_rank"), the key ``compare`` joins runs on.
        claim: the claim in plain words.
        paper: the paper that makes it.
        rule: the test applied, with its threshold.
        value: the deciding number(s), as text.
        verdict: "reproduced", "not reproduced", "inconclusive" (a guard fired or the 95%
            interval holds the threshold; ``why`` says which), "not applicable: <why>"
            (outside the claim's scope) or "not measured: <reason>".
        number: the deciding number (None when not measured).
        low, high: its 95% interval (None where the run has none; see ``interval``).
        threshold: the number the rule compares it with.
        interval: how the interval was obtained, or why there is none.
        published: the paper's own number for this run's model or setting ("" when it
            gives none; see ``papers.published``).
        kind: "claim", "variant" (geomlens's own form of a claim) or "identity".
        scope: the models and parts the paper made the claim about.
        threshold_source: where the threshold comes from.
        why: for an inconclusive verdict, the sentence saying why; for a verdict decided
            before the rule's comparison (the compared lists are the same), the reason
            ("" otherwise).
        guard: the guard that fired ("noise", "interval", "chance", ...; "" for none).
        noise_share: the share of the positional estimate's energy that is sampling noise
            (median over the layers read; None for claims that do not read it).
        contexts_needed: contexts at which that share would fall under 10%.
        published_number: the nearest published model's number on the claim's own scale
            (the median over corpora of its medians over layers; None without one): what
            the claims figure marks.
    """

    id: str
    claim: str
    paper: str
    rule: str
    value: str
    verdict: str
    number: float | None = None
    low: float | None = None
    high: float | None = None
    threshold: float | None = None
    interval: str = NO_INTERVAL
    published: str = ""
    kind: str = "claim"
    scope: str = ""
    threshold_source: str = ""
    why: str = ""
    guard: str = ""
    noise_share: float | None = None
    contexts_needed: int | None = None
    published_number: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """The record metrics.json keeps under "claims"."""
        return {k: sig(v) if isinstance(v, float) else v for k, v in asdict(self).items()}


SONG = "Song & Zhong 2023"


MOLINA = "Molina 2023"


SINGH = "Singh 2023"


SONG_SCOPE = (
    "every model kind and position scheme: the paper measures GPT-2's learned positions and "
    "shows the same structure in other models (its appendix, per the authors' reply)"
)


SINGH_KINDS = (
    "Singh studies decoder-only and encoder-decoder models and leaves BERT-style "
    "encoders out (section 2)"
)


def decide(
    number: float | None,
    threshold: float,
    above: bool,
    reason: str,
    low: float | None = None,
    high: float | None = None,
) -> str:
    """The verdict of "number >= threshold" (``above``) or "number <= threshold".

    An interval that holds the threshold decides nothing: "inconclusive".
    """
    if number is None:
        return f"not measured: {reason}"
    if guards.interval(low, high, threshold) is not None:
        return "inconclusive"
    holds = number >= threshold if above else number <= threshold
    return "reproduced" if holds else "not reproduced"


def judge(
    claim: Claim,
    above: bool,
    missing: str,
    fired: Sequence[Guard | None] = (),
    outside: str | None = None,
) -> Claim:
    """``claim`` with its verdict, ``why`` and ``guard``.

    Args:
        claim: the claim with its number, interval and threshold.
        above: the rule is "number >= threshold" (else "<=").
        missing: why the number is absent, when it is.
        fired: the claim's guards (None for those that did not fire), in order.
        outside: why the claim does not apply to this model, or None when it does.
    """
    if outside is not None:
        return replace(claim, verdict=f"not applicable: {outside}")
    assert claim.threshold is not None
    if claim.number is None:
        return replace(claim, verdict=f"not measured: {missing}")
    guard = guards.first(*fired, guards.interval(claim.low, claim.high, claim.threshold))
    if guard is not None:
        return replace(claim, verdict="inconclusive", why=guard.why, guard=guard.name)
    return replace(claim, verdict=decide(claim.number, claim.threshold, above, missing))


def text(
    number: float | None, fmt: str, *, low: float | None = None, high: float | None = None
) -> str:
    """``number`` in ``fmt``, with its interval when there is one ("–" when not measured)."""
    if number is None:
        return "–"
    shown = format(number, fmt)
    if low is not None and high is not None:
        shown += f" [{format(low, fmt)}, {format(high, fmt)}]"
    return shown


VERDICTS = ("reproduced", "not reproduced", "inconclusive", "not applicable", "not measured")
"""The kinds of verdict, in the order the summary counts them; a record's verdict is one of
them, the last two followed by ": <why>"."""


def verdict_kind(verdict: str) -> str:
    """Which of ``VERDICTS`` a record's verdict is ("not applicable: ..." is "not
    applicable")."""
    for kind in VERDICTS:
        if verdict == kind or verdict.startswith(f"{kind}:"):
            return kind
    raise ValueError(f"unknown verdict {verdict!r}; a claim's verdict is one of {VERDICTS}")


def counted(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """What the summary counts: every paper claim (not the variants or identities), by
    kind of verdict, so that the five counts sum to the number of claims; the variants and
    identities are listed apart.

    Returns:
        {"claims": n, "reproduced": n, "not reproduced": n, "inconclusive": n,
         "not applicable": n, "not measured": n, "apart": [ids of the variants and
         identities]}, the five verdict counts summing to "claims".
    """
    claims_only = [r for r in records if r.get("kind", "claim") == "claim"]
    kinds = [verdict_kind(r["verdict"]) for r in claims_only]
    out: dict[str, Any] = {"claims": len(claims_only)}
    out.update({kind: kinds.count(kind) for kind in VERDICTS})
    out["apart"] = [r["id"] for r in records if r.get("kind", "claim") != "claim"]
    return out


def claim_record(records: Sequence[dict[str, Any]], claim_id: str) -> dict[str, Any] | None:
    """The record of claim ``claim_id`` among a run's claim records (None when absent)."""
    return next((r for r in records if r.get("id") == claim_id), None)


def verdict_sentence(record: dict[str, Any]) -> str:
    """A claim's verdict as the claims table gives it, in one sentence, for a section that
    speaks of the same numbers: 'Molina 2023's claim "..." is not reproduced in this run
    (<why>; see Claims).'"""
    why = str(record.get("why") or "")
    return f'{record["paper"]}\'s claim "{record["claim"]}" is {record["verdict"]} in this run ' + (
        f"({why}; see Claims)." if why else "(see Claims)."
    )


def count_sentence(count: dict[str, Any]) -> str:
    """The summary's sentence: "10 claims: 2 reproduced, 1 not reproduced, 7 inconclusive,
    0 not applicable, 0 not measured", every kind named even at 0."""
    n = count["claims"]
    parts = ", ".join(f"{count[kind]} {kind}" for kind in VERDICTS)
    return f"{n} claim{'' if n == 1 else 's'}: {parts}"


def with_published_scores(found: list[Claim], model: dict[str, Any]) -> list[Claim]:
    """``found`` with the scores a paper publishes for this model beside each claim."""
    scores = published_scores(model)
    return [
        replace(c, published="; ".join(p for p in (c.published, scores.get(c.id, "")) if p))
        for c in found
    ]
