"""The papers' claims, each checked against the number of this run that decides it.

A claim reads one or two numbers already in metrics.json and compares them with a stated
rule; it never computes a new statistic. Position/context claims read the view with
position 0 left out (the original authors' default), so a massive activation at the first
token cannot decide them; the page shows both views elsewhere.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Claim:
    """One claim: where it comes from, the rule, and what this run says.

    Attributes:
        claim: the claim in plain words.
        paper: the paper that makes it.
        rule: the test applied, with its threshold.
        value: the deciding number(s), as text.
        verdict: "reproduced", "not reproduced" or "not measured" (with the reason).
    """

    claim: str
    paper: str
    rule: str
    value: str
    verdict: str


SONG = "Song & Zhong 2023"
MOLINA = "Molina 2023"
SINGH = "Singh 2023"


def skip_first_layers(metrics: dict[str, Any]) -> list[dict[str, Any]]:
    """Per-layer decomposition rows of the view without position 0 (empty if absent)."""
    dec = metrics.get("decomposition") or {}
    if dec.get("skip_first"):
        return list(dec.get("layers", []))
    return list((dec.get("other_view") or {}).get("layers", []))


def median_of(rows: list[dict[str, Any]], key: str) -> float | None:
    values = [r[key] for r in rows if isinstance(r.get(key), (int, float))]
    return statistics.median(values) if values else None


def verdict(ok: bool | None, reason: str = "") -> str:
    if ok is None:
        return f"not measured{': ' + reason if reason else ''}"
    return "reproduced" if ok else "not reproduced"


def _position_claims(metrics: dict[str, Any]) -> list[Claim]:
    rows = skip_first_layers(metrics)
    missing = "no decomposition in this run"
    explained, rank = median_of(rows, "pos_explained"), median_of(rows, "pos_rank")
    low, smooth = median_of(rows, "pos_low_freq"), median_of(rows, "pos_smoothness")
    inc, rnd = median_of(rows, "incoherence_mean"), median_of(rows, "incoherence_random")
    ari = median_of(rows, "ctx_cluster_ari")
    within, between = median_of(rows, "ctx_cos_within"), median_of(rows, "ctx_cos_between")
    claims = [
        Claim(
            "The positional part is low-rank",
            SONG,
            "median over layers: the top ScreeNOT-rank singular values carry >= 50% of the sum",
            "–" if explained is None else f"explained {explained:.2f} at median rank {rank:g}",
            verdict(None if explained is None else explained >= 0.5, missing),
        ),
        Claim(
            "The positional basis is low-frequency (smooth Gram matrix)",
            SONG,
            "median over layers of pos_low_freq (lowest 10% of DCT frequencies) >= 0.5",
            "–" if low is None else f"pos_low_freq {low:.2f}, smoothness {smooth:.3f}",
            verdict(None if low is None else low >= 0.5, missing),
        ),
        Claim(
            "Position and context subspaces are incoherent (nearly orthogonal)",
            SONG,
            "median mean principal-angle cosine <= 1.25 x that of random subspaces",
            "–" if inc is None or rnd is None else f"{inc:.3f} against random {rnd:.3f}",
            verdict(None if inc is None or rnd is None else inc <= 1.25 * rnd, missing),
        ),
        Claim(
            "Context vectors cluster by document topic",
            SONG,
            "median ARI of k-means against topics >= 0.1 and within-topic |cos| > between",
            "–"
            if ari is None or within is None or between is None
            else f"ARI {ari:.2f}; |cos| within {within:.3f}, between {between:.3f}",
            verdict(
                None
                if ari is None or within is None or between is None
                else ari >= 0.1 and within > between,
                "no topic labels",
            ),
        ),
    ]
    qk = (metrics.get("attention") or {}).get("qk_basis") or []
    qk = [b for b in qk if b["k"] > b["rank"] + 1]  # smaller bases fit exactly: no evidence
    fits = [h["residual"] for b in qk for h in b["heads"]]
    base = [h["baseline_residual"] for b in qk for h in b["heads"]]
    fit, rand = (statistics.median(fits), statistics.median(base)) if fits else (None, None)
    claims.append(
        Claim(
            "W_QK in the positional basis is low-rank plus diagonal",
            SONG,
            "median relative residual of the fit < that of a Gaussian matrix",
            "–" if fit is None else f"residual {fit:.3f} against random {rand:.3f}",
            verdict(None if fit is None or rand is None else fit < rand, "no attention split"),
        )
    )
    return claims


def _sphere_claims(metrics: dict[str, Any]) -> list[Claim]:
    sphere = metrics.get("sphere") or {}
    err = (sphere.get("identity") or {}).get("max_rel_err")
    ranks = (sphere.get("top_tokens") or {}).get("mean_freq_rank") or {}
    plain, affine = ranks.get("plain"), ranks.get("affine")
    return [
        Claim(
            "Layer norm is a projection onto a hyperplane, then scaling onto a sphere",
            MOLINA,
            "max relative error of the construction against the model's norm <= 1e-4",
            "–" if err is None else f"{err:.1e}",
            verdict(None if err is None else err <= 1e-4, "no sphere analysis"),
        ),
        Claim(
            "The final norm's gamma/beta shift the top-scoring tokens toward common words",
            MOLINA,
            "mean corpus-frequency rank of the top tokens: with gamma/beta < without",
            "–" if plain is None else f"rank {affine:g} with, {plain:g} without",
            verdict(None if plain is None or affine is None else affine < plain, "no counts"),
        ),
    ]


def _walk_claims(metrics: dict[str, Any]) -> list[Claim]:
    walk = metrics.get("walk") or {}
    never = ((walk.get("encoding") or {}).get("cos") or {}).get("frac_never_leave")
    neg = (walk.get("kernels") or {}).get("negative_self_bias_fraction")
    return [
        Claim(
            "A token's walk up the layers leaves its own token's neighbourhood",
            SINGH,
            "fraction of positions whose own token never leaves the top-k (cosine) < 0.5",
            "–" if never is None else f"{never:.2f} never leave",
            verdict(None if never is None else never < 0.5, "no walk analysis"),
        ),
        Claim(
            "Attention heads show a negative self-bias",
            SINGH,
            "fraction of heads attending less to their own position than to others >= 0.5",
            "–" if neg is None else f"{neg:.2f} of heads",
            verdict(None if neg is None else neg >= 0.5, "no kernels"),
        ),
    ]


def _concept_claims(metrics: dict[str, Any]) -> list[Claim]:
    concepts = metrics.get("concepts") or {}
    ranking = concepts.get("ranking") or []
    best = (concepts.get("schemes") or {}).get(ranking[0], {}) if ranking else {}
    score = best.get(concepts.get("headline", "normalised_vs_acc"))
    best = {**best, "name": ranking[0] if ranking else "?"}
    reason = concepts.get("unsupported", "no concept tests in this run")
    return [
        Claim(
            "Concept vectors can stand in for the text they summarise",
            SINGH,
            "best scheme's accuracy >= 0.9 x the model's own baseline accuracy",
            "–" if score is None else f"{score:.2f} of baseline ({best.get('name', '?')})",
            verdict(None if score is None else score >= 0.9, reason),
        )
    ]


CLAIM_GROUPS: tuple[Callable[[dict[str, Any]], list[Claim]], ...] = (
    _position_claims,
    _sphere_claims,
    _walk_claims,
    _concept_claims,
)


def claims(metrics: dict[str, Any]) -> list[Claim]:
    """Every claim, in the order of the papers' sections."""
    return [c for group in CLAIM_GROUPS for c in group(metrics)]
