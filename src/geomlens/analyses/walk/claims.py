"""Singh's claims about movement through embedding space: where a token's walk goes, and
the position kernels' negative self-bias and far amplification."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from geomlens.analyses.walk.schema import (
    EncodingView,
    KernelsView,
    NeverLeave,
    WalkClaimsView,
    WalkControl,
)
from geomlens.reporting.claims import SINGH, SINGH_KINDS, Claim, judge, text
from geomlens.reporting.guards import Guard
from geomlens.stats.intervals import wilson

NEGATIVE_SELF_BIAS = 0.75
"""The paper's "about 80%" of T5 encoder kernels attenuating self, read as at least 75%."""


FAR_AMPLIFICATION = 0.25
"""The paper's "about 30%" of decoder heads amplifying far positions, read as at least 25%."""


def _fraction_interval(fraction: float, n: int) -> tuple[float, float]:
    w = wilson(round(fraction * n), n)
    return w["low"], w["high"]


def _walk_interval(enc: EncodingView) -> tuple[float | None, float | None, str]:
    """The never-leave fraction's interval and how it was obtained."""
    cos = enc.cos or NeverLeave()
    never, n_pos, blocks = cos.frac_never_leave, enc.n_positions, cos.frac_never_leave_ci
    if never is None or not n_pos:
        return None, None, "none: no walk analysis"
    if blocks is not None:  # neighbouring positions resampled together
        return blocks.low, blocks.high, f"{blocks.method}, {blocks.n_boot} draws"
    lo, hi = _fraction_interval(never, n_pos)  # a run made before the block bootstrap
    return (
        lo,
        hi,
        "Wilson score over positions of the walk text (neighbouring positions are not "
        "independent: the interval is a lower bound on the uncertainty)",
    )


def control_guard(
    control: WalkControl | None, never: float | None, high: float | None
) -> Guard | None:
    """The walk does not leave its own token more often than the control does (the same
    model on the walk text shuffled at token level, ``walks.shuffled_ids``): its
    never-leave fraction is not below the control's by their block-bootstrap intervals
    (the walk's high end must lie under the control's low end), or the run has no control.
    """
    if never is None:
        return None
    if control is None:
        return Guard(
            "control",
            "this run walked no control text (made before geomlens walked one): leaving "
            "its own token cannot be told from what any pass of the model does",
        )
    ci = control.frac_never_leave_ci or {}
    low = ci.get("low")
    if high is not None and low is not None and high < low:
        return None
    shown = text(control.frac_never_leave, ".2f", low=low, high=ci.get("high"))
    return Guard(
        "control",
        f"{control.kind} never leaves at {shown}; the walk's own fraction is not below it "
        "by their intervals, so leaving its own token is what the model does to any token, "
        "not a sign that it moves toward what the text says next",
    )


def _walk_claim(
    walk: WalkClaimsView, encoder: bool, stack: str | None, outside: str | None
) -> Claim:
    """An encoder stack's walk is expected to stay near its own token (Singh), a decoder
    stack's to leave it for the next token's; a decoder-only model's walk must leave more
    often than a control's that cannot carry the claim."""
    enc = walk.encoding or EncodingView()
    never = (enc.cos or NeverLeave()).frac_never_leave
    lo, hi, how = _walk_interval(enc)
    controlled = not encoder and stack is None
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
        + (">= 0.5" if encoder else "<= 0.5")
        + (
            ", and below the same fraction for the walk text shuffled at token level (the "
            "walk's 95% interval under the control's)"
            if controlled
            else ""
        ),
        text(never, ".2f", low=lo, high=hi)
        + ("" if never is None else " never leave")
        + _control_words(enc.control if controlled else None),
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
        threshold_source="geomlens: most positions (the paper shows examples, no fraction)"
        + (
            "; the control is geomlens's: any next-token predictor's walk leaves its own "
            "token, so the model must leave it more often than on a text it cannot read"
            if controlled
            else ""
        ),
    )
    judged = judge(claim, encoder, "no walk analysis", (), outside)
    guard = control_guard(enc.control, never, hi) if controlled else None
    if judged.verdict != "reproduced" or guard is None:
        return judged  # the control can only withhold "reproduced"
    return replace(judged, verdict="inconclusive", why=guard.why, guard=guard.name)


def _control_words(control: WalkControl | None) -> str:
    if control is None:
        return ""
    ci = control.frac_never_leave_ci or {}
    shown = text(control.frac_never_leave, ".2f", low=ci.get("low"), high=ci.get("high"))
    return f"; shuffled text (control): {shown}"


def _self_bias_claim(
    walk: WalkClaimsView, stack: str | None, n_heads: int | None, outside: str | None
) -> Claim:
    """The fraction of heads whose attention (not bias) favours other positions over their
    own: a geomlens variant of the paper's kernel claim, at the paper's threshold."""
    kern = walk.kernels or KernelsView()
    neg = kern.negative_self_bias_fraction
    per_layer = kern.negative_self_bias_fraction_per_layer or []
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


def _bias_table_claims(walk: WalkClaimsView, stack: str, scheme: str | None) -> list[Claim]:
    """Singh's reading of T5's learned relative-bias table itself (not the attention it
    produces): in encoder stacks most heads' bias is lower at their own position than at
    the next few; in decoder stacks some heads' bias is larger at far offsets than at
    middle ones. Only stacks with such a table; ``scheme``: why the model's biases are not
    the paper's (None: they are)."""
    table = (walk.kernels or KernelsView()).bias_table
    if table is None or not table.to_dict():  # an empty table is none
        return []
    neg, far = table.negative_self_bias_fraction, table.far_amplification_fraction
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
            table.far_amplification_reason or "no bias table",
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
    walk = WalkClaimsView.of(metrics)
    n_heads = model.get("n_heads")
    position = model.get("position")
    relative = position in (None, "t5-relative")
    scheme = None if relative else f"this model's position biases ({position}) are not learned"
    no_bias = (
        f"Singh finds negative self-bias in T5's learned relative position biases; for "
        f"models without them (this one: {position}) the paper leaves open how it arises "
        "(appendix A.2)"
    )
    decoder = walk.decoder
    if decoder is not None and decoder.to_dict():  # an encoder-decoder: each stack its own
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
    no_walk = (walk.not_available or "").removeprefix("not available: ") or None
    return [
        _walk_claim(walk, encoder, None, no_walk or (SINGH_KINDS if encoder else _untied(model))),
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
