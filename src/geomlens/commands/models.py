"""``geomlens models``: the bundled models, or with ``--families`` the supported families."""

from __future__ import annotations

import argparse
import json
from typing import Any

HELP = "list the bundled models (or the supported families)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true")
    parser.add_argument(
        "--families",
        action="store_true",
        help="list the supported model families, their layouts and options",
    )


def print_table(rows: list[dict[str, Any]], cols: list[str]) -> None:
    """Rows as aligned columns under a header."""
    table = [cols] + [[str(r[c]) for c in cols] for r in rows]
    widths = [max(len(row[i]) for row in table) for i in range(len(cols))]
    for row in table:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=False)).rstrip())


def families(args: argparse.Namespace) -> int:
    """The supported families: position scheme, block layout, norms, what else each handles."""
    from geomlens.models.families import FAMILIES
    from geomlens.models.families.rope import rope_types
    from geomlens.models.loading import gguf_architectures

    gguf = gguf_architectures()
    rows = []
    for family in FAMILIES:
        row = {"tier": "full", **family.describe()}
        row["gguf"] = any(t in gguf or family.name in gguf for t in family.model_types)
        row["verified_by"] = (
            f"tests/models/test_families.py (rows {family.name}*), "
            "tests/models/test_family_commands.py"
        )
        rows.append(row)
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    every = list(rope_types())
    for row in rows:
        row["features"] = ", ".join(row["features"]) or "-"
        row["gguf"] = "yes" if row["gguf"] else "-"
        row["rope types"] = rope_cell(row["rope_types"], every)
    print_table(
        rows, ["family", "tier", "position", "rope types", "layout", "norm", "gguf", "features"]
    )
    print(
        f"\nRope types 'all': {', '.join(every)} (every type transformers implements; the "
        "frequencies come from the model's own rotary module, dynamic only within the "
        "original context).\nEvery load is checked against Hugging Face's own forward pass "
        "(the on-load check). Each family is checked on tiny random models "
        "(tests/models/test_families.py) and runs every command "
        "(tests/models/test_family_commands.py).\nEvery family above is in the full tier. "
        "A type no family declares loads through a declared family's layout where that "
        "layout's view passes the on-load check (also the full tier, with a notice), else in "
        "the hidden-state tier (its embeddings, residual stream, final norm where found and "
        "readout, equal to Hugging Face's hidden states; the attention-level analyses say per "
        "layer that they do not apply), or is refused with the reason; `python -m "
        "geomlens.models.reach` lists every type's tier, found by loading a tiny model of it."
    )
    return 0


def rope_cell(types: list[str], every: list[str]) -> str:
    """A family's rope types for the table: "all", "-" for none, else the list."""
    if types == every:
        return "all"
    return ", ".join(types) or "-"


def main(args: argparse.Namespace) -> int:
    from geomlens.models import BUNDLED

    if args.families:
        return families(args)

    rows = [
        {
            "name": m.name,
            "family": m.family,
            "layers": m.n_layers,
            "d_model": m.d_model,
            "heads": m.n_heads,
            "kv_heads": m.n_kv_heads,
            "position": m.position,
            "installed": m.installed,
            "install": m.install,
            "caveat": m.caveat,
        }
        for m in BUNDLED.values()
    ]
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    print_table(
        rows, ["name", "family", "layers", "d_model", "heads", "kv_heads", "position", "installed"]
    )
    print("\nWhat each model's files really are:")
    for r in rows:
        print(f"  {r['name']}: {r['caveat']}.")
    missing = [r for r in rows if not r["installed"]]
    for r in missing:
        print(f"\n{r['name']} is not installed: {r['install']}")
    return 0
