"""The attention-sink claims: sinks exist in autoregressive language models (Gu et al.),
and the sink is the first token (Xiao et al.)."""

from __future__ import annotations

from typing import Any

from geomlens.analyses.sinks.compute import GU_LENGTH
from geomlens.analyses.sinks.schema import KEY, SinkMetrics
from geomlens.reporting.claims import Claim, judge, text

GU = "Gu et al. 2025"
XIAO = "Xiao et al. 2024"

EXIST = "gu.sinks_autoregressive"
FIRST = "xiao.first_token_sink"

GU_SCOPE = (
    "autoregressive (decoder-only) language models: Gu et al. (arXiv 2410.10781) find sinks "
    "in all 30 open models they measured (LLaMA, Mistral, GPT-2, Pythia, OPT families and "
    "more, 14M to 70B parameters). Encoders are outside it"
)
XIAO_SCOPE = (
    "autoregressive language models with a causal mask (Xiao et al., arXiv 2309.17453: "
    "Llama-2, MPT, Falcon, Pythia); beyond the first two blocks"
)

FIRST_LAYERS = 0.5
"""Share of the blocks past the first two whose sink is the first token, for Xiao's claim."""


def _sinks(metrics: dict[str, Any]) -> SinkMetrics | None:
    return SinkMetrics.read(metrics, KEY) if "n_windows" in metrics.get(KEY, {}) else None


def encoder_reason(model: dict[str, Any]) -> str | None:
    """Why an autoregressive claim does not apply (None: it does)."""
    if model.get("is_encoder"):
        return (
            "an encoder-only model (bidirectional attention): the claim is about "
            "autoregressive ones"
        )
    return None


def sink_claims(metrics: dict[str, Any], model: dict[str, Any]) -> list[Claim]:
    """Gu's sink-rate claim and Xiao's first-token claim."""
    found = _sinks(metrics)
    at64 = found is not None and found.sink_rate_64 is not None
    if found is None:
        number = low = high = None
    elif at64:
        number, low, high = found.sink_rate_64, found.sink_rate_64_low, found.sink_rate_64_high
    else:
        number, low, high = found.sink_rate, found.sink_rate_low, found.sink_rate_high
    length = GU_LENGTH if at64 else (None if found is None else found.length)
    shown = text(number, ".3f", low=low, high=high)
    if found is not None:
        shown += f" at T = {length}" + ("" if length == GU_LENGTH else " (Gu: T = 64)")
    heads = 0 if found is None else len(found.first_token) * len(found.first_token[0])
    one_head = 1.0 / heads if heads else 0.0
    missing = "no attention-sink statistics (the model's attention is not read)"
    exist = Claim(
        EXIST,
        "Attention sinks exist in autoregressive language models: some heads put most of "
        "their attention on the first token",
        GU,
        "sink rate (share of layer x head x window whose first token's importance, the mean "
        "attention it receives from the queries, exceeds 0.3) at T = 64 >= 1 / (layers x "
        "heads), one sink head per window, its 95% interval (bootstrap over windows) above it",
        shown,
        "",
        number,
        low,
        high,
        threshold=one_head,
        interval="bootstrap over the tapped windows",
        published="Gu et al.: sinks in all 30 models measured, epsilon 0.3 at T = 64",
        scope=GU_SCOPE,
        threshold_source="Gu et al.'s epsilon 0.3 and T = 64; they state sinks exist in every "
        "model, read here as at least one sink head per window on average",
    )
    share = None
    detail = ""
    if found is not None:
        later = [r for r in found.layers if r.layer >= 2]
        if later:
            share = sum(r.position == 0 for r in later) / len(later)
            detail = f" of {len(later)} blocks past the first two"
    first = Claim(
        FIRST,
        "The attention sink is the first token: past the first two blocks, the key that "
        "draws the most attention is the initial one, whatever its token",
        XIAO,
        f"share of blocks past the first two whose sink (the key of largest head-mean "
        f"importance in most windows) is position 0 >= {FIRST_LAYERS}",
        text(share, ".2f") + detail,
        "",
        share,
        threshold=FIRST_LAYERS,
        interval="none: one sink position per block (the windows' share is in the section)",
        published="Xiao et al.: Llama-2-7B attends to the initial token in most heads of all "
        "but the first two layers (their Figure 2)",
        scope=XIAO_SCOPE,
        threshold_source="geomlens's reading of 'most layers': half of them",
    )
    outside = encoder_reason(model)
    return [judge(exist, True, missing, (), outside), judge(first, True, missing, (), outside)]
