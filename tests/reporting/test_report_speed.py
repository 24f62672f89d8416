"""The report draws a stage's figures while the next stage runs, and records a stage as
finished only once its figures are on disk."""

from __future__ import annotations

import json
import os
import signal
import types
from pathlib import Path
from typing import Any

import pytest
from matplotlib.figure import Figure

from geomlens.analyses.staged import Stage, Staged
from geomlens.reporting.figures import (
    deferred_rendering,
    new_figure,
    rendered_in_background,
    save_later,
)
from geomlens.runs.runfolder import RunFolder


class KilledWhileDrawing(Figure):
    """A figure whose drawing kills the (forked) process that draws it."""

    def savefig(self, *args: Any, **kwargs: Any) -> None:
        os.kill(os.getpid(), signal.SIGKILL)


def figure_stage(figure: Figure, name: str):  # type: ignore[no-untyped-def]
    """A stage factory whose stage draws one figure in the background."""

    def factory(step: Any):  # type: ignore[no-untyped-def]
        def stage(folder: RunFolder, view: Any, windows: Any, acc: Any) -> None:
            with rendered_in_background():
                save_later(figure, folder.path / "figures" / f"{name}.png")

        return stage

    return factory


def failing_stage(step: Any):  # type: ignore[no-untyped-def]
    def stage(*args: Any) -> None:
        raise KeyboardInterrupt

    return stage


VIEW: Any = types.SimpleNamespace(is_seq2seq=False)
NOTHING: Any = None  # the stages here read no windows and no statistics


def test_waits_write_every_queued_figure(tmp_path: Path) -> None:
    with deferred_rendering() as waits, rendered_in_background():
        for name in ("one", "two"):
            path = save_later(new_figure(2, 2), tmp_path / f"{name}.png")
            assert path == tmp_path / f"{name}.png"
    assert len(waits) == 1
    for wait in waits:
        wait()
    assert (tmp_path / "one.png").stat().st_size > 0 and (tmp_path / "two.png").exists()


def test_outside_any_scope_the_figures_are_written_at_once(tmp_path: Path) -> None:
    with rendered_in_background():
        save_later(new_figure(2, 2), tmp_path / "now.png")
    assert (tmp_path / "now.png").exists()


def test_stages_are_recorded_after_their_figures(tmp_path: Path) -> None:
    stages = [
        Stage("a", "first", figure_stage(new_figure(2, 2), "a")),
        Stage("b", "second", figure_stage(new_figure(2, 2), "b")),
    ]
    Staged(stages, progress=False)(RunFolder(tmp_path), VIEW, NOTHING, NOTHING)
    assert json.loads((tmp_path / "stages.json").read_text()) == ["a", "b"]
    assert (tmp_path / "figures" / "a.png").exists() and (tmp_path / "figures" / "b.png").exists()


def test_an_interrupted_stage_still_records_the_drawn_stage_before_it(tmp_path: Path) -> None:
    stages = [
        Stage("a", "first", figure_stage(new_figure(2, 2), "a")),
        Stage("b", "second", failing_stage),
    ]
    with pytest.raises(KeyboardInterrupt):
        Staged(stages, progress=False)(RunFolder(tmp_path), VIEW, NOTHING, NOTHING)
    assert json.loads((tmp_path / "stages.json").read_text()) == ["a"]
    assert (tmp_path / "figures" / "a.png").exists()


def test_a_kill_while_drawing_leaves_the_stage_unfinished(tmp_path: Path) -> None:
    stages = [
        Stage("a", "first", figure_stage(KilledWhileDrawing(), "a")),
        Stage("b", "second", figure_stage(new_figure(2, 2), "b")),
    ]
    with pytest.raises(RuntimeError, match="writing figures failed"):
        Staged(stages, progress=False)(RunFolder(tmp_path), VIEW, NOTHING, NOTHING)
    record = tmp_path / "stages.json"
    assert not record.exists() or "a" not in json.loads(record.read_text())
