"""Guards: the conditions under which a claim's number cannot decide it.

A claim's number is compared with its threshold only when no guard fires. Each guard
reads numbers already in metrics.json and, when it fires, gives the claim the verdict
"inconclusive" with one sentence saying why (``Guard.why``): a noisy positional estimate,
a noise floor too high to count weak positional directions, a spectrum that runs on
into that floor,
an interval that holds the threshold, a baseline no better than chance, a no-context
control inside the interval, two compared numbers that are the same, a frequency list
that cannot score the tokens, or only degenerate schemes (flagged by the concept stage, or
below chance by their own interval). See docs/claims.md.
"""

from __future__ import annotations

import math
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

NOISE_LIMIT = 0.1
"""Largest share of the positional estimate's energy that may be sampling noise."""

LEAST_ZIPF = 1.0
"""The least Zipf frequency English wordfreq gives a word it knows (0: unknown)."""


@dataclass(frozen=True)
class Guard:
    """A guard that fired: its short name and the sentence the claim carries."""

    name: str
    why: str


def first(*guards: Guard | None) -> Guard | None:
    """The first guard that fired, in the order given (None when none did)."""
    return next((g for g in guards if g is not None), None)


def noise(
    share: float | None,
    n_contexts: int | None,
    needed: int | None,
    limit: float = NOISE_LIMIT,
) -> Guard | None:
    """The positional estimate is too noisy: more than ``limit`` (10% unless a claim's
    own calibration gives another) of its energy is sampling noise, or the run cannot
    tell, having kept no groups of contexts. ``needed``: contexts that bring the share
    under ``limit``."""
    if share is None:
        return Guard(
            "noise",
            "this run kept no groups of contexts, so the sampling noise in the positional "
            "estimate is unknown",
        )
    if share <= limit:
        return None
    at = f" at {n_contexts} contexts" if n_contexts else ""
    more = (
        f"; about {needed:,} contexts would bring it under {limit:.0%}"
        if needed
        else "; no positional signal stands above it"
    )
    return Guard(
        "noise",
        f"sampling noise makes up {share:.0%} of the positional estimate's energy{at} "
        f"(median over layers), more than {limit:.0%}{more}",
    )


def interval(low: float | None, high: float | None, threshold: float) -> Guard | None:
    """The 95% interval holds the threshold."""
    if low is None or high is None or not low <= threshold <= high:
        return None
    return Guard(
        "interval",
        f"the 95% interval [{low:.3g}, {high:.3g}] holds the threshold {threshold:g}: this "
        "run cannot tell the two sides apart",
    )


def chance(acc: float | None, low: float | None, level: float | None) -> Guard | None:
    """The baseline is at or below chance, or not above it by its own interval."""
    if acc is None or level is None:
        return None
    if acc <= level:
        return Guard(
            "chance",
            f"the model's own baseline accuracy {acc:.3f} is at or below chance "
            f"({level:.3f}): a score normalised by it means nothing",
        )
    if low is not None and low <= level:
        return Guard(
            "chance",
            f"the baseline accuracy {acc:.3f} is not above chance ({level:.3f}) by its own "
            f"95% interval (from {low:.3f}): a score normalised by it means nothing",
        )
    return None


def no_context(ratio: float | None, low: float | None, high: float | None) -> Guard | None:
    """The no-context control (the choices scored alone), as a share of the baseline, lies
    inside the scheme's interval: the scheme is not told apart from reading no context."""
    if ratio is None or low is None or high is None or not low <= ratio <= high:
        return None
    return Guard(
        "no-context",
        f"scoring the choices with no context reaches {ratio:.2f} of the baseline, inside "
        f"this scheme's interval [{low:.2f}, {high:.2f}]: the scheme is not told apart "
        "from reading no context at all",
    )


def same_numbers(a: float | None, b: float | None, what: str, digits: int = 2) -> Guard | None:
    """Two compared numbers are the same to the ``digits`` they are shown with."""
    if a is None or b is None or round(a, digits) != round(b, digits):
        return None
    return Guard(
        "identical",
        f"{what} are the same to {digits} decimals ({a:.{digits}f} and {b:.{digits}f}): "
        "there is no difference to judge",
    )


def same_lists(a: Sequence[int], b: Sequence[int], what: str) -> Guard | None:
    """Two compared lists hold the same items, or differ in at most one of ten or more."""
    differ = len(set(a) ^ set(b)) // 2
    if differ > (1 if min(len(a), len(b)) >= 10 else 0):
        return None
    how = "hold the same tokens" if differ == 0 else f"differ in only {differ} token"
    return Guard("identical", f"{what} {how}: there is no difference to judge")


def _scorable(token: str) -> bool:
    """Whether English word frequency can score a token: it holds a Latin letter or a
    digit (text in other scripts, and bare punctuation, score 0 whatever their use)."""
    for ch in token.strip():
        if ch.isdigit():
            return True
        if ch.isalpha() and "LATIN" in unicodedata.name(ch, ""):
            return True
    return False


def unscorable(lists: dict[str, Sequence[str]], means: dict[str, float | None]) -> Guard | None:
    """English word frequency cannot score the compared tokens: half of a list or more is
    in another script or bare punctuation, or a list's mean Zipf frequency is below the
    least any known word gets.

    Args:
        lists: name -> the tokens of that list.
        means: name -> the list's mean English Zipf frequency.
    """
    for name, tokens in lists.items():
        out = [t for t in tokens if not _scorable(t)]
        if tokens and 2 * len(out) >= len(tokens):
            return Guard(
                "unscorable",
                f"{len(out)} of the {len(tokens)} tokens {name} are not English text (another "
                "script or punctuation), which English word frequency scores 0 whatever "
                "their use: the frequency measure cannot score them",
            )
    for name, mean in means.items():
        if mean is not None and math.isfinite(mean) and mean < LEAST_ZIPF:
            return Guard(
                "unscorable",
                f"the tokens {name} have a mean English Zipf frequency of {mean:.2f}, below "
                f"{LEAST_ZIPF:g}, the least English wordfreq gives any word it knows: they are "
                "mostly unknown to it or among its rarest entries, so the mean cannot say "
                "how common they are",
            )
    return None


def resolution(floor: float | None, least: float) -> Guard | None:
    """The noise floor of the positional spectrum (``pos_eigen_floor``: the eigenvalue
    noise alone reaches, over the noise-free energy; median over layers) is above
    ``least``: a direction holding that share of the positional energy would not be
    counted, so a count of directions cannot rule out more of them."""
    if floor is None or not math.isfinite(floor) or floor <= least:
        return None
    return Guard(
        "resolution",
        f"noise alone reaches {floor:.3g} of the noise-free positional energy in one "
        f"direction (median over layers), above {least:.3g}: weaker directions of the "
        "positional part cannot be told from noise, so they go uncounted",
    )


def no_gap(margin: float | None, least: float, rank: float | None, bound: float) -> Guard | None:
    """The positional spectrum runs on into its noise floor: the weakest direction counted
    holds less than ``least`` times the floor (``pos_rank_margin``, median over layers), so
    a decaying tail may go on under the floor, and a count at or under ``bound`` cannot
    rule out more directions. A count above ``bound`` is biased low, so it decides anyway."""
    if margin is None or not math.isfinite(margin) or margin >= least:
        return None
    if rank is not None and rank > bound:
        return None
    return Guard(
        "no gap",
        f"the weakest direction counted stands only {margin:.2g} times above the noise floor "
        f"(median over layers; under {least:g}): the spectrum runs on into the floor, so a "
        "tail of weaker directions may lie under it uncounted",
    )


def short_windows(n_positions: int | None, rank: float) -> Guard | None:
    """Windows too short for a rank of ``rank`` to be low (fewer than 5 x rank positions)."""
    if n_positions is None or n_positions >= 5 * rank:
        return None
    return Guard(
        "short windows",
        f"windows of {n_positions} positions are too short for a rank of {rank:g} to count "
        f"as low (at least {5 * rank:g} are needed; the paper used 511)",
    )


def degenerate(scheme: dict[str, Any], chance: float | None) -> str | None:
    """Why a concept scheme cannot stand for the text it summarises (None when it can): the
    concept stage flagged it (its ``degenerate`` entry says why), or its accuracy is below
    chance by its own 95% interval. Guessing scores chance; a scheme reliably under it
    does not read the choices but a bias of its own construction, as cosine similarity does
    when every vector shares one massive direction and the choices' cosines tie
    (docs/concepts.md, SmolLM2)."""
    if scheme.get("degenerate"):
        return str(scheme["degenerate"])
    high = (scheme.get("acc_ci") or (None, None))[1]
    if chance is None or high is None or not high < chance:
        return None
    return (
        f"its accuracy {scheme.get('acc', math.nan):.3f} is below chance ({chance:.3f}) by its "
        f"own 95% interval (up to {high:.3f})"
    )


def unknown_words(lists: dict[str, tuple[int, int]]) -> Guard | None:
    """Word frequency cannot score the compared tokens: half of a list or more is known to
    no wordfreq language (punctuation, pieces of words, scripts it has no list for). A
    token in another script than Latin is scored in its own script's language, so Bengali
    or Hindi tokens do not fire it (``analyses.sphere.word_frequency``).

    Args:
        lists: name -> (tokens of that list no wordfreq language knows, tokens in it).
    """
    for name, (unknown, total) in lists.items():
        if total and 2 * unknown >= total:
            return Guard(
                "unscorable",
                f"{unknown} of the {total} tokens {name} are known to no wordfreq language "
                "(punctuation, pieces of words or a script it has no list for), which scores "
                "them 0 whatever their use: the frequency measure cannot score them",
            )
    return None
