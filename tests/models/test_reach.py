"""The reach table in docs/models.md is true: regenerated here by real tiny loads (each
undeclared type's tiny model loaded as ``load_folder`` loads it), it equals the table the
docs hold, row by row; a few known rows have the tier they are known to have."""

from __future__ import annotations

import difflib
from pathlib import Path

import pytest

from geomlens.models.reach import Reach, markdown, reach_table

DOCS = Path(__file__).resolve().parents[2] / "docs" / "models.md"


@pytest.fixture(scope="module")
def rows() -> dict[str, Reach]:
    """Every text model type's row, by a real tiny load (about 60 s on one core)."""
    return {row.model_type: row for row in reach_table()}


def documented() -> str:
    """The counts line and the table under docs/models.md's "## Reach" heading."""
    section = DOCS.read_text().split("\n## Reach\n", 1)[1].split("\n## ", 1)[0]
    start = section.index(" text model types (")
    return section[section.rindex("\n", 0, start) + 1 :].strip() + "\n"


def test_the_docs_table_is_the_regenerated_one(rows: dict[str, Reach]) -> None:
    generated = markdown(list(rows.values()))
    changed = list(
        difflib.unified_diff(
            documented().splitlines(), generated.splitlines(), "docs", "loads", lineterm="", n=0
        )
    )
    assert not changed, (
        "docs/models.md's reach table differs from real tiny loads; regenerate it with "
        "`python -m geomlens.models.reach`:\n" + "\n".join(changed[:40])
    )


def test_known_rows_have_their_tier(rows: dict[str, Reach]) -> None:
    assert (rows["llama"].tier, rows["llama"].why) == ("full", "the llama family")
    assert rows["deepseek_v3"].tier == "hidden-state"
    assert "multi-head latent attention" in rows["deepseek_v3"].why
    assert rows["marian"].tier == "refused" and "encoder-decoder" in rows["marian"].why
    # an undeclared type whose view through a declared layout passes the on-load check
    assert (rows["internlm3"].tier, rows["internlm3"].why) == ("full", "through the llama layout")
    # Arcee's squared-ReLU MLP: helium's layout builds but differs on the check
    assert rows["arcee"].tier == "hidden-state"
    assert rows["arcee"].why.startswith("no declared layout reproduces its forward pass; first")
    # a state-space model whose hidden states no list of modules returns block by block
    assert rows["mamba"].tier == "refused" and "block by block" in rows["mamba"].why
    assert {row.tier for row in rows.values()} == {"full", "hidden-state", "refused"}
    assert len(rows) > 150
