"""The report, killed with SIGKILL in the middle of its sphere stage and again in the
middle of its walk stage, resumes from its finished stages (their statistics were filled
by the capture, see capture/taps.py) and ends with the same metrics.json, byte for byte,
as an uninterrupted run of the same command."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from conftest import MINILM_REPORT

ARGS = ["report", *MINILM_REPORT, "--quiet"]


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


def test_report_killed_during_the_sphere_and_walk_stages_resumes_to_identical_metrics(
    tmp_path: Path, minilm_report: Path
):
    """``minilm_report`` is the uninterrupted run of the same command (in this process)."""
    killed = tmp_path / "killed"
    stages = killed / "stages.json"
    kill_when_stages_are(geomlens(*ARGS, "--out", str(killed)), stages, ["decomposition"])
    assert not (killed / "report.html").exists()
    assert (killed / "stats" / "taps.safetensors").exists()  # the sphere's and walk's inputs
    resumed = geomlens(*ARGS, "--out", str(killed))
    kill_when_stages_are(resumed, stages, ["decomposition", "sphere"])
    assert not (killed / "report.html").exists()

    resumed = geomlens(*ARGS, "--out", str(killed))
    _, err = resumed.communicate(timeout=900)
    assert resumed.returncode == 0, err.decode()
    assert json.loads(stages.read_text()) == ["decomposition", "sphere", "walk"]
    whole = minilm_report / "metrics.json"
    assert (killed / "metrics.json").read_bytes() == whole.read_bytes()
