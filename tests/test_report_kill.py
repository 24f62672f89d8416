"""The report, killed with SIGKILL in the middle of its sphere stage, resumes from its
finished stages and ends with the same metrics.json, byte for byte, as an uninterrupted
run of the same command."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ARGS = ["report", "--model", "minilm-l6", "--contexts", "16", "--length", "64", "--quiet"]


def geomlens(*argv: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "geomlens.cli", *argv],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )


def test_report_killed_during_the_sphere_stage_resumes_to_identical_metrics(tmp_path: Path):
    killed = tmp_path / "killed"
    process = geomlens(*ARGS, "--out", str(killed))
    stages = killed / "stages.json"
    deadline = time.monotonic() + 600
    while not (stages.exists() and json.loads(stages.read_text() or "[]") == ["decomposition"]):
        assert process.poll() is None, "the report ended before its sphere stage"
        assert time.monotonic() < deadline, "the decomposition stage never finished"
        time.sleep(0.05)
    os.killpg(process.pid, signal.SIGKILL)  # the sphere stage is running: kill -9
    process.wait()
    assert process.returncode == -signal.SIGKILL
    assert json.loads(stages.read_text()) == ["decomposition"]
    assert not (killed / "report.html").exists()

    resumed = geomlens(*ARGS, "--out", str(killed))
    _, err = resumed.communicate(timeout=900)
    assert resumed.returncode == 0, err.decode()
    whole = geomlens(*ARGS, "--out", str(tmp_path / "whole"))
    _, err = whole.communicate(timeout=900)
    assert whole.returncode == 0, err.decode()
    assert json.loads(stages.read_text()) == ["decomposition", "sphere", "walk"]
    assert (killed / "metrics.json").read_bytes() == (
        tmp_path / "whole" / "metrics.json"
    ).read_bytes()
