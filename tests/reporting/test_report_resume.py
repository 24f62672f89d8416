"""The report resumes from its finished stages to the metrics of an uninterrupted run.

One run folder is stopped three times, in three ways, each at another stage: killed with
SIGKILL in a subprocess in the middle of the sphere stage, interrupted in this process
(KeyboardInterrupt as the walk stage starts), then killed again in a subprocess in the
middle of the walk stage (the later stages' statistics were filled by the capture, see
capturing/taps.py). Each stop resumes from what the one before left. The resumed run draws no
figures; its metrics equal the uninterrupted ``minilm_report`` (which draws them) in every
number: only the record of the UMAP map, which is drawn only for figures, differs.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import MINILM_REPORT

from geomlens.analyses.registry import report_stages
from geomlens.capturing import CaptureConfig
from geomlens.models import ModelView

ARGS = ["report", *MINILM_REPORT, "--quiet", "--figures", "none"]
CONFIG = CaptureConfig(model="minilm-l6", contexts=16, length=64, batch_size=8)
"""``ARGS`` as the Python API's config (the CLI's default batch size)."""


def geomlens(*argv: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "geomlens.cli", *argv],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )


def kill_when_stages_are(process: subprocess.Popen, stages: Path, done: list[str]) -> None:
    """SIGKILL the report once ``stages.json`` lists ``done`` (the next stage is running)."""
    deadline = time.monotonic() + 600
    while not (stages.exists() and json.loads(stages.read_text() or "[]") == done):
        assert process.poll() is None, f"the report ended before the stage after {done}"
        assert time.monotonic() < deadline, f"the stages {done} never finished"
        time.sleep(0.05)
    os.killpg(process.pid, signal.SIGKILL)  # kill -9
    process.wait()
    assert process.returncode == -signal.SIGKILL
    assert json.loads(stages.read_text()) == done


def interrupted_as_the_walk_starts(
    out: Path, minilm: ModelView, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Run the report in this process with its walk stage raising KeyboardInterrupt."""
    import dataclasses

    import geomlens.commands.report as rc
    from geomlens.analyses import registry

    def interrupted(*args, **kwargs):
        def stage(*a, **k):
            raise KeyboardInterrupt

        return stage

    entries = tuple(
        dataclasses.replace(a, stage=interrupted) if a.name == "walk" else a
        for a in registry.ANALYSES
    )
    with monkeypatch.context() as patch:
        patch.setattr(registry, "ANALYSES", entries)
        with pytest.raises(KeyboardInterrupt):
            rc.run_report(CONFIG, out, view=minilm, progress=False, figures="none")


def test_a_killed_and_interrupted_report_resumes_to_the_uninterrupted_metrics(
    tmp_path: Path, minilm_report: Path, minilm: ModelView, monkeypatch: pytest.MonkeyPatch
) -> None:
    from geomlens.commands.report import run_report

    out = tmp_path / "run"
    stages = out / "stages.json"
    kill_when_stages_are(geomlens(*ARGS, "--out", str(out)), stages, ["decomposition"])
    assert not (out / "report.html").exists()
    assert (out / "stats" / "taps.safetensors").exists()  # the sphere's and walk's inputs
    interrupted_as_the_walk_starts(out, minilm, monkeypatch)
    assert json.loads(stages.read_text()) == ["decomposition", "attention", "sphere"]
    assert not (out / "report.html").exists()
    kill_when_stages_are(
        geomlens(*ARGS, "--out", str(out)), stages, ["decomposition", "attention", "sphere"]
    )
    assert not (out / "report.html").exists()
    run_report(CONFIG, out, view=minilm, progress=False, figures="none")
    assert json.loads(stages.read_text()) == [a.name for a in report_stages(generates=False)]
    resumed = json.loads((out / "metrics.json").read_text())
    whole = json.loads((minilm_report / "metrics.json").read_text())
    assert resumed["sphere"]["trajectory"].pop("umap") is None
    assert whole["sphere"]["trajectory"].pop("umap")["file"] == "sphere_umap.json"
    assert resumed == whole
