"""``geomlens compare``: the per-layer numbers and the papers' claims of several finished
runs side by side (``geomlens.analyses.compare``).

Each run's metrics.json is checked first, like every other reader of a run folder: the
decomposition's layers are objects whose numbers are numbers (finite: the JSON reader
refuses NaN and Infinity), and the claims are a list of objects with numbers where numbers
belong. A damaged file is one sentence naming it and the entry, before anything is written.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from geomlens.io.files import damaged, json_kind
from geomlens.runs.runfolder import RERUN, open_run

HELP = "per-layer numbers and the papers' claims of several runs side by side"

NUMBERS = (
    *("share_pos", "share_ctx", "share_resid", "rel_norm_pos", "rel_norm_pos_centred"),
    *("pos_rank", "pos_explained", "pos_low_freq"),
)
"""Entries of a decomposition layer that compare reads as numbers (null: not computed)."""

CLAIM_NUMBERS = ("number", "low", "high")
CLAIM_TEXTS = ("id", "verdict")


def is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def layers_problem(rows: Any, where: str) -> str | None:
    """Why a list of decomposition layers is not what compare reads, or None."""
    if not isinstance(rows, list):
        return f"its {where} holds {json_kind(rows)} where a list of layers belongs"
    for i, row in enumerate(rows):
        if not isinstance(row, dict):
            return f"its {where}[{i}] holds {json_kind(row)} where an object belongs"
        if not isinstance(row.get("layer"), int) or isinstance(row.get("layer"), bool):
            return f"its {where}[{i}] has no whole layer number"
        for key in NUMBERS:
            if key in row and row[key] is not None and not is_number(row[key]):
                return f"its {where}[{i}].{key} holds {json_kind(row[key])} where a number belongs"
    return None


def claims_problem(claims: Any) -> str | None:
    """Why the claims section is not a list of claims, or None."""
    if not isinstance(claims, list):
        return f"its claims holds {json_kind(claims)} where a list of claims belongs"
    for i, claim in enumerate(claims):
        if not isinstance(claim, dict):
            return f"its claims[{i}] holds {json_kind(claim)} where an object belongs"
        for key in CLAIM_TEXTS:
            if not isinstance(claim.get(key), str):
                return f"its claims[{i}].{key} is missing or not text"
        for key in CLAIM_NUMBERS:
            if claim.get(key) is not None and not is_number(claim[key]):
                return f"its claims[{i}].{key} holds {json_kind(claim[key])} where a number belongs"
    return None


def check_run(path: str | Path) -> None:
    """Refuse a run folder whose metrics.json is not what compare reads (one sentence)."""
    run = open_run(path)
    metrics = run.metrics
    decomposition = metrics.get("decomposition")
    why = None
    if decomposition is not None:
        if not isinstance(decomposition, dict):
            why = f"its decomposition holds {json_kind(decomposition)} where an object belongs"
        else:
            why = layers_problem(decomposition.get("layers", []), "decomposition.layers")
            other = decomposition.get("other_view")
            if why is None and other is not None:
                why = (
                    f"its decomposition.other_view holds {json_kind(other)}"
                    if not isinstance(other, dict)
                    else layers_problem(other.get("layers", []), "decomposition.other_view.layers")
                )
    if why is None and "claims" in metrics:
        why = claims_problem(metrics["claims"])
    published = metrics.get("published")
    if why is None and published is not None and not isinstance(published, dict):
        why = f"its published holds {json_kind(published)} where an object belongs"
    if why is not None:
        raise damaged(run.path / "metrics.json", why, RERUN)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("runs", nargs="+", metavar="DIR", help="run folders (decompose or report)")
    parser.add_argument(
        "--out", default="runs/compare", help="output folder (default runs/compare)"
    )


def main(args: argparse.Namespace) -> int:
    from geomlens.analyses.compare import write_compare

    for path in args.runs:
        check_run(path)
    page = write_compare(args.runs, args.out)
    print(f"comparison written to {page} (and compare.csv, compare_claims.csv beside it)")
    return 0
