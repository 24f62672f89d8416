"""The papers' claims, each checked against the number of this run that decides it.

A claim reads one or two numbers already in metrics.json and compares them with a stated
rule; it never computes a new statistic. Position/context claims read the view with
position 0 left out (the original authors' default), so a massive activation at the first
token cannot decide them; the page shows both views elsewhere.
"""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass, replace
from typing import Any

from geomlens.report.published import comparison, published_for, published_text
from geomlens.stats.intervals import wilson
from geomlens.stats.rounding import sig

NO_INTERVAL = (
    "none: this run has no intervals over contexts (too few contexts or a run made before them)"
)


@dataclass(frozen=True)
class Claim:
    """One claim: where it comes from, the rule, and what this run says.

    Attributes:
        id: a stable short name ("song.pos_low_rank"), the key ``compare`` joins runs on.
        claim: the claim in plain words.
        paper: the paper that makes it.
        rule: the test applied, with its threshold.
        value: the deciding number(s), as text.
        verdict: "reproduced", "not reproduced", "inconclusive" (the 95% interval holds
            the threshold) or "not measured: <reason>".
        number: the deciding number (None when not measured).
        low, high: its 95% interval (None where the run has none; see ``interval``).
        threshold: the number the rule compares it with.
        interval: how the interval was obtained, or why there is none.
        published: the paper's own number for this run's model ("" when it gives none;
            see ``report.published``).
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

    def to_dict(self) -> dict[str, Any]:
        """The record metrics.json keeps under "claims"."""
        return {k: sig(v) if isinstance(v, float) else v for k, v in asdict(self).items()}


SONG = "Song & Zhong 2023"
MOLINA = "Molina 2023"
SINGH = "Singh 2023"
IDENTICAL_LOGLIK = 1e-3  # a pyramidal scheme this close to the baseline reproduces the input


def skip_first_layers(metrics: dict[str, Any]) -> list[dict[str, Any]]:
    """Per-layer decomposition rows of the view without position 0 (empty if absent)."""
    dec = metrics.get("decomposition") or {}
    if dec.get("skip_first"):
        return list(dec.get("layers", []))
    return list((dec.get("other_view") or {}).get("layers", []))


def skip_first_intervals(metrics: dict[str, Any]) -> dict[str, Any]:
    """The intervals over contexts of the view without position 0 ({} when absent)."""
    dec = metrics.get("decomposition") or {}
    view = dec if dec.get("skip_first") else dec.get("other_view") or {}
    return dict(view.get("intervals") or {})


def published_section(
    metrics: dict[str, Any], model: dict[str, Any] | None
) -> dict[str, Any] | None:
    """The run's numbers beside a paper's for the same model (None when no paper gives
    numbers for this run's model, or the run has no decomposition)."""
    found, rows = published_for(model), skip_first_layers(metrics)
    if found is None or not rows:
        return None
    return comparison(found, rows, skip_first_intervals(metrics))


def median_interval(
    intervals: dict[str, Any], key: str, scale: float | None = 1.0
) -> tuple[float | None, float | None]:
    """The interval of the median over layers of ``key`` (divided by ``scale``)."""
    low, high = (intervals.get("medians") or {}).get(key) or (None, None)
    if low is None or high is None or not scale:
        return None, None
    return low / scale, high / scale


def median_of(rows: list[dict[str, Any]], key: str) -> float | None:
    values = [r[key] for r in rows if isinstance(r.get(key), (int, float))]
    return statistics.median(values) if values else None


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
    if low is not None and high is not None and low <= threshold <= high:
        return "inconclusive"
    holds = number >= threshold if above else number <= threshold
    return "reproduced" if holds else "not reproduced"


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


def _interval_note(intervals: dict[str, Any], key: str) -> str:
    """How the interval of a median over layers was obtained, or why there is none."""
    if not intervals.get("method"):
        return NO_INTERVAL
    if key not in (intervals.get("medians") or {}):
        why = (intervals.get("not_resampled") or {}).get(key, "undefined in most draws")
        return f"none: {why}"
    return (
        f"{intervals['method']}; {intervals['n_draws']} draws of {intervals['groups']} "
        "groups, the median over layers of each draw"
    )


def _median_claim(
    ident: str,
    claim: str,
    rule: str,
    value: str,
    number: float | None,
    threshold: float,
    above: bool,
    interval: tuple[dict[str, Any], str, float | None],
) -> Claim:
    """A position/context claim on a median over layers, with that median's interval
    (``interval``: the view's intervals, the key, and the scale the number is divided by)."""
    intervals, key, scale = interval
    low, high = median_interval(intervals, key, scale) if number is not None else (None, None)
    reason = "no decomposition in this run"
    return Claim(
        ident,
        claim,
        SONG,
        rule,
        value,
        decide(number, threshold, above, reason, low, high),
        number,
        low,
        high,
        threshold=threshold,
        interval=_interval_note(intervals, key),
    )


def _position_claims(metrics: dict[str, Any], model: dict[str, Any]) -> list[Claim]:
    rows = skip_first_layers(metrics)
    published = published_section(metrics, model)
    found = skip_first_intervals(metrics)
    explained, rank = median_of(rows, "pos_explained"), median_of(rows, "pos_rank")
    low, smooth = median_of(rows, "pos_low_freq"), median_of(rows, "pos_smoothness")
    inc, rnd = median_of(rows, "incoherence_mean"), median_of(rows, "incoherence_random")
    ari = median_of(rows, "ctx_cluster_ari")
    within, between = median_of(rows, "ctx_cos_within"), median_of(rows, "ctx_cos_between")
    ratio = None if inc is None or not rnd else inc / rnd
    mu, mu_rnd = median_of(rows, "coherence_max"), median_of(rows, "coherence_random_max")
    mu_ratio = None if mu is None or not mu_rnd else mu / mu_rnd

    def shown(number: float | None, key: str, fmt: str, scale: float | None = 1.0) -> str:
        lo, hi = median_interval(found, key, scale)
        return text(number, fmt, low=lo, high=hi)

    claims = [
        replace(
            _median_claim(
                "song.pos_low_rank",
                "The positional part is low-rank",
                "median over layers: the top ScreeNOT-rank singular values carry >= 50% of the sum",
                "–"
                if explained is None
                else f"explained {shown(explained, 'pos_explained', '.2f')} at median rank "
                f"{text(rank, 'g')}",
                explained,
                0.5,
                True,
                (found, "pos_explained", 1.0),
            ),
            published=published_text(published, "pos_rank"),
        ),
        _median_claim(
            "song.pos_low_frequency",
            "The positional basis is low-frequency (smooth Gram matrix)",
            "median over layers of pos_low_freq (lowest 10% of DCT frequencies) >= 0.5",
            "–"
            if low is None
            else f"pos_low_freq {shown(low, 'pos_low_freq', '.2f')}, smoothness "
            f"{text(smooth, '.3f')}",
            low,
            0.5,
            True,
            (found, "pos_low_freq", 1.0),
        ),
        _median_claim(
            "song.incoherence",
            "Positional and context vectors are incoherent (nearly orthogonal)",
            "median over layers of the mutual coherence max |cos(pos_t, ctx_c)| <= 1.25 x "
            "that of as many Gaussian vectors",
            "–"
            if mu_ratio is None
            else f"{shown(mu, 'coherence_max', '.3f')} against random {mu_rnd:.3f}",
            mu_ratio,
            1.25,
            False,
            (found, "coherence_max", mu_rnd),
        ),
        _median_claim(
            "song.incoherence_subspaces",
            "Position and context subspaces are nearly orthogonal (geomlens variant)",
            "median mean principal-angle cosine of the top-k subspaces <= 1.25 x that of "
            "random subspaces",
            "–" if ratio is None else f"{inc:.3f} against random {rnd:.3f}",
            ratio,
            1.25,
            False,
            (found, "incoherence_mean", rnd),
        ),
        _topics_claim(ari, within, between, found, shown),
    ]
    claims.extend(_qk_claims(metrics))
    return claims


def _topics_claim(
    ari: float | None,
    within: float | None,
    between: float | None,
    found: dict[str, Any],
    shown: Any,
) -> Claim:
    """Song & Zhong: context vectors cluster by topic (ARI, and |cos| within > between)."""
    topics = None if ari is None or within is None or between is None else ari
    claim = _median_claim(
        "song.context_topics",
        "Context vectors cluster by document topic",
        "median ARI of k-means against topics >= 0.1 and within-topic |cos| > between",
        "–"
        if topics is None
        else f"ARI {shown(ari, 'ctx_cluster_ari', '.2f')}; |cos| within {within:.3f}, "
        f"between {between:.3f}",
        topics,
        0.1,
        True,
        (found, "ctx_cluster_ari", 1.0),
    )
    if topics is None:
        return replace(claim, verdict=decide(None, 0.1, True, "no topic labels"))
    if within is not None and between is not None and within <= between:
        return replace(claim, verdict="not reproduced")
    return claim


WHOLE_RESIDUAL = 0.5
"""The whole-W_QK fit must leave at most this relative residual (3/4 of ||W_QK||^2 fitted)."""


def _qk_claims(metrics: dict[str, Any]) -> list[Claim]:
    """W_QK low-rank plus diagonal over the whole matrix, its low-rank part in the positional
    subspace, and the geomlens variant inside the positional block (bases that fit exactly
    are no evidence there)."""
    qk = (metrics.get("attention") or {}).get("qk_basis") or []
    heads = [h for b in qk for h in b["heads"] if "whole_residual" in h]

    def median(key: str, rows: list[dict[str, Any]]) -> float | None:
        return statistics.median(h[key] for h in rows) if rows else None

    whole, whole_rand = median("whole_residual", heads), median("whole_baseline_residual", heads)
    inside, inside_rand = (
        median("whole_low_rank_in_basis", heads),
        median("whole_baseline_low_rank_in_basis", heads),
    )
    block = [h for b in qk if b["k"] > b["rank"] + 1 for h in b["heads"]]
    fit, rand = median("residual", block), median("baseline_residual", block)
    fit_ratio = None if fit is None or not rand else fit / rand
    missing = "no attention split" if not qk else "no whole-matrix fit in this run"
    whole_verdict = decide(whole, WHOLE_RESIDUAL, False, missing)
    if whole is not None and whole_rand is not None and whole >= whole_rand:
        whole_verdict = "not reproduced"
    return [
        Claim(
            "song.wqk_low_rank_plus_diagonal",
            "W_QK is low-rank plus diagonal",
            SONG,
            f"median relative residual of the rank-2 plus diagonal fit of the whole W_QK <= "
            f"{WHOLE_RESIDUAL} and below that of a random head of the same rank",
            "–" if whole is None else f"residual {whole:.3f} against random {whole_rand:.3f}",
            whole_verdict,
            whole,
            threshold=WHOLE_RESIDUAL,
            interval="none: a median over heads",
        ),
        Claim(
            "song.wqk_low_rank_positional",
            "W_QK's low-rank part lies in the positional subspace",
            SONG,
            "median share ||U^T L U||_F / ||L||_F of the whole fit's low-rank part L inside "
            "the top-k positional directions U >= 0.5",
            "–" if inside is None else f"{inside:.3f} against random {inside_rand:.3f}",
            decide(inside, 0.5, True, missing),
            inside,
            threshold=0.5,
            interval="none: a median over heads",
        ),
        Claim(
            "song.wqk_low_rank_plus_diagonal_block",
            "W_QK inside the positional basis is low-rank plus diagonal (geomlens variant)",
            SONG,
            "median relative residual of the fit of U^T W_QK U < that of a Gaussian matrix "
            "(ratio < 1)",
            "–" if fit_ratio is None else f"residual {fit:.3f} against random {rand:.3f}",
            decide(fit_ratio, 1.0, False, "no attention split"),
            fit_ratio,
            threshold=1.0,
            interval="none: a median over heads",
        ),
    ]


def _sphere_claims(metrics: dict[str, Any]) -> list[Claim]:
    sphere = metrics.get("sphere") or {}
    err = (sphere.get("identity") or {}).get("max_rel_err")
    return [
        Claim(
            "molina.layernorm_sphere",
            "Layer norm is a projection onto a hyperplane, then scaling onto a sphere",
            MOLINA,
            "max relative error of the construction against the model's norm <= 1e-4",
            "–" if err is None else f"{err:.1e}",
            decide(err, 1e-4, False, "no sphere analysis"),
            err,
            threshold=1e-4,
            interval="none: an exact computation (the error is rounding)",
        ),
        _gamma_beta_claim(sphere.get("top_tokens") or {}),
    ]


def _gamma_beta_claim(top: dict[str, Any]) -> Claim:
    """Molina: gamma/beta move the readout's top tokens toward common English words. When
    the top-k is the same set of tokens with and without them, nothing moved: not
    reproduced, whatever the resampled interval of a zero difference says."""
    shift, zipf = top.get("english_zipf_shift"), top.get("mean_english_zipf") or {}
    same = shift is not None and set(top["affine"]["top_ids"]) == set(top["plain"]["top_ids"])
    number, lo, hi, interval = None, None, None, "none"
    if shift is None:
        value, verdict = "–", decide(None, 0.0, True, "no English word frequencies in this run")
    elif same:
        value = f"the same {top['k']} tokens with and without gamma/beta (Zipf {zipf['plain']:.2f})"
        verdict, number = "not reproduced", 0.0
        interval = "none: the two lists are the same tokens"
    else:
        number, lo, hi = shift["value"], shift["low"], shift["high"]
        interval = f"{shift['method']}, {shift['n_boot']} draws"
        value = (
            f"{text(number, '+.2f', low=lo, high=hi)} (Zipf {zipf['affine']:.2f} with, "
            f"{zipf['plain']:.2f} without; vocabulary {zipf['vocab_mean']:.2f})"
        )
        verdict = decide(number, 0.0, True, "", lo, hi)
    return Claim(
        "molina.gamma_beta_common_words",
        "The final norm's gamma/beta shift the top-scoring tokens toward common words",
        MOLINA,
        "mean English Zipf frequency (wordfreq) of the top-10 tokens: with gamma/beta "
        "minus without > 0",
        value,
        verdict,
        number,
        lo,
        hi,
        threshold=0.0,
        interval=interval,
    )


def _fraction_interval(fraction: float, n: int) -> tuple[float, float]:
    w = wilson(round(fraction * n), n)
    return w["low"], w["high"]


def _stack_claims(
    walk: dict[str, Any], encoder: bool, stack: str | None, n_heads: int | None
) -> list[Claim]:
    """The walk and self-bias claims of one stack (``stack``: its name in an
    encoder-decoder, else None); an encoder's walk is expected to stay near its own token
    (Singh), a decoder's to leave it for the next token's."""
    enc = walk.get("encoding") or {}
    never = (enc.get("cos") or {}).get("frac_never_leave")
    n_pos = enc.get("n_positions")
    blocks = (enc.get("cos") or {}).get("frac_never_leave_ci")
    if never is None or not n_pos:
        lo, hi, how = None, None, "none: no walk analysis"
    elif blocks:  # neighbouring positions resampled together
        lo, hi = blocks["low"], blocks["high"]
        how = f"{blocks['method']}, {blocks['n_boot']} draws"
    else:  # a run made before the block bootstrap
        lo, hi = _fraction_interval(never, n_pos)
        how = (
            "Wilson score over positions of the walk text (neighbouring positions are not "
            "independent: the interval is a lower bound on the uncertainty)"
        )
    kern = walk.get("kernels") or {}
    neg = kern.get("negative_self_bias_fraction")
    n_kern = (
        None
        if neg is None or not n_heads
        else n_heads * len(kern.get("negative_self_bias_fraction_per_layer") or [])
    )
    klo, khi = (None, None) if neg is None or not n_kern else _fraction_interval(neg, n_kern)
    tag, suffix = ("", "") if stack is None else (f" ({stack} stack)", f".{stack}")
    return [
        Claim(
            f"singh.walk_{'stays' if encoder else 'leaves'}{suffix}",
            (
                "An encoder's vector stays near its own token up the layers"
                if encoder
                else "A token's walk up the layers leaves its own token's neighbourhood"
            )
            + tag,
            SINGH,
            "fraction of positions whose own token never leaves the top-k (cosine) "
            + (">= 0.5" if encoder else "<= 0.5"),
            text(never, ".2f", low=lo, high=hi) + ("" if never is None else " never leave"),
            decide(never, 0.5, encoder, "no walk analysis", lo, hi),
            never,
            lo,
            hi,
            threshold=0.5,
            interval=how,
        ),
        Claim(
            f"singh.negative_self_bias{suffix}",
            "Attention heads show a negative self-bias" + tag,
            SINGH,
            "fraction of heads attending less to their own position than to others >= 0.5",
            text(neg, ".2f", low=klo, high=khi) + ("" if neg is None else " of heads"),
            decide(neg, 0.5, True, "no kernels", klo, khi),
            neg,
            klo,
            khi,
            threshold=0.5,
            interval="Wilson score over heads",
        ),
    ]


def _bias_table_claims(walk: dict[str, Any], stack: str) -> list[Claim]:
    """Singh's reading of T5's learned relative-bias table itself (not the attention it
    produces): most heads' bias is lower at their own position than at the next few, and
    larger at far offsets than at middle ones. Only stacks with such a table."""
    table = (walk.get("kernels") or {}).get("bias_table")
    if not table:
        return []
    neg, far = table.get("negative_self_bias_fraction"), table.get("far_amplification_fraction")
    tag = f" ({stack} stack's bias table)"
    return [
        Claim(
            f"singh.negative_self_bias_table.{stack}",
            "The relative-position bias gives most heads a negative self-bias" + tag,
            SINGH,
            "fraction of heads whose bias at delta = 0 is below its mean over delta = 1-4 "
            ">= 0.5 (the paper: about 80% of T5's kernels)",
            text(neg, ".2f") + ("" if neg is None else " of heads"),
            decide(neg, 0.5, True, "no bias table"),
            neg,
            threshold=0.5,
            interval="none: the whole table, every head (nothing is sampled)",
        ),
        Claim(
            f"singh.far_amplification_table.{stack}",
            "The relative-position bias amplifies far positions" + tag,
            SINGH,
            "fraction of heads whose mean bias over 32 <= |delta| <= 63 exceeds that over "
            "8 <= |delta| <= 31 >= 0.5 (geomlens's threshold)",
            text(far, ".2f") + ("" if far is None else " of heads"),
            decide(far, 0.5, True, table.get("far_amplification_reason") or "no bias table"),
            far,
            threshold=0.5,
            interval="none: the whole table, every head (nothing is sampled)",
        ),
    ]


def _walk_claims(metrics: dict[str, Any], model: dict[str, Any]) -> list[Claim]:
    walk = metrics.get("walk") or {}
    n_heads = model.get("n_heads")
    if walk.get("decoder"):  # an encoder-decoder: each stack with its own expectation
        return [
            *_stack_claims(walk, True, "encoder", n_heads),
            *_bias_table_claims(walk, "encoder"),
            *_stack_claims(walk["decoder"], False, "decoder", n_heads),
            *_bias_table_claims(walk["decoder"], "decoder"),
        ]
    return _stack_claims(walk, bool(model.get("is_encoder")), None, n_heads)


def _concept_claim(concepts: dict[str, Any], test: str, prefix: str, reason: str) -> Claim:
    """Test 1 (pyramidal) or Test 2 (similarity): its best scheme that does not give back
    the input itself (a pyramidal scheme whose log-likelihoods equal the baseline's)."""
    headline = concepts.get("headline", "normalised_vs_acc")
    of_test = {n: s for n, s in (concepts.get("schemes") or {}).items() if n.startswith(prefix)}
    differ = {
        n: s
        for n, s in of_test.items()
        if s.get("loglik_max_abs_diff_vs_baseline") is None
        or s["loglik_max_abs_diff_vs_baseline"] > IDENTICAL_LOGLIK
    }
    schemes = {n: s for n, s in differ.items() if isinstance(s.get(headline), (int, float))}
    if concepts.get("schemes") and not of_test:
        reason = f"no {test} scheme in this run"
    elif of_test and not differ:
        reason = f"every {test} scheme in this run gives back the input itself"
    elif differ and not schemes:
        reason = "the baseline answered no item right, so no score can be normalised by it"
    best = max(schemes, key=lambda n: schemes[n][headline], default=None)
    score = None if best is None else schemes[best][headline]
    lo, hi = (
        (None, None) if best is None else tuple(schemes[best].get(f"{headline}_ci") or (None, None))
    )
    return Claim(
        f"singh.concepts_{test}",
        f"Concept vectors can stand in for the text they summarise ({test} test)",
        SINGH,
        f"best {test} scheme's accuracy >= 1.0 x the model's own baseline accuracy; "
        "schemes that give back the input exactly are left out",
        "–" if score is None else f"{text(score, '.2f', low=lo, high=hi)} of baseline ({best})",
        decide(score, 1.0, True, reason, lo, hi),
        score,
        lo,
        hi,
        threshold=1.0,
        interval="paired bootstrap over items, 1000 draws (the best of several schemes: the "
        "interval does not account for the choice)",
    )


def _concept_claims(metrics: dict[str, Any]) -> list[Claim]:
    concepts = metrics.get("concepts") or {}
    reason = concepts.get("unsupported", "no concept tests in this run")
    return [
        _concept_claim(concepts, "pyramidal", "P:", reason),
        _concept_claim(concepts, "similarity", "S:", reason),
    ]


def claims(metrics: dict[str, Any], model: dict[str, Any] | None = None) -> list[Claim]:
    """Every claim, in the order of the papers' sections.

    Args:
        metrics: a run's metrics.json.
        model: the manifest's "model" record (kind and head count; None: a decoder).
    """
    model = model or {}
    return [
        *_position_claims(metrics, model),
        *_sphere_claims(metrics),
        *_walk_claims(metrics, model),
        *_concept_claims(metrics),
    ]


def claim_records(
    metrics: dict[str, Any], model: dict[str, Any] | None = None
) -> list[dict[str, Any]]:
    """The claims as metrics.json keeps them."""
    return [c.to_dict() for c in claims(metrics, model)]


def run_claims(metrics: dict[str, Any], manifest: dict[str, Any]) -> list[dict[str, Any]]:
    """The claims a run holds in metrics.json, or (a run made before they were kept) its
    claims computed now from its numbers."""
    stored = metrics.get("claims")
    return list(stored) if stored is not None else claim_records(metrics, manifest.get("model"))


def run_published(metrics: dict[str, Any], manifest: dict[str, Any]) -> dict[str, Any] | None:
    """A paper's numbers for the run's model beside the run's, as the run stored them or
    (a run made before they were kept) computed now; None when no paper has any."""
    stored = metrics.get("published")
    return stored if stored else published_section(metrics, manifest.get("model"))
