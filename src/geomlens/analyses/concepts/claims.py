"""Singh's concept-space claims: tests 1 (pyramidal) and 2 (similarity) against the model's
own baseline, and which schemes may stand for them."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from geomlens.analyses.concepts.schema import (
    Baseline,
    ConceptsMetrics,
    SchemeResult,
    TaskTried,
)
from geomlens.papers.published import model_kind, singh_range
from geomlens.reporting import guards
from geomlens.reporting.claims import SINGH, SINGH_KINDS, Claim, judge, text
from geomlens.reporting.guards import Guard

IDENTICAL_LOGLIK = 1e-3  # a pyramidal scheme this close to the baseline reproduces the input


def sound_schemes(
    concepts: ConceptsMetrics, prefix: str = ""
) -> tuple[dict[str, SchemeResult], dict[str, str]]:
    """The schemes (names starting with ``prefix``) that may stand for the concept tests,
    and those left out with the reason: a scheme that gives back its input (a pyramidal
    scheme whose log-likelihoods equal the baseline's) and a degenerate one
    (``guards.degenerate``). A scheme without a headline score is in neither."""
    headline = concepts.headline_key
    chance = None if concepts.baseline is None else concepts.baseline.chance
    kept, left = {}, {}
    for name, scheme in (concepts.schemes or {}).items():
        if not name.startswith(prefix):
            continue
        diff = scheme.loglik_max_abs_diff_vs_baseline
        reason = (
            "it gives back the input itself"
            if diff is not None and diff <= IDENTICAL_LOGLIK
            else guards.degenerate(scheme.to_dict(), chance)
        )
        if reason is not None:
            left[name] = reason
        elif isinstance(scheme.value(headline), (int, float)):
            kept[name] = scheme
    return kept, left


def best_scheme(concepts: ConceptsMetrics, prefix: str = "") -> str | None:
    """The best scheme of a run's concept tests (of one test with ``prefix`` "P:" or
    "S:"): the highest headline score among ``sound_schemes``, ties by name. The claims
    and the concepts section both name this one."""
    kept, _ = sound_schemes(concepts, prefix)
    headline = concepts.headline_key
    return min(kept, key=lambda n: (-kept[n].value(headline), n), default=None)


def _concept_schemes(
    concepts: ConceptsMetrics, test: str, prefix: str, reason: str
) -> tuple[dict[str, SchemeResult], str, dict[str, str]]:
    """The schemes that may decide the claim of one test, why there are none, and the
    degenerate ones left out (name -> why)."""
    of_test = [n for n in concepts.schemes or {} if n.startswith(prefix)]
    schemes, left = sound_schemes(concepts, prefix)
    degenerate = {n: why for n, why in left.items() if why != "it gives back the input itself"}
    if concepts.schemes and not of_test:
        reason = f"no {test} scheme in this run"
    elif of_test and len(left) == len(of_test) and not degenerate:
        reason = f"every {test} scheme in this run gives back the input itself"
    elif not schemes and len(left) < len(of_test):
        reason = "the baseline answered no item right, so no score can be normalised by it"
    return schemes, reason, degenerate


PAPER_SHARES = {
    "pyramidal": (
        "section 5.1.1 and Fig. 10(a): no model reached its baseline (1.0); GPT-Neo-1.3B, "
        "the best, kept 0.839 zero-shot and 0.823 5-shot with the standard scheme (0.845 and "
        "0.849 with its best schemes), Flan-T5-large about 0.80 and 0.738"
    ),
    "similarity": (
        "section 5.1.2 and Fig. 10(b): no model reached its baseline (1.0); the "
        "encoder-decoders kept up to 0.96, the decoder-only models less (GPT-Neo-1.3B's best "
        "schemes 0.826 zero-shot and 0.805 5-shot)"
    ),
}
"""What Singh found in each test, with the section and figure that state it."""


def paper_share(test: str, kind: str, shots: int | None) -> tuple[float, str, str]:
    """The threshold of a concept test for a model of ``kind``: the least share of its
    baseline any of the paper's models of that kind kept in the test (Fig. 10, every
    segmentation, at the run's shots: zero-shot points for 0, 5-shot for more), with the
    rule's words for it and its source."""
    claim = f"singh.concepts_{test}"
    paper_kind = "encoder-decoder" if kind == "encoder-decoder" else "decoder"
    found = singh_range(claim, paper_kind, shots)
    assert found is not None  # the data holds both kinds for both tests
    low, high, n = found
    where = "zero-shot" if shots == 0 else "5-shot" if shots else "zero- and 5-shot"
    words = (
        f"{low:.3f}, the least share any of the paper's {n} {paper_kind} models kept "
        f"({where}; their range {low:.3f}-{high:.3f}, none at 1.0)"
    )
    source = (
        f"Singh 2023, {PAPER_SHARES[test]}; the threshold is the lowest of the {n} "
        f"{paper_kind} models' {where} points of that figure (the authors' "
        f"notebooks/charts/dist_{'gen' if test == 'pyramidal' else 'sim'}_*.csv, "
        "geomlens/data/published_values.json): a share in the paper's range is what it found"
    )
    return low, words, source


GAIN_FLOOR = 0.5
"""The least retained context gain a concept claim can hold: a scheme whose gain's 95%
interval lies below it keeps less than half of what the context adds to the model's answers,
so its vectors do not "stand in for much of the text" (geomlens's reading of the claim's
words; the paper measured no no-context control)."""


def context_guard(base: Baseline | None) -> Guard | None:
    """The task does not show the model using its context: its baseline is not above its
    no-context control by the paired test (or the run measured no such test)."""
    if base is None:
        return None
    test = base.context_test
    if test is None:
        return Guard(
            "context",
            "this run has no paired test of its baseline against the no-context control "
            "(made before geomlens measured one): run the concept tests again",
        )
    if test.qualifies:
        return None
    none = base.no_context.acc if base.no_context is not None else None
    shown = "–" if none is None else f"{none:.3f}"
    acc = "–" if base.acc is None else f"{base.acc:.3f}"
    return Guard(
        "context",
        f"the task does not show the model using its context: its baseline ({acc}) "
        f"is not above its no-context control ({shown}) by an exact McNemar test over the "
        f"{test.n} items (p = {test.p:.2g}, {test.baseline_only} items right only with the "
        f"context, {test.no_context_only} only without; level {test.alpha:g}), so no scheme "
        "can be judged on what the context adds",
    )


def tried_words(tried: list[TaskTried]) -> str:
    """The report's preference list as tried, in words (for a claim none of whose tasks
    qualified)."""
    parts = [
        f"{t.task} (not on this machine)" if t.test is None else f"{t.task} (p = {t.test.p:.2g})"
        for t in tried
    ]
    return "no task of the report's preference list qualified: " + ", ".join(parts)


def gain_words(value: float | None, low: float | None, high: float | None) -> str:
    """A retained gain with its interval, an unbounded end shown as an infinity."""
    if value is None:
        return "–"
    lo = "-inf" if low is None else f"{low:.2f}"
    hi = "+inf" if high is None else f"{high:.2f}"
    return f"{value:.2f} [{lo}, {hi}]"


def gain_decides(
    gain: tuple[float | None, float | None, float | None],
    acc_low: float | None,
    chance: float | None,
) -> tuple[str | None, str]:
    """What the retained gain alone decides, before the share of the baseline is read:
    ("not reproduced", why) when its interval lies below ``GAIN_FLOOR``; (None, why) when it
    forbids "reproduced" (its interval reaches 0, or the scheme is not above chance by its
    own interval); (None, "") when it leaves the decision to the share rule."""
    value, low, high = gain
    if value is None:
        return None, "the scheme has no retained context gain in this run"
    if high is not None and high < GAIN_FLOOR:
        return "not reproduced", (
            f"the scheme keeps {gain_words(*gain)} of what the context adds (scheme minus "
            f"no context over baseline minus no context), below {GAIN_FLOOR:g} by its 95% "
            "interval: its vectors carry little of the text"
        )
    if low is None or low <= 0:
        return None, (
            f"the scheme's retained context gain {gain_words(*gain)} is not above 0 by its "
            "95% interval: it is not told apart from reading no context at all"
        )
    if chance is not None and (acc_low is None or acc_low <= chance):
        return None, (
            f"the scheme's accuracy is not above chance ({chance:.3f}) by its own 95% interval"
        )
    return None, ""


def _concept_claim(
    concepts: ConceptsMetrics, test: str, prefix: str, reason: str, kind: str
) -> Claim:
    """Test 1 (pyramidal) or Test 2 (similarity): the share of the model's own baseline its
    best sound scheme keeps, against the shares the paper's models of its kind kept, and the
    share of the context's gain over the no-context control it keeps; guarded by chance, by
    the context test and by degenerate schemes."""
    headline = concepts.headline_key
    schemes, reason, degenerate = _concept_schemes(concepts, test, prefix, reason)
    best = best_scheme(concepts, prefix)
    score = None if best is None else schemes[best].value(headline)
    lo, hi = (None, None) if best is None else schemes[best].interval(headline)
    gain: tuple[float | None, float | None, float | None] = (None, None, None)
    scheme_low = None
    if best is not None:
        gain = (schemes[best].retained_gain, *schemes[best].interval("retained_gain"))
        scheme_low = (schemes[best].extra.get("acc_ci") or (None, None))[0]
    base = concepts.baseline
    acc = None if base is None else base.acc
    acc_low = None if base is None else (base.acc_ci or (None, None))[0]
    none_acc = None if base is None or base.no_context is None else base.no_context.acc
    chance = None if base is None else base.chance
    ratio = None if none_acc is None or not acc else none_acc / acc
    left = f"; {len(degenerate)} degenerate scheme(s) left out" if degenerate else ""
    shots = concepts.shots
    threshold, words, source = paper_share(test, kind, shots if isinstance(shots, int) else None)
    claim = Claim(
        f"singh.concepts_{test}",
        "Concept vectors stand in for much of the text they summarise: the model keeps a "
        f"share of its baseline accuracy comparable to the paper's models ({test} test)",
        SINGH,
        f"best {test} scheme's accuracy / the model's own baseline accuracy >= {words}, and "
        "its retained context gain (scheme - no context) / (baseline - no context) above 0 "
        f"by its 95% interval; not reproduced when that gain's interval lies below "
        f"{GAIN_FLOOR:g}. Only a task whose baseline beats its no-context control (exact "
        f"McNemar test over items, level 0.05) decides; a scheme not above chance is never "
        "reproduced; schemes that give back the input exactly or are flagged degenerate are "
        "left out",
        "–"
        if best is None
        else f"{text(score, '.2f', low=lo, high=hi)} of baseline, retained context gain "
        f"{gain_words(*gain)} ({best}){left}",
        "",
        score,
        lo,
        hi,
        threshold=threshold,
        interval="paired bootstrap over items, 1000 draws, for the share and the gain (the "
        "best of several schemes: the interval does not account for the choice)",
        scope="decoder-only and encoder-decoder models on a multiple-choice task where the "
        "model's answers use the context (the paper: 11 decoder-only and 3 encoder-decoder "
        "models on HellaSwag)",
        threshold_source=f"{source}; the gain floor {GAIN_FLOOR:g} is geomlens's: a scheme "
        "that keeps less than half of what the context adds does not stand for much of it",
    )
    if best is None and degenerate:
        name, what = next(iter(degenerate.items()))
        why = (
            f"every {test} scheme of this run that does not give back its input is "
            f"degenerate ({name}: {what}): none can decide the claim"
        )
        return replace(claim, verdict="inconclusive", why=why, guard="degenerate")
    before = guards.first(guards.chance(acc, acc_low, chance), context_guard(base))
    if before is not None and before.name == "context" and concepts.task_choice:
        before = Guard("context", before.why + "; " + tried_words(concepts.task_choice))
    if best is None or before is not None:
        return judge(claim, True, reason, [before])
    decided, why = gain_decides(gain, scheme_low, chance)
    if decided is not None:
        return replace(claim, verdict=decided, why=why, guard="")
    judged = judge(claim, True, reason, [guards.no_context(ratio, lo, hi)])
    if judged.verdict == "reproduced" and why:
        return replace(judged, verdict="inconclusive", why=why, guard="gain")
    return judged


def concept_claims(metrics: dict[str, Any], model: dict[str, Any]) -> list[Claim]:
    concepts = ConceptsMetrics.of(metrics) or ConceptsMetrics()
    reason = concepts.unsupported or "no concept tests in this run"
    kind = concepts.model_kind or model_kind(model)
    found = [
        _concept_claim(concepts, "pyramidal", "P:", reason, kind),
        _concept_claim(concepts, "similarity", "S:", reason, kind),
    ]
    if kind == "encoder":
        outside = f"not applicable: {SINGH_KINDS}"
        return [replace(c, verdict=outside, why="", guard="") for c in found]
    unavailable = (concepts.unsupported or "").startswith("not available: ")
    if unavailable:  # the readout is not the model's own (``ModelView.readout_differs``)
        outside = "not applicable: " + reason.removeprefix("not available: ")
        return [replace(c, verdict=outside, why="", guard="") for c in found]
    return found
