"""``geomlens compare``: the per-layer numbers and the papers' claims of several finished
runs side by side (``geomlens.report.compare``)."""

from __future__ import annotations

import argparse

HELP = "per-layer numbers and the papers' claims of several runs side by side"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("runs", nargs="+", metavar="DIR", help="run folders (decompose or report)")
    parser.add_argument(
        "--out", default="runs/compare", help="output folder (default runs/compare)"
    )


def main(args: argparse.Namespace) -> int:
    from geomlens.report.compare import write_compare

    page = write_compare(args.runs, args.out)
    print(f"comparison written to {page} (and compare.csv, compare_claims.csv beside it)")
    return 0
