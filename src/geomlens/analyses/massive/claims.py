"""Sun et al.'s claims on massive activations (arXiv 2402.17762), judged on the run's
"massive" section."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from geomlens.analyses.massive.compute import ABSOLUTE, RATIO
from geomlens.analyses.massive.schema import massive_section
from geomlens.reporting.claims import Claim, judge, text

SUN = "Sun et al. 2024"

SCOPE = (
    "decoder LLMs (LLaMA2/3, Mistral, Mixtral, Phi-2, GPT-2, OPT, Falcon, MPT) and ViTs; "
    "an encoder like BERT is outside the paper's measurements"
)

FEW_DIMS = 10
"""At most this many distinct dimensions for "a few fixed dimensions" (the paper: 2 in
LLaMA2-7B, 1415 and 2533)."""

CARRIER_SHARE = 0.9
"""Share of massive coordinates on the first token or a delimiter for the token claim."""

HELD_SHARE = 0.8
"""Share of the layers from the first massive one to the last in which the rule holds."""

JUMP = 10.0
"""Factor by which the top-1 ratio rises at the first massive layer ("abruptly")."""


def _outside(model: dict[str, Any]) -> str | None:
    if model.get("is_encoder"):
        return "Sun et al. measured decoder LLMs and ViTs, not text encoders"
    return None


def massive_claims(metrics: dict[str, Any], model: dict[str, Any]) -> list[Claim]:
    """The three claims of Sun et al. on this run (decoders; encoders: not applicable)."""
    found = massive_section(metrics)
    if found is None:
        return []
    outside = _outside(model)
    return [
        exist_claim(found, outside),
        tokens_claim(found, outside),
        layers_claim(found, outside),
    ]


def exist_claim(found: dict[str, Any], outside: str | None) -> Claim:
    """Massive activations exist: the largest top-1 / median over the layers."""
    peak, prof = found.get("peak") or {}, found["profile"]
    ratio = peak.get("ratio")
    n_dims = len(prof.get("dims") or [])
    exist = Claim(
        "sun.massive_exist",
        "A few fixed feature dimensions carry activations over 100 and about 1,000 times "
        "the median magnitude",
        SUN,
        f"max over layers of mean per-window top-1 |h| / median |h| >= {RATIO:g}, with "
        f"top-1 > {ABSOLUTE:g} and at most {FEW_DIMS} dimensions passing the rule",
        f"{text(ratio, '.0f', low=peak.get('low'), high=peak.get('high'))} at layer "
        f"{peak.get('layer')} (top-1 {peak.get('top1')}, {n_dims} dims)",
        "",
        ratio,
        peak.get("low"),
        peak.get("high"),
        RATIO,
        "95% bootstrap over 16 groups of windows (median held at the corpus's)",
        "LLaMA2-7B: two dimensions, 1415 and 2533",
        scope=SCOPE,
        threshold_source="Sun et al. section 2: over 100 and about 1,000 x the median",
    )
    exist = judge(exist, True, "no layer measured", (), outside)
    too_big = (peak.get("top1") or 0.0) <= ABSOLUTE or n_dims > FEW_DIMS
    if exist.verdict == "reproduced" and too_big:
        exist = replace(exist, verdict="not reproduced")
    return exist


def tokens_claim(found: dict[str, Any], outside: str | None) -> Claim:
    """Massive activations sit on the first token and on delimiters."""
    carriers = found["carriers"]
    share = carriers.get("start_or_delimiter")
    return judge(
        Claim(
            "sun.massive_tokens",
            "Massive activations sit on the starting token and on early delimiter tokens",
            SUN,
            f"share of the coordinates passing the rule that sit at position 0 or on a "
            f"delimiter token >= {CARRIER_SHARE:g}",
            f"{text(share, '.2f')} of {carriers.get('entries')} (position 0: "
            f"{text(carriers.get('start'), '.2f')})",
            "",
            share,
            threshold=CARRIER_SHARE,
            published="LLaMA2-7B: the starting token and the first '.' or '\\n'",
            scope=SCOPE,
            threshold_source="geomlens's reading of 'sit on': nine in ten",
        ),
        True,
        "no coordinate passes the rule",
        (),
        outside,
    )


def layers_claim(found: dict[str, Any], outside: str | None) -> Claim:
    """Massive activations appear abruptly in an early layer and stay."""
    prof = found["profile"]
    held, appear, jump = prof.get("held"), prof.get("appear"), prof.get("jump")
    layers = judge(
        Claim(
            "sun.massive_layers",
            "Massive activations appear abruptly in an early layer and stay in the middle layers",
            SUN,
            f"share of layers from the first massive one that stay massive >= {HELD_SHARE:g}, "
            f"the first in the first half of the layers, reached by a >= {JUMP:g} x jump",
            f"{text(held, '.2f')} (appear at layer {appear}, x{text(jump, '.0f')}, vanish at "
            f"{prof.get('vanish')})",
            "",
            held,
            threshold=HELD_SHARE,
            published="LLaMA2-7B: from layer 2 to about layer 30 of 32",
            scope=SCOPE,
            threshold_source="geomlens's reading of 'abruptly' and 'stay' (Sun et al. fig. 3)",
        ),
        True,
        "no layer passes the rule",
        (),
        outside,
    )
    n_layers = len(found.get("layers") or [])
    early = appear is not None and appear <= n_layers // 2
    abrupt = jump is None or jump >= JUMP
    if layers.verdict == "reproduced" and not (early and abrupt):
        layers = replace(layers, verdict="not reproduced")
    return layers
