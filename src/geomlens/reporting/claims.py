"""The papers' claims, each checked against the number of this run that decides it.

A claim reads numbers already in metrics.json and compares one with a stated rule; it
never computes a new statistic. Before the comparison, in this order:

1. **Scope.** A claim applies only to the models and parts its paper made it about (model
   kind, position scheme); elsewhere it is "not applicable: <why>", with its number still
   shown.
2. **Guards** (``report.guards``). A positional estimate whose sampling noise is over 10% of
   its energy, a baseline at chance, a no-context control inside the interval, two compared
   numbers that are the same, tokens a frequency list cannot score, a degenerate scheme:
   any of them makes the claim "inconclusive", and ``why`` says which fired.
3. **The interval.** A 95% interval that holds the threshold: "inconclusive".

Position/context claims read the view with position 0 left out (the original authors'
default), and the numbers with the sampling noise removed (``analyses.position_noise``).
Each record says what it is (``kind``): a claim of a paper, a geomlens variant of one, or
an identity (a check of a construction); the summary counts claims only. docs/claims.md
lists every claim with its scope, rule, guards and the source of its threshold.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

from geomlens.analyses.position_noise import contexts_needed
from geomlens.reporting import guards
from geomlens.reporting.guards import Guard
from geomlens.reporting.published import (
    comparison,
    published_for,
    published_scores,
    published_text,
)
from geomlens.stats.intervals import wilson
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
            gives none; see ``report.published``).
        kind: "claim", "variant" (geomlens's own form of a claim) or "identity".
        scope: the models and parts the paper made the claim about.
        threshold_source: where the threshold comes from.
        why: for an inconclusive verdict, the sentence saying why ("" otherwise).
        guard: the guard that fired ("noise", "interval", "chance", ...; "" for none).
        noise_share: the share of the positional estimate's energy that is sampling noise
            (median over the layers read; None for claims that do not read it).
        contexts_needed: contexts at which that share would fall under 10%.
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

    def to_dict(self) -> dict[str, Any]:
        """The record metrics.json keeps under "claims"."""
        return {k: sig(v) if isinstance(v, float) else v for k, v in asdict(self).items()}


SONG = "Song & Zhong 2023"
MOLINA = "Molina 2023"
SINGH = "Singh 2023"
IDENTICAL_LOGLIK = 1e-3  # a pyramidal scheme this close to the baseline reproduces the input


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


def counted(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """What the summary counts: the papers' claims (not variants or identities) that apply
    here and were measured, by verdict; the variants and identities are listed apart.

    Returns:
        {"claims": n, "reproduced": n, "not reproduced": n, "inconclusive": n,
         "not applicable": n, "apart": [ids of the variants and identities]}.
    """
    claims_only = [r for r in records if r.get("kind", "claim") == "claim"]
    out: dict[str, Any] = {
        verdict: sum(r["verdict"] == verdict for r in claims_only)
        for verdict in ("reproduced", "not reproduced", "inconclusive")
    }
    out["claims"] = out["reproduced"] + out["not reproduced"] + out["inconclusive"]
    out["not applicable"] = sum(r["verdict"].startswith("not applicable") for r in claims_only)
    out["apart"] = [r["id"] for r in records if r.get("kind", "claim") != "claim"]
    return out


# ---------------------------------------------------------------- Song & Zhong: position


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
    per-layer numbers for this run's model, or the run has no decomposition)."""
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


@dataclass(frozen=True)
class PositionView:
    """What the position/context claims read: the rows without position 0, their
    intervals, and the noise in their positional estimate."""

    rows: list[dict[str, Any]]
    intervals: dict[str, Any]

    def median(self, key: str) -> float | None:
        return median_of(self.rows, key)

    def shown(self, key: str, fmt: str, scale: float | None = 1.0) -> str:
        """The median of ``key`` over layers, with its interval (divided by ``scale``)."""
        number = self.median(key)
        low, high = median_interval(self.intervals, key, scale)
        return text(None if number is None else number / (scale or 1.0), fmt, low=low, high=high)

    def noise(self, layers: set[int] | None = None) -> tuple[float | None, int | None]:
        """(median noise share over the layers, contexts for 10%) of ``layers`` (all)."""
        rows = [r for r in self.rows if layers is None or r.get("layer") in layers]
        share = median_of(rows, "pos_noise_share")
        contexts = next((r.get("n_contexts") for r in rows), None)
        needed = None if share is None or not contexts else contexts_needed(share, int(contexts))
        return share, needed

    @property
    def missing(self) -> str:
        """Why a position claim has no number."""
        return NOISE_MISSING if self.rows else "no decomposition in this run"

    def noise_guard(self, layers: set[int] | None = None) -> Guard | None:
        share, needed = self.noise(layers)
        contexts = next((r.get("n_contexts") for r in self.rows), None)
        return guards.noise(share, contexts, needed)


NOISE_MISSING = (
    "this run has no noise-corrected positional numbers (it kept no groups of contexts, or "
    "was made before them)"
)
SONG_SCOPE = (
    "every model kind and position scheme: the paper measures GPT-2's learned positions and "
    "shows the same structure in other models (its appendix, per the authors' reply)"
)
LOW_RANK = 20
"""The rank a low-rank positional part stays within: the ScreeNOT bound of Song & Zhong's
code, under which their GPT-2 ranks lie (9-15 by layer, Table 1)."""


def _median_claim(view: PositionView, key: str, scale: float | None, **fields: Any) -> Claim:
    """A position/context claim on the median over layers of ``key`` (divided by
    ``scale``), with that median's interval and the noise in the positional estimate."""
    number = view.median(key)
    number = None if number is None or not scale else number / scale
    low, high = median_interval(view.intervals, key, scale) if number is not None else (None, None)
    share, needed = view.noise()
    return Claim(
        verdict="",
        number=number,
        low=low,
        high=high,
        interval=_interval_note(view.intervals, key),
        paper=SONG,
        noise_share=share,
        contexts_needed=needed,
        **fields,
    )


def _low_rank(view: PositionView, published: dict[str, Any] | None) -> Claim:
    n_pos = next((r.get("n_positions") for r in view.rows), None)
    rank = view.median("pos_rank_corrected")
    claim = _median_claim(
        view,
        "pos_rank_corrected",
        1.0,
        id="song.pos_low_rank",
        claim="The positional part is low-rank",
        rule="median over layers of the number of directions of pos standing above its noise "
        f"floor (eigenvalues of the noise-free Gram matrix) <= {LOW_RANK}",
        value="–"
        if rank is None
        else f"{rank:g} direction(s) above the noise floor; with the noise removed 95% of the "
        f"energy in {view.shown('pos_rank95_corrected', '.3g')} (plain "
        f"{text(view.median('pos_rank95'), 'g')}, noise alone "
        f"{text(view.median('pos_rank95_noise'), 'g')}), stable rank "
        f"{view.shown('pos_stable_rank_corrected', '.2f')}",
        threshold=float(LOW_RANK),
        scope=SONG_SCOPE,
        threshold_source="the ScreeNOT rank bound k = 20 of the authors' code, under which "
        "their GPT-2 ranks lie (9-15 by layer; Table 1)",
        published=published_text(published, "pos_rank"),
    )
    if rank is not None:
        claim = replace(
            claim,
            interval="none: a count of eigenvalues above the whole corpus's noise floor (the "
            "floor is not redrawn per resample)",
        )
    return judge(
        claim,
        False,
        view.missing,
        [view.noise_guard(), guards.short_windows(n_pos, LOW_RANK)],
    )


def _low_frequency(view: PositionView) -> Claim:
    key = "pos_low_freq_energy_corrected"
    claim = _median_claim(
        view,
        key,
        1.0,
        id="song.pos_low_frequency",
        claim="The positional basis is low-frequency (smooth Gram matrix)",
        rule="median over layers of the share of pos's energy, noise removed, in the lowest "
        "10% of frequencies over positions >= 0.5",
        value="–"
        if view.median(key) is None
        else f"{view.shown(key, '.2f')} with the noise removed (plain "
        f"{text(view.median('pos_low_freq_energy'), '.2f')}; noise alone "
        f"{text(view.median('pos_low_freq_energy_noise'), '.2f')}); the normalised Gram "
        f"matrix's low-frequency share {text(view.median('pos_low_freq'), '.2f')} (plain)",
        threshold=0.5,
        scope=SONG_SCOPE,
        threshold_source="geomlens: half of the energy, five times the 10% that white noise "
        "puts there (the paper states the property, not a number)",
    )
    return judge(claim, True, view.missing, [view.noise_guard()])


def _incoherence(view: PositionView) -> Claim:
    baseline = view.median("coherence_max_noise")
    gauss = view.median("coherence_random_max")
    claim = _median_claim(
        view,
        "coherence_max_corrected",
        baseline,
        id="song.incoherence",
        claim="Positional and context vectors are incoherent (nearly orthogonal)",
        rule="median over layers of the mutual coherence max |cos(pos_t, ctx_c)|, noise "
        "removed, <= 1.25 x that of a split-half noise-only positional estimate treated alike",
        value="–"
        if baseline is None or view.median("coherence_max_corrected") is None
        else f"{view.shown('coherence_max_corrected', '.3f')} with the noise removed "
        f"(plain {text(view.median('coherence_max'), '.3f')}) against "
        f"{baseline:.3f} for noise alone (isotropic Gaussian vectors: {text(gauss, '.3f')})",
        threshold=1.25,
        scope=SONG_SCOPE,
        threshold_source="geomlens: within a quarter of the baseline (the paper states no "
        "number); the baseline keeps the hidden states' anisotropy, which Gaussian vectors "
        "lack",
    )
    return judge(claim, False, view.missing, [view.noise_guard()])


def _incoherence_subspaces(view: PositionView) -> Claim:
    baseline = view.median("incoherence_mean_noise")
    claim = _median_claim(
        view,
        "incoherence_mean_corrected",
        baseline,
        id="song.incoherence_subspaces",
        claim="Position and context subspaces are nearly orthogonal (geomlens variant)",
        rule="median mean principal-angle cosine between the top-r positional directions "
        "(noise removed) and the top-r context directions <= 1.25 x that of a split-half "
        "noise-only estimate",
        value="–"
        if baseline is None or view.median("incoherence_mean_corrected") is None
        else f"{view.shown('incoherence_mean_corrected', '.3f')} against {baseline:.3f} for "
        "noise alone",
        threshold=1.25,
        kind="variant",
        scope=SONG_SCOPE,
        threshold_source="geomlens, as the coherence claim",
    )
    return judge(claim, False, view.missing, [view.noise_guard()])


def _topics(view: PositionView) -> Claim:
    """Song & Zhong: context vectors cluster by topic (ARI, and |cos| within > between)."""
    ari, within, between = (
        view.median("ctx_cluster_ari"),
        view.median("ctx_cos_within"),
        view.median("ctx_cos_between"),
    )
    topics = None if ari is None or within is None or between is None else ari
    claim = _median_claim(
        view,
        "ctx_cluster_ari",
        1.0,
        id="song.context_topics",
        claim="Context vectors cluster by document topic",
        rule="median ARI of k-means against topics >= 0.1 and within-topic |cos| > between",
        value="–"
        if topics is None
        else f"ARI {view.shown('ctx_cluster_ari', '.2f')}; |cos| within {within:.3f}, "
        f"between {between:.3f}",
        threshold=0.1,
        scope=SONG_SCOPE + "; needs documents with topic labels",
        threshold_source="geomlens: clearly above the 0 of a random clustering",
    )
    claim = replace(claim, number=topics, noise_share=None, contexts_needed=None)
    judged = judge(claim, True, "no topic labels" if view.rows else view.missing)
    if topics is not None and within is not None and between is not None and within <= between:
        return replace(judged, verdict="not reproduced", why="", guard="")
    return judged


def position_claims(metrics: dict[str, Any], model: dict[str, Any]) -> list[Claim]:
    view = PositionView(skip_first_layers(metrics), skip_first_intervals(metrics))
    return [
        _low_rank(view, published_section(metrics, model)),
        _low_frequency(view),
        _incoherence(view),
        _incoherence_subspaces(view),
        _topics(view),
        *_qk_claims(metrics, view),
    ]


# ---------------------------------------------------------------- Song & Zhong: W_QK

WHOLE_RESIDUAL = 0.5
"""The whole-W_QK fit must leave at most this relative residual (3/4 of ||W_QK||^2 fitted)."""


def _median_over_heads(key: str, heads: list[dict[str, Any]]) -> float | None:
    return statistics.median(h[key] for h in heads) if heads else None


def _qk_claims(metrics: dict[str, Any], view: PositionView) -> list[Claim]:
    """W_QK low-rank plus diagonal over the whole matrix, its low-rank part in the positional
    subspace, and the geomlens variant inside the positional block (bases that fit exactly
    are no evidence there). The two read in the positional basis carry the noise guard of
    the blocks' layers: the basis is the noisy estimate's top directions."""
    qk = (metrics.get("attention") or {}).get("qk_basis") or []
    heads = [h for b in qk for h in b["heads"] if "whole_residual" in h]
    inside, inside_rand = (
        _median_over_heads("whole_low_rank_in_basis", heads),
        _median_over_heads("whole_baseline_low_rank_in_basis", heads),
    )
    block = [h for b in qk if b["k"] > b["rank"] + 1 for h in b["heads"]]
    fit, rand = (
        _median_over_heads("residual", block),
        _median_over_heads("baseline_residual", block),
    )
    fit_ratio = None if fit is None or not rand else fit / rand
    missing = "no attention split" if not qk else "no whole-matrix fit in this run"
    share, needed = view.noise({b.get("layer") for b in qk})
    noisy = guards.noise(share, next((r.get("n_contexts") for r in view.rows), None), needed)
    common: dict[str, Any] = {
        "paper": SONG,
        "verdict": "",
        "interval": "none: a median over heads",
        "scope": SONG_SCOPE,
        "noise_share": share,
        "contexts_needed": needed,
    }
    return [
        _qk_whole_claim(heads, missing, common),
        judge(
            Claim(
                "song.wqk_low_rank_positional",
                "W_QK's low-rank part lies in the positional subspace",
                rule="median share ||U^T L U||_F / ||L||_F of the whole fit's low-rank part "
                "L inside the top-k positional directions U >= 0.5",
                value="–" if inside is None else f"{inside:.3f} against random {inside_rand:.3f}",
                number=inside,
                threshold=0.5,
                threshold_source="geomlens: half of the low-rank part",
                **common,
            ),
            True,
            missing,
            [noisy],
        ),
        judge(
            Claim(
                "song.wqk_low_rank_plus_diagonal_block",
                "W_QK inside the positional basis is low-rank plus diagonal (geomlens variant)",
                rule="median relative residual of the fit of U^T W_QK U < that of a Gaussian "
                "matrix (ratio < 1)",
                value="–" if fit_ratio is None else f"residual {fit:.3f} against random {rand:.3f}",
                number=fit_ratio,
                threshold=1.0,
                kind="variant",
                threshold_source="geomlens: better than a random matrix",
                **common,
            ),
            False,
            "no attention split",
            [noisy],
        ),
    ]


def _qk_whole_claim(heads: list[dict[str, Any]], missing: str, common: dict[str, Any]) -> Claim:
    """W_QK is low-rank plus diagonal: the fit of the whole matrix, against a random head
    (it does not read the positional basis: no noise guard)."""
    whole = _median_over_heads("whole_residual", heads)
    whole_rand = _median_over_heads("whole_baseline_residual", heads)
    claim = judge(
        Claim(
            "song.wqk_low_rank_plus_diagonal",
            "W_QK is low-rank plus diagonal",
            rule=f"median relative residual of the rank-2 plus diagonal fit of the whole "
            f"W_QK <= {WHOLE_RESIDUAL} and below that of a random head of the same rank",
            value="–" if whole is None else f"residual {whole:.3f} against random {whole_rand:.3f}",
            number=whole,
            threshold=WHOLE_RESIDUAL,
            threshold_source="geomlens: three quarters of ||W_QK||^2 fitted (the paper "
            "states the structure, not a number)",
            **{**common, "noise_share": None, "contexts_needed": None},
        ),
        False,
        missing,
    )
    if whole is not None and whole_rand is not None and whole >= whole_rand:
        return replace(claim, verdict="not reproduced", why="", guard="")
    return claim


# ---------------------------------------------------------------- Molina: the sphere

MOLINA_SCOPE = (
    "language models whose final norm feeds a trained readout (the paper: GPT-2); an "
    "encoder-only model's readout through its embeddings is not one"
)


def sphere_claims(metrics: dict[str, Any], model: dict[str, Any]) -> list[Claim]:
    sphere = metrics.get("sphere") or {}
    err = (sphere.get("identity") or {}).get("max_rel_err")
    identity = Claim(
        "molina.layernorm_sphere",
        "Layer norm is a projection onto a hyperplane, then scaling onto a sphere",
        MOLINA,
        "max relative error of the construction against the model's norm <= 1e-4",
        "–" if err is None else f"{err:.1e}",
        "",
        err,
        threshold=1e-4,
        interval="none: an exact computation (the error is rounding)",
        kind="identity",
        scope="every norm layer of the model (an identity of the construction, not a "
        "finding about a model)",
        threshold_source="float64 rounding",
    )
    outside = (
        "this is an encoder-only model: its readout through the embeddings is not a trained "
        "language-model head, and Molina's claim is about one (GPT-2's)"
        if model.get("is_encoder")
        else None
    )
    return [
        judge(identity, False, "no sphere analysis"),
        _gamma_beta_claim(sphere.get("top_tokens") or {}, outside),
    ]


def _gamma_beta_claim(top: dict[str, Any], outside: str | None) -> Claim:
    """Molina: gamma/beta move the readout's top tokens toward common English words."""
    shift, zipf = top.get("english_zipf_shift"), top.get("mean_english_zipf") or {}
    number = lo = hi = None
    interval, value, fired = "none", "–", []
    if shift is not None:
        number, lo, hi = shift["value"], shift["low"], shift["high"]
        interval = f"{shift['method']}, {shift['n_boot']} draws"
        value = (
            f"{text(number, '+.2f', low=lo, high=hi)} (Zipf {zipf['affine']:.2f} with, "
            f"{zipf['plain']:.2f} without; vocabulary {zipf['vocab_mean']:.2f})"
        )
        k = top.get("k", 10)
        with_ids, without_ids = top["affine"]["top_ids"], top["plain"]["top_ids"]
        fired = [
            guards.same_lists(
                with_ids, without_ids, f"the top {k} tokens with and without gamma/beta"
            ),
            guards.unscorable(
                {
                    "with gamma/beta": top["affine"].get("top", []),
                    "without gamma/beta": top["plain"].get("top", []),
                },
                {"with gamma/beta": zipf.get("affine"), "without gamma/beta": zipf.get("plain")},
            ),
            guards.same_numbers(
                zipf.get("affine"), zipf.get("plain"), "the mean Zipf frequencies compared"
            ),
        ]
    claim = Claim(
        "molina.gamma_beta_common_words",
        "The final norm's gamma/beta shift the top-scoring tokens toward common words",
        MOLINA,
        "mean English Zipf frequency (wordfreq) of the top-10 tokens: with gamma/beta "
        "minus without > 0",
        value,
        "",
        number,
        lo,
        hi,
        threshold=0.0,
        interval=interval,
        scope=MOLINA_SCOPE,
        threshold_source="the paper's direction (toward common words); 0 is no shift",
    )
    return judge(claim, True, "no English word frequencies in this run", fired, outside)


# ---------------------------------------------------------------- Singh: movement

SINGH_KINDS = (
    "Singh studies decoder-only and encoder-decoder models and leaves BERT-style "
    "encoders out (section 2)"
)
NEGATIVE_SELF_BIAS = 0.75
"""The paper's "about 80%" of T5 encoder kernels attenuating self, read as at least 75%."""
FAR_AMPLIFICATION = 0.25
"""The paper's "about 30%" of decoder heads amplifying far positions, read as at least 25%."""


def _fraction_interval(fraction: float, n: int) -> tuple[float, float]:
    w = wilson(round(fraction * n), n)
    return w["low"], w["high"]


def _walk_interval(enc: dict[str, Any]) -> tuple[float | None, float | None, str]:
    """The never-leave fraction's interval and how it was obtained."""
    never = (enc.get("cos") or {}).get("frac_never_leave")
    n_pos = enc.get("n_positions")
    blocks = (enc.get("cos") or {}).get("frac_never_leave_ci")
    if never is None or not n_pos:
        return None, None, "none: no walk analysis"
    if blocks:  # neighbouring positions resampled together
        return blocks["low"], blocks["high"], f"{blocks['method']}, {blocks['n_boot']} draws"
    lo, hi = _fraction_interval(never, n_pos)  # a run made before the block bootstrap
    return (
        lo,
        hi,
        "Wilson score over positions of the walk text (neighbouring positions are not "
        "independent: the interval is a lower bound on the uncertainty)",
    )


def _walk_claim(
    walk: dict[str, Any], encoder: bool, stack: str | None, outside: str | None
) -> Claim:
    """An encoder stack's walk is expected to stay near its own token (Singh), a decoder
    stack's to leave it for the next token's."""
    enc = walk.get("encoding") or {}
    never = (enc.get("cos") or {}).get("frac_never_leave")
    lo, hi, how = _walk_interval(enc)
    tag, suffix = ("", "") if stack is None else (f" ({stack} stack)", f".{stack}")
    claim = Claim(
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
        "",
        never,
        lo,
        hi,
        threshold=0.5,
        interval=how,
        scope=(
            "the encoder stack of an encoder-decoder (the paper: T5)"
            if encoder
            else "decoder stacks whose readout is tied to the embeddings (appendix A.2)"
        ),
        threshold_source="geomlens: most positions (the paper shows examples, no fraction)",
    )
    return judge(claim, encoder, "no walk analysis", (), outside)


def _self_bias_claim(
    walk: dict[str, Any], stack: str | None, n_heads: int | None, outside: str | None
) -> Claim:
    """The fraction of heads whose attention (not bias) favours other positions over their
    own: a geomlens variant of the paper's kernel claim, at the paper's threshold."""
    kern = walk.get("kernels") or {}
    neg = kern.get("negative_self_bias_fraction")
    per_layer = kern.get("negative_self_bias_fraction_per_layer") or []
    n_kern = None if neg is None or not n_heads else n_heads * len(per_layer)
    klo, khi = (None, None) if neg is None or not n_kern else _fraction_interval(neg, n_kern)
    tag, suffix = ("", "") if stack is None else (f" ({stack} stack)", f".{stack}")
    claim = Claim(
        f"singh.negative_self_bias{suffix}",
        "Attention heads show a negative self-bias" + tag,
        SINGH,
        f"fraction of heads attending less to their own position than to others >= "
        f"{NEGATIVE_SELF_BIAS}",
        text(neg, ".2f", low=klo, high=khi) + ("" if neg is None else " of heads"),
        "",
        neg,
        klo,
        khi,
        threshold=NEGATIVE_SELF_BIAS,
        interval="Wilson score over heads",
        kind="variant",
        scope="T5's learned relative position biases, encoder stacks (appendix A.2)",
        threshold_source="the paper's about 80% of T5-Small and Flan-T5-XL encoder kernels "
        "(appendix A.2), read as at least 75%",
    )
    return judge(claim, True, "no kernels", (), outside)


def _bias_table_claims(walk: dict[str, Any], stack: str, scheme: str | None) -> list[Claim]:
    """Singh's reading of T5's learned relative-bias table itself (not the attention it
    produces): in encoder stacks most heads' bias is lower at their own position than at
    the next few; in decoder stacks some heads' bias is larger at far offsets than at
    middle ones. Only stacks with such a table; ``scheme``: why the model's biases are not
    the paper's (None: they are)."""
    table = (walk.get("kernels") or {}).get("bias_table")
    if not table:
        return []
    neg, far = table.get("negative_self_bias_fraction"), table.get("far_amplification_fraction")
    tag = f" ({stack} stack's bias table)"
    every = "none: the whole table, every head (nothing is sampled)"
    self_claim = Claim(
        f"singh.negative_self_bias_table.{stack}",
        "The relative-position bias gives most heads a negative self-bias" + tag,
        SINGH,
        "fraction of heads whose bias at delta = 0 is below its mean over delta = 1-4 "
        f">= {NEGATIVE_SELF_BIAS}",
        text(neg, ".2f") + ("" if neg is None else " of heads"),
        "",
        neg,
        threshold=NEGATIVE_SELF_BIAS,
        interval=every,
        scope="T5's learned relative position biases, encoder stacks (appendix A.2)",
        threshold_source="the paper's about 80% of T5-Small and Flan-T5-XL encoder kernels "
        "(appendix A.2), read as at least 75%",
    )
    far_claim = Claim(
        f"singh.far_amplification_table.{stack}",
        "The relative-position bias amplifies far positions" + tag,
        SINGH,
        "fraction of heads whose mean bias over 32 <= |delta| <= 63 exceeds that over "
        f"8 <= |delta| <= 31 >= {FAR_AMPLIFICATION}",
        text(far, ".2f") + ("" if far is None else " of heads"),
        "",
        far,
        threshold=FAR_AMPLIFICATION,
        interval=every,
        scope="T5's learned relative position biases, decoder self-attention (appendix A.2)",
        threshold_source="the paper's about 30% of the Flan-T5-XL decoder's self-attention "
        "heads (appendix A.2, figure 8), read as at least 25%",
    )
    return [
        judge(
            self_claim,
            True,
            "no bias table",
            (),
            scheme
            or (
                None
                if stack == "encoder"
                else "the paper reports self-attenuation for encoder kernels; for the "
                "decoder stack it reports far amplification"
            ),
        ),
        judge(
            far_claim,
            True,
            table.get("far_amplification_reason") or "no bias table",
            (),
            scheme
            or (
                None
                if stack == "decoder"
                else "the paper reports far amplification for decoder self-attention; for "
                "the encoder stack it reports self-attenuation"
            ),
        ),
    ]


def walk_claims(metrics: dict[str, Any], model: dict[str, Any]) -> list[Claim]:
    walk = metrics.get("walk") or {}
    n_heads = model.get("n_heads")
    position = model.get("position")
    relative = position in (None, "t5-relative")
    scheme = None if relative else f"this model's position biases ({position}) are not learned"
    no_bias = (
        f"Singh finds negative self-bias in T5's learned relative position biases; for "
        f"models without them (this one: {position}) the paper leaves open how it arises "
        "(appendix A.2)"
    )
    if walk.get("decoder"):  # an encoder-decoder: each stack with its own expectation
        decoder = walk["decoder"]
        return [
            _walk_claim(walk, True, "encoder", None),
            _self_bias_claim(walk, "encoder", n_heads, None if relative else no_bias),
            *_bias_table_claims(walk, "encoder", scheme),
            _walk_claim(decoder, False, "decoder", _untied(model)),
            _self_bias_claim(
                decoder,
                "decoder",
                n_heads,
                "the paper's number for decoder stacks is about far positions, not self",
            ),
            *_bias_table_claims(decoder, "decoder", scheme),
        ]
    encoder = bool(model.get("is_encoder"))
    return [
        _walk_claim(walk, encoder, None, SINGH_KINDS if encoder else _untied(model)),
        _self_bias_claim(walk, None, n_heads, SINGH_KINDS if encoder else no_bias),
        *_bias_table_claims(walk, "decoder", scheme or "the paper reads T5's tables"),
    ]


def _untied(model: dict[str, Any]) -> str | None:
    """Why a decoder's walk claim does not apply: an untied readout (None when tied)."""
    if model.get("tied", True):
        return None
    return (
        "the readout is not tied to the embeddings; the paper expects the walk to leave its "
        "own token where it is (appendix A.2)"
    )


# ---------------------------------------------------------------- Singh: concept space


def sound_schemes(
    concepts: dict[str, Any], prefix: str = ""
) -> tuple[dict[str, dict[str, Any]], dict[str, str]]:
    """The schemes (names starting with ``prefix``) that may stand for the concept tests,
    and those left out with the reason: a scheme that gives back its input (a pyramidal
    scheme whose log-likelihoods equal the baseline's) and a degenerate one
    (``guards.degenerate``). A scheme without a headline score is in neither."""
    headline = concepts.get("headline", "normalised_vs_acc")
    chance = (concepts.get("baseline") or {}).get("chance")
    kept, left = {}, {}
    for name, scheme in (concepts.get("schemes") or {}).items():
        if not name.startswith(prefix):
            continue
        diff = scheme.get("loglik_max_abs_diff_vs_baseline")
        reason = (
            "it gives back the input itself"
            if diff is not None and diff <= IDENTICAL_LOGLIK
            else guards.degenerate(scheme, chance)
        )
        if reason is not None:
            left[name] = reason
        elif isinstance(scheme.get(headline), (int, float)):
            kept[name] = scheme
    return kept, left


def best_scheme(concepts: dict[str, Any], prefix: str = "") -> str | None:
    """The best scheme of a run's concept tests (of one test with ``prefix`` "P:" or
    "S:"): the highest headline score among ``sound_schemes``, ties by name. The claims
    and the concepts section both name this one."""
    kept, _ = sound_schemes(concepts, prefix)
    headline = concepts.get("headline", "normalised_vs_acc")
    return min(kept, key=lambda n: (-kept[n][headline], n), default=None)


def _concept_schemes(
    concepts: dict[str, Any], test: str, prefix: str, reason: str
) -> tuple[dict[str, dict[str, Any]], str, dict[str, str]]:
    """The schemes that may decide the claim of one test, why there are none, and the
    degenerate ones left out (name -> why)."""
    of_test = [n for n in concepts.get("schemes") or {} if n.startswith(prefix)]
    schemes, left = sound_schemes(concepts, prefix)
    degenerate = {n: why for n, why in left.items() if why != "it gives back the input itself"}
    if concepts.get("schemes") and not of_test:
        reason = f"no {test} scheme in this run"
    elif of_test and len(left) == len(of_test) and not degenerate:
        reason = f"every {test} scheme in this run gives back the input itself"
    elif not schemes and len(left) < len(of_test):
        reason = "the baseline answered no item right, so no score can be normalised by it"
    return schemes, reason, degenerate


def _concept_claim(concepts: dict[str, Any], test: str, prefix: str, reason: str) -> Claim:
    """Test 1 (pyramidal) or Test 2 (similarity): its best sound scheme against the model's
    own baseline, guarded by chance, the no-context control and degenerate schemes."""
    headline = concepts.get("headline", "normalised_vs_acc")
    schemes, reason, degenerate = _concept_schemes(concepts, test, prefix, reason)
    best = best_scheme(concepts, prefix)
    score = None if best is None else schemes[best][headline]
    ci = (None, None) if best is None else schemes[best].get(f"{headline}_ci") or (None, None)
    lo, hi = ci[0], ci[1]
    base = concepts.get("baseline") or {}
    acc, acc_low = base.get("acc"), (base.get("acc_ci") or (None, None))[0]
    none_acc = (base.get("no_context") or {}).get("acc")
    ratio = None if none_acc is None or not acc else none_acc / acc
    left = f"; {len(degenerate)} degenerate scheme(s) left out" if degenerate else ""
    claim = Claim(
        f"singh.concepts_{test}",
        f"Concept vectors can stand in for the text they summarise ({test} test)",
        SINGH,
        f"best {test} scheme's accuracy >= 1.0 x the model's own baseline accuracy; "
        "schemes that give back the input exactly or are flagged degenerate are left out",
        "–"
        if best is None
        else f"{text(score, '.2f', low=lo, high=hi)} of baseline ({best}){left}",
        "",
        score,
        lo,
        hi,
        threshold=1.0,
        interval="paired bootstrap over items, 1000 draws (the best of several schemes: the "
        "interval does not account for the choice)",
        scope="decoder-only and encoder-decoder models on a multiple-choice task (the paper: "
        "11 decoder-only and 3 encoder-decoder models on HellaSwag)",
        threshold_source="the paper: a normalised score of 1.0 if the property held "
        "(section 5.1.1)",
    )
    if best is None and degenerate:
        name, what = next(iter(degenerate.items()))
        why = (
            f"every {test} scheme of this run that does not give back its input is "
            f"degenerate ({name}: {what}): none can decide the claim"
        )
        return replace(claim, verdict="inconclusive", why=why, guard="degenerate")
    fired = [guards.chance(acc, acc_low, base.get("chance")), guards.no_context(ratio, lo, hi)]
    return judge(claim, True, reason, fired)


def concept_claims(metrics: dict[str, Any], model: dict[str, Any]) -> list[Claim]:
    concepts = metrics.get("concepts") or {}
    reason = concepts.get("unsupported", "no concept tests in this run")
    found = [
        _concept_claim(concepts, "pyramidal", "P:", reason),
        _concept_claim(concepts, "similarity", "S:", reason),
    ]
    if model.get("is_encoder"):
        outside = f"not applicable: {SINGH_KINDS}"
        return [replace(c, verdict=outside, why="", guard="") for c in found]
    return found


def with_published_scores(found: list[Claim], model: dict[str, Any]) -> list[Claim]:
    """``found`` with the scores a paper publishes for this model beside each claim."""
    scores = published_scores(model)
    return [
        replace(c, published="; ".join(p for p in (c.published, scores.get(c.id, "")) if p))
        for c in found
    ]


def run_published(metrics: dict[str, Any], manifest: dict[str, Any]) -> dict[str, Any] | None:
    """A paper's numbers for the run's model beside the run's, as the run stored them or
    (a run made before they were kept) computed now; None when no paper has any."""
    stored = metrics.get("published")
    return stored if stored else published_section(metrics, manifest.get("model"))
