"""Where the tests find multiple-choice tasks: small copies kept in the repository, and the
full BIG-bench tasks when ``GEOMLENS_DATA`` names a folder holding them.

Nothing is downloaded or built: tests read ``FIXTURES`` (tests/data, the first examples of
three BIG-bench tasks, see tests/data/bigbench/NOTICE.md); tests that need whole tasks are
marked ``@pytest.mark.bigbench`` and skipped, with ``NO_BIGBENCH`` as the reason, where
``BIGBENCH`` is None.
"""

from __future__ import annotations

import os
from pathlib import Path

FIXTURES = Path(__file__).resolve().parent / "data"
"""The folder holding ``bigbench/<task>/task.json``, the tasks' first examples."""

FIXTURE_TASKS = {"goal_step_wikihow/step_inference": 16, "social_iqa": 16, "timedial": 40}
"""The tasks under ``FIXTURES/bigbench`` and how many examples each keeps."""


def full_tasks() -> Path | None:
    """``$GEOMLENS_DATA`` when it holds ``bigbench/`` (CI sets it to ../shared/data), else
    None. The small copies are not the full tasks, even where ``GEOMLENS_DATA`` names them
    (conftest points it there, and pytest-xdist's workers inherit that)."""
    given = os.environ.get("GEOMLENS_DATA")
    if given and (Path(given) / "bigbench").is_dir() and Path(given).resolve() != FIXTURES:
        return Path(given)
    return None


BIGBENCH = full_tasks()
"""The folder holding the full tasks' ``bigbench/``, or None (the marked tests skip)."""

NO_BIGBENCH = (
    "needs the full BIG-bench tasks: run `geomlens data bigbench --out DIR/bigbench` (about "
    "360 MB from PyPI) and set GEOMLENS_DATA=DIR"
)
"""Why a test marked ``bigbench`` is skipped."""
