"""The family list and counts in README.md and docs/models.md agree with the registry.

The registry is ``geomlens.models.families.FAMILIES``, as ``geomlens models --families
--json`` prints it; read when the test runs, so a family added there without its row in
docs/models.md (or with a stale count in either file) fails here.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from geomlens.cli import main

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def registry() -> list[dict]:
    """One row per family, in the registry's order (``geomlens models --families --json``)."""
    import contextlib
    import io

    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert main(["models", "--families", "--json"]) == 0
    return json.loads(printed.getvalue())


def section(text: str, heading: str) -> str:
    """The text under a markdown heading, up to the next heading of the same level."""
    level = heading.split(" ")[0]
    start = text.index(heading + "\n")
    rest = text[start + len(heading) + 1 :]
    end = re.search(rf"^{re.escape(level)} ", rest, flags=re.MULTILINE)
    return rest[: end.start()] if end else rest


def table(text: str) -> list[list[str]]:
    """The rows of the first markdown table in ``text`` (header and rule left out), each a
    list of cells with code backticks removed."""
    lines = [line for line in text.splitlines() if line.startswith("|")]
    rows = [[c.strip().replace("`", "") for c in line.strip("|").split("|")] for line in lines]
    return rows[2:]


def test_the_registry_is_read(registry):
    """The registry's rows carry what the docs' table shows, one family per name."""
    assert len(registry) > 40
    names = [row["family"] for row in registry]
    assert len(set(names)) == len(names) and {"llama", "bert", "t5"} <= set(names)


def test_docs_models_lists_every_registered_family(registry):
    text = section((ROOT / "docs" / "models.md").read_text(), "## Supported families")
    types = sum(len(row["model_types"]) for row in registry)
    count = re.search(r"(\d+) model types in (\d+) families", text)
    assert count, "docs/models.md: no 'N model types in M families' line"
    assert (int(count[1]), int(count[2])) == (types, len(registry)), (
        f"docs/models.md says {count[0]}; the registry holds {types} model types in "
        f"{len(registry)} families"
    )
    rows = table(text)
    assert [r[0] for r in rows] == [row["family"] for row in registry], (
        "docs/models.md's table and the registry (FAMILIES) differ in families or order"
    )
    for cells, row in zip(rows, registry, strict=True):
        name = row["family"]
        assert cells[1].split(", ") == row["model_types"], name
        assert cells[2] == row["position"], name
        rope = row["rope_types"]
        assert cells[3] in (["–", "-"] if not rope else ["all", ", ".join(rope)]), name
        assert (cells[3] == "all") == (len(rope) > 1), name
        assert cells[4] == row["layout"], name
        assert cells[5] == row["norm"], name
        assert (cells[6] == "yes") == row["gguf"], name
        missing = [f for f in row["features"] if f not in cells[7]]
        assert not missing, f"{name}: docs/models.md does not name {missing}"


def test_readme_states_the_registered_count(registry):
    text = (ROOT / "README.md").read_text()
    counts = re.findall(r"`geomlens models --families` lists the (\d+) supported families", text)
    assert counts == [str(len(registry))], (
        f"README.md states {counts}; the registry holds {len(registry)} families"
    )


def test_the_table_reader_reads_rows():
    text = "## A\n\n| a | b |\n| --- | --- |\n| `x` | 1 |\n| y | 2 |\n\n## B\n| c |\n"
    assert table(section(text, "## A")) == [["x", "1"], ["y", "2"]]
