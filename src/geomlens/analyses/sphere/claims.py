"""Molina's claims: layer norm as a projection onto a sphere (an identity), and the final
norm's gamma/beta moving the top tokens toward common words."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from geomlens.analyses.sphere.schema import GammaBetaView, MeanZipf, SphereClaimsView, TokenList
from geomlens.errors import GeomlensError
from geomlens.reporting import guards
from geomlens.reporting.claims import MOLINA, Claim, judge, text

MOLINA_SCOPE = (
    "language models whose final norm feeds a trained readout (the paper: GPT-2); an "
    "encoder-only model's readout through its embeddings is not one"
)

GAMMA_BETA = "molina.gamma_beta_common_words"
"""The id of the claim on the final norm's gamma/beta (the sphere section quotes it)."""


IDENTITY_THRESHOLD = 1e-4
"""The identity's bound for a float32 forward pass (about 840 float32 epsilons)."""

EPSILON = {"float32": 2.0**-23, "bfloat16": 2.0**-7, "float16": 2.0**-10}
"""Machine epsilon of each dtype a model runs in (``torch.finfo(dtype).eps``)."""

EPSILONS_ALLOWED = 4
"""The identity's bound in a lower precision, in the dtype's epsilons: the model's norm
rounds its output to the dtype once or twice (the normalised vector, then times gamma),
a relative error of at most about one epsilon."""


def identity_threshold(dtype: str | None) -> float:
    """The largest relative error the layer-norm identity allows for a forward pass in
    ``dtype``: ``max(1e-4, 4 * eps(dtype))`` (1e-4 for float32 and for a run that recorded
    no dtype; 2**-5 for bfloat16, 2**-8 for float16)."""
    return max(IDENTITY_THRESHOLD, EPSILONS_ALLOWED * EPSILON.get(dtype or "float32", 0.0))


def sphere_claims(metrics: dict[str, Any], model: dict[str, Any]) -> list[Claim]:
    sphere = SphereClaimsView.of(metrics)
    err = None if sphere.identity is None else sphere.identity.max_rel_err
    dtype = (sphere.identity.dtype if sphere.identity is not None else None) or "float32"
    threshold = identity_threshold(dtype)
    source = (
        "float32 rounding"
        if threshold == IDENTITY_THRESHOLD
        else f"{dtype} rounding: {EPSILONS_ALLOWED} x its machine epsilon {EPSILON[dtype]:.1e}"
    )
    identity = Claim(
        "molina.layernorm_sphere",
        "Layer norm is a projection onto a hyperplane, then scaling onto a sphere",
        MOLINA,
        f"max relative error of the construction against the model's norm <= {threshold:.2g} "
        f"(a {dtype} forward pass)",
        "–" if err is None else f"{err:.1e}",
        "",
        err,
        threshold=threshold,
        interval="none: an exact computation (the error is rounding)",
        kind="identity",
        scope="every norm layer of the model (an identity of the construction, not a "
        "finding about a model)",
        threshold_source=source,
    )
    absent = sphere.not_available or {}
    outside = (
        "this is an encoder-only model: its readout through the embeddings is not a trained "
        "language-model head, and Molina's claim is about one (GPT-2's)"
        if model.get("is_encoder")
        else None
    )
    return [
        judge(identity, False, "no sphere analysis", outside=_why(absent.get("identity"))),
        _gamma_beta_claim(
            sphere.top_tokens or GammaBetaView(), _why(absent.get("top_tokens")) or outside
        ),
    ]


def _why(sentence: str | None) -> str | None:
    """A part's "not applicable: ..." or "not available: ..." sentence as the reason a
    claim does not apply (``judge`` puts "not applicable: " before it)."""
    if sentence is None:
        return None
    return sentence.removeprefix("not applicable: ").removeprefix("not available: ")


def _unknown_counts(lists: dict[str, list[str]]) -> dict[str, tuple[int, int]]:
    """name -> (tokens of the list no wordfreq language knows, tokens in it); without
    wordfreq, those of a script it has no language for (punctuation included)."""
    try:
        from geomlens.analyses.sphere.word_frequency import unknown

        return {name: (len(unknown(tokens)), len(tokens)) for name, tokens in lists.items()}
    except ImportError:
        from geomlens.analyses.sphere.word_frequency import SCRIPT_LANGUAGES, script_of

        return {
            name: (sum(script_of(t) not in SCRIPT_LANGUAGES for t in tokens), len(tokens))
            for name, tokens in lists.items()
        }


def _unchanged(with_ids: list[int], without_ids: list[int], k: int) -> str | None:
    """Why gamma/beta leave the top tokens unchanged (None when they change them): the two
    top-k lists hold the same tokens, or differ in one of ten or more."""
    if guards.same_lists(with_ids, without_ids, "") is None:
        return None
    differ = len(set(with_ids) ^ set(without_ids)) // 2
    how = "hold the same tokens" if differ == 0 else f"differ in only {differ} token"
    return (
        f"gamma/beta leave the top tokens unchanged: the top {k} tokens with and without "
        f"them {how}, so they move nothing toward common words"
    )


def _lists(top: GammaBetaView) -> tuple[TokenList, TokenList]:
    """The top lists with and without gamma/beta that the claim compares: the whole words
    where the run kept them, else every token; a block that has a Zipf shift has both."""
    if top.affine_words is not None and top.plain_words is not None:
        return top.affine_words, top.plain_words
    if top.affine is None or top.plain is None:
        raise GeomlensError(
            "metrics.json has a Zipf shift without the top lists it compares; the run folder "
            "is damaged: run the command again."
        )
    return top.affine, top.plain


def norm_words(top: GammaBetaView) -> tuple[str, str]:
    """(what the final norm applies, the scope's sentence on it): "gamma/beta", or "gamma"
    for a norm without beta (RMSNorm), whose half of the claim on beta cannot be tested."""
    if top.readout_has_beta is False:
        return "gamma", (
            f"; this model's final norm ({top.readout_norm or 'its readout norm'}) has no "
            "beta (gamma only, as an RMSNorm), so only gamma's half of the claim is tested"
        )
    return "gamma/beta", ""


def _gamma_beta_claim(top: GammaBetaView, outside: str | None) -> Claim:
    """Molina: gamma/beta move the readout's top tokens toward common words. The guards
    come first (lists that wordfreq cannot score decide nothing); then top lists that
    gamma/beta leave unchanged answer it: not reproduced."""
    shift, zipf = top.english_zipf_shift, top.mean_english_zipf or MeanZipf()
    number = lo = hi = None
    interval, value, fired, unchanged = "none", "–", [], None
    affine_word, scope_words = norm_words(top)
    compared = (
        "whole words"
        if top.affine_words is not None
        else "tokens, word pieces included"
        if top.zipf_compared is not None
        else "tokens"
    )
    if shift is not None:
        affine, plain = _lists(top)
        number, lo, hi = shift.value, shift.low, shift.high
        interval = f"{shift.method}, {shift.n_boot} draws"
        value = (
            f"{text(number, '+.2f', low=lo, high=hi)} (Zipf {zipf.affine:.2f} with, "
            f"{zipf.plain:.2f} without; vocabulary {zipf.vocab_mean:.2f})"
        )
        k = 10 if top.k is None else top.k
        unchanged = _unchanged(affine.top_ids or [], plain.top_ids or [], k)
        fired = [
            guards.unknown_words(
                _unknown_counts(
                    {"with gamma/beta": list(affine.top), "without gamma/beta": list(plain.top)}
                )
            ),
        ]
        if unchanged is None:  # unchanged lists are decided below, not by equal means
            fired.append(
                guards.same_numbers(zipf.affine, zipf.plain, "the mean Zipf frequencies compared")
            )
    claim = Claim(
        GAMMA_BETA,
        "The final norm's gamma/beta shift the top-scoring tokens toward common words",
        MOLINA,
        "mean Zipf frequency (wordfreq, each token in its own script's language) of the "
        f"top-10 {compared}: with {affine_word} minus without > 0; the same top "
        f"{compared} with and without (all but at most one of ten) is no shift, once the "
        "guards pass",
        value,
        "",
        number,
        lo,
        hi,
        threshold=0.0,
        interval=interval,
        scope=MOLINA_SCOPE + scope_words,
        threshold_source="the paper's direction (toward common words); 0 is no shift",
    )
    guard = guards.first(*fired)
    if outside is None and unchanged is not None and guard is None:
        return replace(claim, verdict="not reproduced", why=unchanged, guard="")
    return judge(claim, True, "no word frequencies in this run", fired, outside)
