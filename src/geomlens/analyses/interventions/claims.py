"""The claims the causal checks decide: each paper's statement, tested by an edit of the
residual stream against random edits of the same size.

Rule (every claim but the final norm's): the edit's effect, in the claim's direction, is
beyond the 95th percentile of the control draws' effects and at least twice their median's
size (``schema.control_threshold``). Guards: too few held-out windows, too few control
draws, controls that alone more than double the loss (saturated: any edit of that size
breaks the model), and the effect's 95% interval over windows holding the threshold (the
controls' spread covers the effect).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from geomlens.analyses.interventions import schema
from geomlens.analyses.interventions.compute import MIN_CONTROLS, MIN_WINDOWS
from geomlens.reporting.claims import MOLINA, SONG, Claim, judge, text
from geomlens.reporting.guards import Guard

SUN = "Sun et al. 2024 (arXiv 2402.17762)"

SCOPE = (
    "decoders and encoders (an encoder-decoder is not measured); the layers the capture "
    "kept, each edited with its own directions from the estimation windows; measured on "
    "held-out windows of the corpus"
)

UNTRAINED = (
    "the model has no trained output layer, so its loss reads through its input embeddings "
    "and is not the model's own"
)

RULE = (
    "effect beyond the 95th percentile of the random controls' effects and at least twice "
    "their median"
)


def _guards(found: dict[str, Any], record: dict[str, Any]) -> list[Guard | None]:
    held = int(found.get("held_out", 0))
    few = (
        Guard("windows", f"only {held} held-out windows (at least {MIN_WINDOWS} are needed)")
        if held < MIN_WINDOWS
        else None
    )
    n = int(record.get("n_controls", 0))
    draws = (
        Guard("controls", f"only {n} control draws (at least {MIN_CONTROLS} are needed)")
        if n < MIN_CONTROLS
        else None
    )
    return [few, draws, _saturated(found, record)]


def _saturated(found: dict[str, Any], record: dict[str, Any]) -> Guard | None:
    """The controls alone break the model: their median loss rise exceeds the unedited
    loss itself, so any edit of that size saturates and none can stand out."""
    base = ((found.get("base") or {}).get("loss") or {}).get("value")
    spread = (record.get("controls") or {}).get("loss")
    if base is None or spread is None or spread["median"] <= base:
        return None
    return Guard(
        "saturated",
        f"the random controls alone raise the loss by {spread['median']:.3g} nats (the "
        f"unedited loss is {base:.3g}): edits of this size break the model whichever "
        "directions they take",
    )


def _against_controls(
    metrics: dict[str, Any],
    claim_id: str,
    statement: str,
    paper: str,
    check: str,
    arm: str,
    measure: str,
    sign: int,
    keeps: bool = False,
) -> Claim:
    """One claim whose number is an arm's effect on ``measure`` and whose threshold comes
    from the check's controls (``keeps``: the claim is that the effect stays within it)."""
    found = schema.section(metrics) or {}
    record = schema.check(metrics, check) or {}
    rec = schema.arm(metrics, check, arm)
    direction = "rise" if sign > 0 else "fall"
    rule = f"{measure} {direction}: {RULE}"
    if keeps:
        rule = f"{measure} {direction} no further than the rule's threshold ({RULE})"
    above = (sign > 0) != keeps
    base = Claim(claim_id, statement, paper, rule, "–", "", scope=SCOPE, threshold=0.0)
    if not found:
        return judge(base, above, "the run has no causal checks (geomlens intervene)")
    if measure == "loss" and found.get("trained_head") is False:
        return judge(base, above, "", outside=UNTRAINED)
    if rec is None or measure not in rec or record.get("controls") is None:
        why = record.get("reason", f"the {check} check was not run")
        return judge(base, above, why)
    effect = rec[measure]
    value, low, high = (
        (effect["value"], effect["low"], effect["high"])
        if isinstance(effect, dict)
        else (float(effect), None, None)
    )
    spread = record["controls"][measure]
    threshold = schema.control_threshold(spread, sign)
    shown = (
        f"{text(value, '.4g', low=low, high=high)} vs controls median "
        f"{spread['median']:.4g} (5-95%: {spread['p05']:.4g} to {spread['p95']:.4g}, "
        f"{record['n_controls']} draws)"
    )
    claim = Claim(
        claim_id,
        statement,
        paper,
        rule,
        shown,
        "",
        number=value,
        low=low,
        high=high,
        threshold=threshold,
        interval="bootstrap over held-out windows" if low is not None else "none: one ARI",
        scope=SCOPE,
        threshold_source="the random controls of the same run (issue 52's rule)",
    )
    return judge(claim, above, "", _guards(found, record))


def _final_norm(metrics: dict[str, Any], model: dict[str, Any]) -> Claim:
    found = schema.section(metrics) or {}
    record = schema.check(metrics, "final_norm") or {}
    rec = schema.arm(metrics, "final_norm", "final_norm")
    claim = Claim(
        "interventions.final_norm_loss",
        "The final norm's gain and bias help the readout: without them the loss rises",
        MOLINA,
        "loss change when the readout drops the final norm's gain and bias, above 0",
        "–",
        "",
        threshold=0.0,
        kind="variant",
        scope=SCOPE,
        threshold_source="no change",
    )
    if not found:
        return judge(claim, True, "the run has no causal checks (geomlens intervene)")
    if found.get("trained_head") is False:
        return judge(claim, True, "", outside=UNTRAINED)
    if rec is None:
        return judge(claim, True, "", outside=record.get("reason", "the check was not run"))
    loss = rec["loss"]
    note = "" if record.get("detail", {}).get("bias", True) else " (RMSNorm: no bias, gain only)"
    spread = (record.get("controls") or {}).get("loss")
    shuffled = "" if spread is None else f"; gain and bias shuffled: median {spread['median']:.4g}"
    claim = replace(
        claim,
        value=text(loss["value"], ".4g", low=loss["low"], high=loss["high"]) + note + shuffled,
        number=loss["value"],
        low=loss["low"],
        high=loss["high"],
        interval="bootstrap over held-out windows",
    )
    held = int(found.get("held_out", 0))
    few = Guard("windows", f"only {held} held-out windows") if held < MIN_WINDOWS else None
    return judge(claim, True, "", [few])


def intervention_claims(metrics: dict[str, Any], model: dict[str, Any]) -> list[Claim]:
    """The causal checks' claims, in the order of the checks (none when the run made none)."""
    if schema.section(metrics) is None:
        return []
    return [
        _against_controls(
            metrics,
            "interventions.positional_neighbour",
            "Projecting out the positional directions lowers attention to neighbouring tokens "
            "far more than random directions do",
            SONG,
            "positional",
            "positional",
            "neighbour",
            -1,
        ),
        _against_controls(
            metrics,
            "interventions.positional_loss",
            "Projecting out the positional directions raises the loss far more than random "
            "directions do",
            SONG,
            "positional",
            "positional",
            "loss",
            +1,
        ),
        _against_controls(
            metrics,
            "interventions.smooth_neighbour",
            "The smooth (low-frequency) part of the positional basis carries the attention "
            "to neighbouring tokens",
            SONG,
            "smoothness",
            "low_frequency",
            "neighbour",
            -1,
        ),
        _against_controls(
            metrics,
            "interventions.context_topic",
            "Projecting out the context directions removes topic information (the ARI of "
            "the context clusters falls) far more than random directions do",
            SONG,
            "context",
            "context",
            "ari",
            -1,
        ),
        _against_controls(
            metrics,
            "interventions.massive_zero",
            "Setting the massive activations to zero breaks the model (the loss rises far "
            "more than for random coordinates)",
            SUN,
            "massive",
            "massive_zero",
            "loss",
            +1,
        ),
        _against_controls(
            metrics,
            "interventions.massive_mean",
            "Setting the massive activations to their mean keeps the model working (the "
            "loss moves no more than for random coordinates set to zero)",
            SUN,
            "massive",
            "massive_mean",
            "loss",
            +1,
            keeps=True,
        ),
        _final_norm(metrics, model),
    ]
