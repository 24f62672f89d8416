"""Step lines and the bars of a step (``io/progress.py``)."""

from __future__ import annotations

import re

import pytest

from geomlens.io.progress import StepLines, quiet, step_bar


def test_a_step_bar_names_its_step_counts_its_items_and_says_the_time_left(
    capsys: pytest.CaptureFixture[str],
) -> None:
    step = StepLines("  sphere")
    step("head probe")
    with step_bar(step, 3, "layer") as bar:
        for _ in range(3):
            bar.update(1)
    lines = capsys.readouterr().err.replace("\r", "\n").splitlines()
    assert re.fullmatch(r"  sphere: head probe \(0 s\)", lines[0])
    bars = [line for line in lines if line.startswith("  sphere: head probe: ")]
    assert bars, lines
    # items done of the total, then tqdm's [elapsed<left, rate]
    assert re.search(r" 3/3 \[\d\d:\d\d<\d\d:\d\d, +\S+(layer/s|s/layer)\]", bars[-1])


def test_a_bar_is_silent_where_its_step_is(capsys: pytest.CaptureFixture[str]) -> None:
    lines = StepLines("  walk", enabled=False)
    lines("encoding walk")
    for step in (quiet, lines):
        with step_bar(step, 2, "walk") as bar:
            bar.update(2)
    assert capsys.readouterr().err == ""
