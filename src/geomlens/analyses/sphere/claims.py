"""Molina's claims: layer norm as a projection onto a sphere (an identity), and the final
norm's gamma/beta moving the top tokens toward common words."""

from __future__ import annotations

from typing import Any

from geomlens.reporting import guards
from geomlens.reporting.claims import MOLINA, Claim, judge, text

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
