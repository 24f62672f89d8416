"""Singh's concept-space claims: tests 1 (pyramidal) and 2 (similarity) against the model's
own baseline, and which schemes may stand for them."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from geomlens.analyses.concepts.schema import ConceptsMetrics, SchemeResult
from geomlens.papers.published import model_kind, singh_range
from geomlens.reporting import guards
from geomlens.reporting.claims import SINGH, SINGH_KINDS, Claim, judge, text

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


def _concept_claim(
    concepts: ConceptsMetrics, test: str, prefix: str, reason: str, kind: str
) -> Claim:
    """Test 1 (pyramidal) or Test 2 (similarity): the share of the model's own baseline its
    best sound scheme keeps, against the shares the paper's models of its kind kept;
    guarded by chance, the no-context control and degenerate schemes."""
    headline = concepts.headline_key
    schemes, reason, degenerate = _concept_schemes(concepts, test, prefix, reason)
    best = best_scheme(concepts, prefix)
    score = None if best is None else schemes[best].value(headline)
    lo, hi = (None, None) if best is None else schemes[best].interval(headline)
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
        f"best {test} scheme's accuracy / the model's own baseline accuracy >= {words}; "
        "schemes that give back the input exactly or are flagged degenerate are left out",
        "–"
        if best is None
        else f"{text(score, '.2f', low=lo, high=hi)} of baseline ({best}){left}",
        "",
        score,
        lo,
        hi,
        threshold=threshold,
        interval="paired bootstrap over items, 1000 draws (the best of several schemes: the "
        "interval does not account for the choice)",
        scope="decoder-only and encoder-decoder models on a multiple-choice task (the paper: "
        "11 decoder-only and 3 encoder-decoder models on HellaSwag)",
        threshold_source=source,
    )
    if best is None and degenerate:
        name, what = next(iter(degenerate.items()))
        why = (
            f"every {test} scheme of this run that does not give back its input is "
            f"degenerate ({name}: {what}): none can decide the claim"
        )
        return replace(claim, verdict="inconclusive", why=why, guard="degenerate")
    fired = [guards.chance(acc, acc_low, chance), guards.no_context(ratio, lo, hi)]
    return judge(claim, True, reason, fired)


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
