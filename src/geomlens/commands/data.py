"""``geomlens data``: rebuild the offline data folders (BIG-bench tasks, HellaSwag)."""

from __future__ import annotations

import argparse
from pathlib import Path

from geomlens.io.files import inside

HELP = "rebuild offline data folders"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    data = parser.add_subparsers(dest="dataset", required=True)
    q = data.add_parser("bigbench", help="BIG-bench task files from the bigbench package on PyPI")
    q.add_argument(
        "--out", default=None, help="folder (default: $GEOMLENS_DATA/bigbench or data/bigbench)"
    )
    q.add_argument("--archive", default=None, help="an already downloaded bigbench-1.0.0.tar.gz")
    q.add_argument("--tasks", default=None, help="comma-separated task paths (default: five)")
    q = data.add_parser("hellaswag", help="HellaSwag's validation split as a task file")
    q.add_argument(
        "--out",
        default=None,
        help="file (default: $GEOMLENS_DATA/hellaswag.jsonl or data/hellaswag.jsonl)",
    )
    q.add_argument(
        "--source", default=None, help="a local JSONL or parquet copy instead of the hub"
    )


def bigbench(args: argparse.Namespace) -> int:
    from geomlens.analyses.concepts.data import TASKS, default_out, fetch_bigbench

    tasks = tuple(t for t in args.tasks.split(",") if t) if args.tasks else TASKS
    out = args.out or default_out()
    for task in tasks:  # refused before any download: each task is written under --out
        inside(Path(out), f"{task}/task.json", f"--tasks {task!r}")
    written = fetch_bigbench(out, archive=args.archive, tasks=tasks)
    print(f"BIG-bench tasks written to {out}:")
    for task, path in sorted(written.items()):
        print(f"  {task}: {path}")
    return 0


def hellaswag(args: argparse.Namespace) -> int:
    from geomlens.analyses.concepts.hellaswag import fetch_hellaswag

    path, n = fetch_hellaswag(args.out, source=args.source)
    print(f"HellaSwag: {n} items written to {path} (use it with --task {path})")
    return 0


DATASETS = {"bigbench": bigbench, "hellaswag": hellaswag}
"""``geomlens data <dataset>`` -> what it runs."""


def main(args: argparse.Namespace) -> int:
    return DATASETS[args.dataset](args)
