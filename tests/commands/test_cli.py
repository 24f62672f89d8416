"""The command line: listings, one-sentence errors with exit code 2, resume after a kill."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from geomlens.cli import main


def run_main(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def assert_one_sentence_error(code: int, err: str, *phrases: str) -> None:
    assert code == 2
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith("geomlens: error: ") and "Traceback" not in err
    for phrase in phrases:
        assert phrase in lines[0], (phrase, lines[0])


def test_models_lists_bundled_names_as_table_and_json(capsys):
    code, out, _ = run_main(capsys, "models")
    assert code == 0
    for name in ("smollm2-135m", "minilm-l6", "gemma3-270m"):
        assert name in out
    code, out, _ = run_main(capsys, "models", "--json")
    rows = {r["name"]: r for r in json.loads(out)}
    assert rows["smollm2-135m"]["installed"] is True
    assert rows["smollm2-135m"]["layers"] == 30 and rows["smollm2-135m"]["kv_heads"] == 3
    assert rows["minilm-l6"]["position"] == "learned"


def test_unknown_model_suggests_the_nearest_name(capsys, tmp_path):
    code, _, err = run_main(capsys, "capture", "--model", "smollm2", "--out", str(tmp_path / "r"))
    assert_one_sentence_error(code, err, "unknown model 'smollm2'", "smollm2-135m")


def test_path_without_a_model(capsys, tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    code, _, err = run_main(capsys, "capture", "--model", str(empty), "--out", str(tmp_path / "r"))
    assert_one_sentence_error(code, err, "holds no model")


def test_corpus_too_small_for_the_contexts(capsys, tmp_path):
    code, _, err = run_main(
        capsys,
        "capture",
        "--model",
        "minilm-l6",
        "--contexts",
        "5000",
        "--length",
        "64",
        "--out",
        str(tmp_path / "r"),
        "--quiet",
    )
    assert_one_sentence_error(code, err, "lower --contexts or --length")


def test_length_above_the_model_maximum(capsys, tmp_path):
    code, _, err = run_main(
        capsys, "capture", "--model", "minilm-l6", "--length", "600", "--out", str(tmp_path / "r")
    )
    assert_one_sentence_error(code, err, "--length 600", "512")


def test_batch_size_below_one(capsys, tmp_path):
    code, _, err = run_main(capsys, "capture", "--batch-size", "0", "--out", str(tmp_path / "r"))
    assert_one_sentence_error(code, err, "--batch-size must be at least 1")


def test_out_folder_with_a_run_of_another_config(capsys, tmp_path):
    out = str(tmp_path / "r")
    args = ["capture", "--model", "minilm-l6", "--contexts", "4", "--length", "16", "--quiet"]
    assert run_main(capsys, *args, "--out", out)[0] == 0
    code, _, err = run_main(capsys, *args[:-1], "--seed", "7", "--out", out)
    assert_one_sentence_error(code, err, "different config", "seed")


def test_unreadable_corpus_file(capsys, tmp_path):
    code, _, err = run_main(
        capsys,
        "capture",
        "--model",
        "minilm-l6",
        "--corpus",
        str(tmp_path / "nope.jsonl"),
        "--out",
        str(tmp_path / "r"),
    )
    assert code == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1


CAPTURE = [
    sys.executable,
    "-m",
    "geomlens.cli",
    "capture",
    "--model",
    "minilm-l6",
    "--contexts",
    "48",
    "--length",
    "64",
    "--batch-size",
    "2",
    "--quiet",
    "--checkpoint-every",
    "0",
]


def start(out: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [*CAPTURE, "--out", str(out)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def batches_done(out: Path) -> int:
    """The batches the folder's checkpoint holds (0: none yet, or being replaced)."""
    try:
        return json.loads((out / "checkpoint" / "progress.json").read_text())["batches_done"]
    except (FileNotFoundError, json.JSONDecodeError, KeyError):
        return 0


def wait_for_checkpoint(
    proc: subprocess.Popen, out: Path, after: int = 0, timeout: float = 120
) -> None:
    """Until the running capture has saved a checkpoint past batch ``after``."""
    deadline = time.time() + timeout
    while batches_done(out) <= after:
        assert proc.poll() is None, proc.communicate()
        assert time.time() < deadline, "no checkpoint appeared"
        time.sleep(0.05)


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory, minilm) -> bytes:
    """The statistics of ``CAPTURE`` run to the end in one go (in this process, on the
    session's MiniLM: the same bytes as the command line's)."""
    from geomlens.capturing import CaptureConfig
    from geomlens.commands.capture import run_capture

    out = tmp_path_factory.mktemp("clean") / "run"
    config = CaptureConfig(model="minilm-l6", contexts=48, length=64, batch_size=2)
    run_capture(config, out, view=minilm, progress=False)
    return (out / "stats" / "decomposition.safetensors").read_bytes()


def stopped(out: Path, sig: signal.Signals, after: int) -> int:
    """Start (or resume) the capture in ``out``, send ``sig`` once it has saved a
    checkpoint past batch ``after``; the batches its checkpoint then holds."""
    proc = start(out)
    wait_for_checkpoint(proc, out, after)
    os.kill(proc.pid, sig)
    _, err = proc.communicate(timeout=120)
    if sig == signal.SIGKILL:
        assert proc.returncode == -signal.SIGKILL
    else:
        assert proc.returncode == 2, err
        assert "rerun the same command to resume" in err and "Traceback" not in err
    done = batches_done(out)
    assert after < done < 24
    return done


def test_interrupted_capture_resumes_to_identical_statistics(tmp_path, uninterrupted):
    """One capture stopped by each signal in turn, each resumed run stopped after it saved
    a checkpoint of its own: SIGINT and SIGTERM (stop at the next batch boundary, save,
    exit 2, one sentence) and SIGKILL (no handler: the last checkpoint is what is left).
    The last rerun finishes with the uninterrupted capture's statistics, byte for byte."""
    out = tmp_path / "run"
    done = 0
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGKILL):
        done = stopped(out, sig, done)
    finished = subprocess.run([*CAPTURE, "--out", str(out)], capture_output=True, text=True)
    assert finished.returncode == 0, finished.stderr
    assert (out / "stats" / "decomposition.safetensors").read_bytes() == uninterrupted
    assert not (out / "checkpoint").exists()
