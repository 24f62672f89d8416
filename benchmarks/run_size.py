"""Size of a report's page and run folder, by file kind (issue 32's targets).

    python benchmarks/run_size.py DIR [--json]

DIR is a finished ``geomlens report`` folder (the default one:
``nice -n 10 geomlens report --out DIR``, several minutes). Prints:

- the page: ``report.html``'s size, how much of it is plotly.js (inlined once, packed),
  inlined PNGs and figure data, against the 5 MB target;
- the run folder: its size by kind (statistics, figures, page, metrics and other JSON,
  walk tensors), the largest files, against the 100 MB target;
- the stored statistics: what ``stats/stored.json`` says was kept in float32 and dropped.

Nothing is timed; the numbers are bytes on disk (MB = 10^6 bytes).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import defaultdict
from pathlib import Path

PAGE_TARGET_MB = 5.0
FOLDER_TARGET_MB = 100.0

KINDS = (
    ("stats/", "statistics (stats/)"),
    ("figures/plotly.min.js", "plotly.js for figures/*.html"),
    ("figures/", "figures (PNG, HTML, plotly JSON)"),
    ("report.html", "report.html"),
    ("checkpoint/", "checkpoints (unfinished runs)"),
    ("activations/", "saved activations"),
)


def kind_of(relative: str) -> str:
    """The kind of a file of the run folder, by its path."""
    for prefix, name in KINDS:
        if relative.startswith(prefix):
            return name
    suffix = Path(relative).suffix
    return {".json": "metrics and other JSON", ".safetensors": "walk tensors"}.get(
        suffix, f"other ({suffix or 'no suffix'})"
    )


def folder_sizes(folder: Path) -> tuple[dict[str, int], list[tuple[int, str]]]:
    """Bytes per kind, and every file with its bytes (largest first)."""
    by_kind: dict[str, int] = defaultdict(int)
    files = []
    for path in folder.rglob("*"):
        if path.is_file():
            relative = path.relative_to(folder).as_posix()
            size = path.stat().st_size
            by_kind[kind_of(relative)] += size
            files.append((size, relative))
    return dict(by_kind), sorted(files, reverse=True)


def page_parts(page: str) -> dict[str, int]:
    """Characters of the page by part: packed plotly.js, inlined PNGs, figure data, rest."""
    plotly = re.search(r'id="plotly-gzip">([^<]*)</script>', page)
    images = sum(len(m) for m in re.findall(r'src="data:image/png;base64,[^"]*"', page))
    data = sum(
        len(m)
        for m in re.findall(
            r'<script type="application/(?:json|gzip-base64)" id="plot-[^"]*">([^<]*)</script>',
            page,
        )
    )
    packed = len(plotly.group(1)) if plotly else 0
    return {
        "plotly.js (packed)": packed,
        "inlined PNGs": images,
        "figure data": data,
        "tables, text and styles": len(page) - packed - images - data,
    }


def measure(folder: Path) -> dict[str, object]:
    """Every number this script prints, as a dict."""
    page_path = folder / "report.html"
    page = page_path.read_text(encoding="utf-8") if page_path.exists() else ""
    by_kind, files = folder_sizes(folder)
    stored = folder / "stats" / "stored.json"
    return {
        "folder": str(folder),
        "page_mb": page_path.stat().st_size / 1e6 if page else None,
        "page_parts_mb": {k: v / 1e6 for k, v in page_parts(page).items()} if page else {},
        "plotly_inlined": page.count('id="plotly-gzip"') + page.count("* plotly.js v"),
        "folder_mb": sum(by_kind.values()) / 1e6,
        "by_kind_mb": {k: v / 1e6 for k, v in sorted(by_kind.items(), key=lambda kv: -kv[1])},
        "largest": [(relative, size / 1e6) for size, relative in files[:8]],
        "stored": json.loads(stored.read_text()) if stored.exists() else None,
    }


def show(found: dict[str, object]) -> None:
    page_mb, folder_mb = found["page_mb"], found["folder_mb"]
    print(f"run folder {found['folder']}")
    if page_mb is not None:
        ok = "under" if page_mb < PAGE_TARGET_MB else "OVER"
        print(f"\nreport.html: {page_mb:.2f} MB ({ok} the {PAGE_TARGET_MB:g} MB target)")
        print(f"  plotly.js inlined {found['plotly_inlined']} time(s)")
        for part, mb in found["page_parts_mb"].items():  # type: ignore[union-attr]
            print(f"  {part:28s} {mb:8.2f} MB")
    ok = "under" if folder_mb < FOLDER_TARGET_MB else "OVER"  # type: ignore[operator]
    print(f"\nrun folder: {folder_mb:.1f} MB ({ok} the {FOLDER_TARGET_MB:g} MB target)")
    for kind, mb in found["by_kind_mb"].items():  # type: ignore[union-attr]
        print(f"  {kind:34s} {mb:8.2f} MB")
    print("\nlargest files:")
    for relative, mb in found["largest"]:  # type: ignore[union-attr]
        print(f"  {relative:46s} {mb:8.2f} MB")
    stored = found["stored"]
    if stored:
        print(
            f"\nstored statistics: float32 {', '.join(stored['float32'])}; "  # type: ignore[index]
            f"dropped {', '.join(stored['dropped'])}"  # type: ignore[index]
        )
    else:
        print("\nstored statistics: whole (no stats/stored.json)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path, help="a finished report's run folder")
    parser.add_argument("--json", action="store_true", help="print the numbers as JSON")
    args = parser.parse_args(argv)
    if not (args.folder / "manifest.json").exists():
        print(f"{args.folder} holds no geomlens run (no manifest.json).", file=sys.stderr)
        return 2
    found = measure(args.folder)
    if args.json:
        print(json.dumps(found, indent=1))
    else:
        show(found)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
