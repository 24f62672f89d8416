"""The report resumes from its finished stages to the metrics of an uninterrupted run.

Two ways of stopping it: interrupted in this process (KeyboardInterrupt as the walk stage
starts) and killed with SIGKILL in a subprocess, once in the middle of the sphere stage and
again in the middle of the walk stage (the later stages' statistics were filled by the
capture, see capture/taps.py). Both resumed runs draw no figures; they end with the same
metrics.json, byte for byte, and equal the uninterrupted ``minilm_report`` (which draws
them) in every number: only the record of the UMAP map, which is drawn only for figures,
differs.
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

from geomlens.capture import CaptureConfig
from geomlens.models import ModelView

ARGS = ["report", *MINILM_REPORT, "--quiet", "--figures", "none"]


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


def killed_twice_and_resumed(out: Path) -> None:
    stages = out / "stages.json"
    kill_when_stages_are(geomlens(*ARGS, "--out", str(out)), stages, ["decomposition"])
    assert not (out / "report.html").exists()
    assert (out / "stats" / "taps.safetensors").exists()  # the sphere's and walk's inputs
    kill_when_stages_are(geomlens(*ARGS, "--out", str(out)), stages, ["decomposition", "sphere"])
    assert not (out / "report.html").exists()
    resumed = geomlens(*ARGS, "--out", str(out))
    _, err = resumed.communicate(timeout=900)
    assert resumed.returncode == 0, err.decode()
    assert json.loads(stages.read_text()) == ["decomposition", "sphere", "walk"]


def interrupted_and_resumed(out: Path, minilm: ModelView, monkeypatch: pytest.MonkeyPatch) -> None:
    import geomlens.commands.report as rc

    config = CaptureConfig(model="minilm-l6", contexts=16, length=64, batch_size=8)
    real_walk = rc.walk_stage

    def interrupted(*args, **kwargs):
        def stage(*a, **k):
            raise KeyboardInterrupt

        return stage

    monkeypatch.setattr(rc, "walk_stage", interrupted)
    with pytest.raises(KeyboardInterrupt):
        rc.run_report(config, out, view=minilm, progress=False, figures="none")
    assert json.loads((out / "stages.json").read_text()) == ["decomposition", "sphere"]
    monkeypatch.setattr(rc, "walk_stage", real_walk)
    rc.run_report(config, out, view=minilm, progress=False, figures="none")


def test_an_interrupted_or_killed_report_resumes_to_the_uninterrupted_metrics(
    tmp_path: Path, minilm_report: Path, minilm: ModelView, monkeypatch: pytest.MonkeyPatch
) -> None:
    killed, interrupted = tmp_path / "killed", tmp_path / "interrupted"
    killed_twice_and_resumed(killed)
    interrupted_and_resumed(interrupted, minilm, monkeypatch)
    assert (killed / "metrics.json").read_bytes() == (interrupted / "metrics.json").read_bytes()
    resumed = json.loads((killed / "metrics.json").read_text())
    whole = json.loads((minilm_report / "metrics.json").read_text())
    assert resumed["sphere"]["trajectory"].pop("umap") is None
    assert whole["sphere"]["trajectory"].pop("umap")["file"] == "sphere_umap.json"
    assert resumed == whole
