"""Timkey & van Schijndel's claims on rogue dimensions (arXiv 2109.04404), judged on the
run's "anisotropy" section."""

from __future__ import annotations

from typing import Any

from geomlens.analyses.anisotropy.schema import anisotropy_section
from geomlens.reporting.claims import Claim, judge, text

TIMKEY = "Timkey & van Schijndel 2021"

SCOPE = "BERT, RoBERTa, GPT-2 and XLNet (base), every layer"

DOMINATE = 0.5
"""The top-3 dimensions' share of E[cos] for "dominate": more than half."""

REMOVED = 0.5
"""Standardised E[cos] over raw E[cos] for "removes most": at most half is left."""


def anisotropy_claims(metrics: dict[str, Any], model: dict[str, Any]) -> list[Claim]:
    """The two claims on this run (every model kind: the paper measured encoders and a
    decoder)."""
    found = anisotropy_section(metrics)
    if found is None:
        return []
    share, low, high = (
        found.get("top3_share_median"),
        found.get("top3_share_low"),
        found.get("top3_share_high"),
    )
    rogue = judge(
        Claim(
            "timkey.rogue_dims",
            "One to three dimensions dominate the expected cosine similarity of random token pairs",
            TIMKEY,
            f"median over layers (after the embeddings, E[cos] >= 0.05) of the 3 largest "
            f"CC_i's share of E[cos] >= {DOMINATE:g}",
            f"{text(share, '.2f', low=low, high=high)} ({found.get('layers_judged')} layers)",
            "",
            share,
            low,
            high,
            DOMINATE,
            "95% bootstrap over 16 groups of windows",
            "1-3 rogue dimensions in each of BERT, RoBERTa, GPT-2 and XLNet",
            scope=SCOPE,
            threshold_source="geomlens's reading of 'dominate': more than half",
        ),
        True,
        "no layer after the embeddings with E[cos] >= 0.05",
    )
    ratio = found.get("standardised_ratio_median")
    standard = judge(
        Claim(
            "timkey.standardise",
            "Standardising each dimension removes most of the anisotropy",
            TIMKEY,
            f"median over layers with E[cos] >= 0.05 of standardised E[cos] / E[cos] "
            f"<= {REMOVED:g}",
            f"{text(ratio, '.2f')} ({found.get('layers_judged')} layers)",
            "",
            ratio,
            threshold=REMOVED,
            published="after standardising, E[cos] near 0 in every layer of the four models",
            scope=SCOPE,
            threshold_source="geomlens's reading of 'most': more than half removed",
        ),
        False,
        "no layer with E[cos] >= 0.05",
    )
    return [rogue, standard]
