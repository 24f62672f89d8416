"""Runs identified by content, one command per folder, every read of a run folder checked.

A run folder is trusted only when its inputs are the same (model, corpus and windows
fingerprints), one command holds it at a time (``flock`` on ``DIR/.lock``), and each file
read back is whole: a damaged file is one sentence naming it (exit 2), a damaged
checkpoint is set aside and the capture starts again. Anything that is not the user's
error is one line with a ``--debug`` hint (exit 1). docs/errors.md lists the sentences.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import shlex
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from matplotlib.figure import Figure
from safetensors.torch import load_file, save_file

import geomlens.capturing.capture
import geomlens.pipeline.run
from geomlens import open_run
from geomlens.analyses import registry
from geomlens.analyses.staged import Stage, Staged
from geomlens.cli import MAX_MESSAGE, main
from geomlens.errors import GeomlensError
from geomlens.reporting import figures
from geomlens.runs.runfolder import FINGERPRINT_VERSION, LOCK_NAME, RunFolder, write_json

# 6 windows of 16 tokens in 3 batches: every model call below takes about a second.
CAPTURE = (
    "capture --model minilm-l6 --corpus {corpus} --contexts 6 --length 16 --batch-size 2 "
    "--checkpoint-every 0 --quiet --out {out}"
)


def argv(corpus: Path, out: Path, command: str = CAPTURE) -> list[str]:
    return shlex.split(command.format(corpus=corpus, out=out))


def one_sentence(code: int, err: str, *phrases: str, exit_code: int = 2) -> str:
    """Exit code 2 (or ``exit_code``), exactly one line, no traceback, every phrase."""
    lines = err.strip().splitlines()
    assert code == exit_code, err
    assert len(lines) == 1, err
    assert "Traceback" not in err
    for phrase in phrases:
        assert phrase in lines[0], (phrase, lines[0])
    return lines[0]


def run(capsys: pytest.CaptureFixture[str], args: list[str]) -> tuple[int, str]:
    capsys.readouterr()
    code = main(args)
    return code, capsys.readouterr().err


def make_corpus(folder: Path) -> Path:
    folder.mkdir()
    for k in range(8):
        (folder / f"{k}.txt").write_text(f"document {k} on the geometry of language " * 8)
    return folder


@pytest.fixture(scope="module")
def clean(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, bytes]:
    """The corpus, and the statistics of an undisturbed run over it."""
    root = tmp_path_factory.mktemp("trusted")
    corpus = make_corpus(root / "docs")
    out = root / "clean"
    assert main(argv(corpus, out)) == 0
    return corpus, (out / "stats" / "decomposition.safetensors").read_bytes()


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    return make_corpus(tmp_path / "docs")


@pytest.fixture
def finished(clean: tuple[Path, bytes], tmp_path: Path) -> Path:
    """A finished capture run of its own (files may be damaged by the test)."""
    out = tmp_path / "finished"
    assert main(argv(clean[0], out)) == 0
    return out


def interrupt_after_first_batch(monkeypatch: pytest.MonkeyPatch) -> None:
    """The capture dies in batch 2, after the checkpoint of batch 1, like a kill."""
    real = geomlens.capturing.capture.batch_hidden_states
    calls = {"n": 0}

    def hidden_states(*args, **kwargs):  # type: ignore[no-untyped-def]
        calls["n"] += 1
        if calls["n"] == 2:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(geomlens.capturing.capture, "batch_hidden_states", hidden_states)


@pytest.fixture
def interrupted(clean: tuple[Path, bytes], tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A run folder whose capture stopped after batch 1 of 3 (its checkpoint is there)."""
    out = tmp_path / "cut"
    interrupt_after_first_batch(monkeypatch)
    assert main(argv(clean[0], out)) == 130
    monkeypatch.undo()
    assert json.loads((out / "checkpoint" / "progress.json").read_text()) == {"batches_done": 1}
    return out


# runs identified by content --------------------------------------------------------------


def test_corpus_edited_between_an_interrupted_capture_and_the_rerun_is_refused(
    capsys, corpus, tmp_path, monkeypatch
):
    out = tmp_path / "run"
    interrupt_after_first_batch(monkeypatch)
    assert main(argv(corpus, out)) == 130
    monkeypatch.undo()
    (corpus / "3.txt").write_text("an edited document about something else entirely " * 8)
    code, err = run(capsys, argv(corpus, out))
    one_sentence(
        code,
        err,
        "holds an unfinished run of this config",
        "corpus and windows changed since it was started",
        "choose another --out, or remove that folder to start afresh",
    )
    # Nothing computed is lost: the checkpoint and the manifest of the old inputs stay.
    assert (out / "checkpoint" / "state_00001.safetensors").exists()
    assert json.loads((out / "manifest.json").read_text())["status"] == "running"
    assert not (out / LOCK_NAME).exists()


def test_corpus_edited_after_a_finished_run_is_refused_and_unchanged_is_reused(
    capsys, corpus, tmp_path
):
    out = tmp_path / "run"
    assert main(argv(corpus, out)) == 0
    code, err = run(capsys, argv(corpus, out))
    assert code == 0 and "already holds this run; reusing it" in err
    metrics = (out / "metrics.json").read_bytes()
    (corpus / "extra.txt").write_text("a new document added after the run finished " * 8)
    code, err = run(capsys, argv(corpus, out))
    one_sentence(
        code,
        err,
        "holds a finished run of this config",
        "its corpus changed since it finished",
        "remove that folder to start afresh",
    )
    assert (out / "metrics.json").read_bytes() == metrics


def test_a_changed_model_or_windows_is_named(tmp_path):
    folder = RunFolder(tmp_path)
    a, x = f"{FINGERPRINT_VERSION}:a", f"{FINGERPRINT_VERSION}:x"
    manifest = {"model_fingerprint": a, "corpus_fingerprint": "b", "windows_fingerprint": "c"}
    folder.check_identity(manifest, {"model": a, "corpus": "b", "windows": "c"}, True)
    with pytest.raises(GeomlensError, match="its model and windows changed since it finished"):
        folder.check_identity(manifest, {"model": x, "corpus": "b", "windows": "y"}, True)
    # a fingerprint of the heads and tails of the weight files is not trusted as the same
    old = {**manifest, "model_fingerprint": "a"}
    with pytest.raises(GeomlensError, match="identified by an earlier geomlens"):
        folder.check_identity(old, {"model": a, "corpus": "b", "windows": "c"}, True)


# one command per folder --------------------------------------------------------------------

HOLDER = textwrap.dedent(
    """
    import fcntl, os, sys, time
    fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX)
    os.write(fd, f"{os.getpid()}\\n".encode())
    print("held", flush=True)
    time.sleep(60)
    """
)


def test_a_second_command_on_a_held_folder_names_the_holder(capsys, corpus, tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(out / LOCK_NAME)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        code, err = run(capsys, argv(corpus, out))
        one_sentence(
            code,
            err,
            f"is in use by another geomlens command (pid {holder.pid})",
            "wait for it to finish, or choose another --out",
        )
        assert sorted(p.name for p in out.iterdir()) == [LOCK_NAME]  # nothing written
    finally:
        holder.kill()
        holder.wait()
    # The holder died (kill -9): its lock file stays, and the next command takes it over.
    assert (out / LOCK_NAME).read_text().strip() == str(holder.pid)
    code, err = run(capsys, argv(corpus, out))
    assert code == 0, err
    assert not (out / LOCK_NAME).exists()


def test_a_stale_lock_file_of_a_dead_pid_is_taken_over(capsys, corpus, tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        text=True,
        capture_output=True,
        check=True,
    )
    (out / LOCK_NAME).write_text(dead.stdout)
    code, err = run(capsys, argv(corpus, out))
    assert code == 0, err
    assert json.loads((out / "manifest.json").read_text())["status"] == "complete"
    assert not (out / LOCK_NAME).exists()


def test_the_lock_is_held_for_the_whole_command(corpus, tmp_path, monkeypatch):
    """While the analyses run, another opener of the lock file cannot take it."""
    out = tmp_path / "run"
    seen = {}

    def capture_metrics(acc):  # type: ignore[no-untyped-def]
        fd = os.open(out / LOCK_NAME, os.O_RDWR)
        try:
            with pytest.raises(BlockingIOError):
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            seen["pid"] = os.read(fd, 32).decode().strip()
        finally:
            os.close(fd)
        return real(acc)

    real = geomlens.pipeline.run.capture_metrics
    monkeypatch.setattr(geomlens.pipeline.run, "capture_metrics", capture_metrics)
    assert main(argv(corpus, out)) == 0
    assert seen["pid"] == str(os.getpid())


# damaged files of a run folder -----------------------------------------------------------


def test_a_damaged_manifest_is_one_sentence_everywhere(capsys, finished, clean, tmp_path):
    (finished / "manifest.json").write_text('{"config": {"model": "minilm-l6"')
    phrases = ("manifest.json is unreadable", "not valid JSON", "remove the folder")
    one_sentence(*run(capsys, argv(clean[0], finished)), *phrases)
    compare = ["compare", str(finished), "--out", str(tmp_path / "cmp")]
    one_sentence(*run(capsys, compare), *phrases)
    with pytest.raises(GeomlensError, match="manifest.json is unreadable"):
        open_run(finished)
    (finished / "manifest.json").write_text("[1, 2]")
    one_sentence(*run(capsys, argv(clean[0], finished)), "holds a list where an object belongs")


@pytest.mark.parametrize(
    ("name", "content", "phrases"),
    [
        ("metrics.json", '{"capture": {"layers": [', ("metrics.json is unreadable", "not valid")),
        ("metrics.json", "", ("metrics.json is unreadable (empty)",)),
        ("windows.json", '{"doc_ids": ', ("windows.json is unreadable", "not valid JSON")),
        ("windows.json", '{"doc_ids": 3}', ("windows.json is unreadable", "doc_ids")),
        ("stats/decomposition.safetensors", b"\x08\x00\x00", ("decomposition.safetensors",)),
    ],
    ids=["metrics-truncated", "metrics-empty", "windows-truncated", "windows-shape", "stats"],
)
def test_a_damaged_file_of_a_finished_run_is_one_sentence(
    capsys, finished, clean, name, content, phrases
):
    path = finished / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)
    line = one_sentence(*run(capsys, argv(clean[0], finished)), *phrases, "is unreadable")
    assert "remove it and rerun the command that made this run" in line
    assert path.read_bytes() == (content if isinstance(content, bytes) else content.encode())
    with pytest.raises(GeomlensError, match="is unreadable"):
        r = open_run(finished)
        _ = r.metrics, r.windows, r.decomposition
    # As the sentence says: removing the file and rerunning writes it again.
    path.unlink()
    assert main(argv(clean[0], finished)) == 0
    assert (finished / "stats" / "decomposition.safetensors").read_bytes() == clean[1]
    assert "capture" in open_run(finished).metrics and open_run(finished).windows


def test_compare_over_a_damaged_decomposition_section_is_one_sentence(capsys, tmp_path, finished):
    metrics = json.loads((finished / "metrics.json").read_text())
    metrics["decomposition"] = {"skip_first": True, "layers": "not a list"}
    write_json(finished / "metrics.json", metrics)
    code, err = run(capsys, ["compare", str(finished), "--out", str(tmp_path / "cmp")])
    one_sentence(code, err, "metrics.json is unreadable", "list of layers")


@pytest.mark.parametrize("damage", ["progress-not-json", "state-truncated", "state-disagrees"])
def test_a_damaged_checkpoint_is_set_aside_and_the_capture_restarts(
    capsys, interrupted, clean, damage
):
    checkpoint = interrupted / "checkpoint"
    if damage == "progress-not-json":
        (checkpoint / "progress.json").write_text('{"batches_do')
    elif damage == "state-truncated":
        state = checkpoint / "state_00001.safetensors"
        state.write_bytes(state.read_bytes()[:300])
    else:  # progress says two batches, the state holds one
        os.replace(checkpoint / "state_00001.safetensors", checkpoint / "state_00002.safetensors")
        write_json(checkpoint / "progress.json", {"batches_done": 2})
    code, err = run(capsys, argv(clean[0], interrupted))
    assert code == 0, err
    notices = [line for line in err.splitlines() if line.startswith("geomlens: notice:")]
    assert len(notices) == 1 and "is damaged" in notices[0], err
    assert "set aside as" in notices[0] and "checkpoint.damaged-1" in notices[0]
    assert (interrupted / "checkpoint.damaged-1").is_dir()
    assert not checkpoint.exists()
    assert (interrupted / "stats" / "decomposition.safetensors").read_bytes() == clean[1]


def test_a_checkpoint_of_other_shapes_is_not_trusted(capsys, interrupted, clean):
    state_path = interrupted / "checkpoint" / "state_00001.safetensors"
    state = load_file(str(state_path))
    state["pos_sum"] = torch.zeros(1, 2, 3, dtype=torch.float64)
    save_file(state, str(state_path))
    code, err = run(capsys, argv(clean[0], interrupted))
    assert code == 0 and "pos_sum is (1, 2, 3)" in err, err
    assert (interrupted / "stats" / "decomposition.safetensors").read_bytes() == clean[1]


def test_an_intact_checkpoint_still_resumes(capsys, interrupted, clean):
    code, err = run(capsys, argv(clean[0], interrupted))
    assert code == 0 and "notice" not in err, err
    assert (interrupted / "stats" / "decomposition.safetensors").read_bytes() == clean[1]


# report stages count as finished only with their numbers -----------------------------------


def stage(name: str, calls: list[str]):  # type: ignore[no-untyped-def]
    def factory(step):  # type: ignore[no-untyped-def]
        def analyse(folder, view, windows, acc):  # type: ignore[no-untyped-def]
            calls.append(name)
            for section in registry.stage_sections()[name]:
                folder.merge_metrics(section, {"from": name})

        return analyse

    return Stage(name, name, factory)


def test_a_stage_listed_without_its_numbers_runs_again(tmp_path, capsys):
    folder = RunFolder(tmp_path)
    calls: list[str] = []
    stages = [stage(n, calls) for n in ("decomposition", "attention", "sphere", "walk")]
    Staged(stages, progress=False)(folder, None, None, None)  # type: ignore[arg-type]
    assert calls == ["decomposition", "attention", "sphere", "walk"]
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    del metrics["sphere"], metrics["induction"]  # stages.json still lists every stage
    write_json(tmp_path / "metrics.json", metrics)
    calls.clear()
    capsys.readouterr()
    Staged(stages, progress=False)(folder, None, None, None)  # type: ignore[arg-type]
    assert calls == ["attention", "sphere"]
    assert "records the stages attention, sphere as done" in capsys.readouterr().err
    assert set(json.loads((tmp_path / "metrics.json").read_text())) >= {"sphere", "induction"}


def test_a_damaged_stages_record_is_one_sentence(tmp_path):
    (tmp_path / "stages.json").write_text('["decomposition", ')
    with pytest.raises(GeomlensError, match=r"stages.json is unreadable \(not valid JSON"):
        Staged([], progress=False)(RunFolder(tmp_path), None, None, None)  # type: ignore[arg-type]
    (tmp_path / "stages.json").write_text('{"decomposition": true}')
    with pytest.raises(GeomlensError, match="holds an object where a list belongs"):
        Staged([], progress=False)(RunFolder(tmp_path), None, None, None)  # type: ignore[arg-type]


# one error boundary --------------------------------------------------------------------------

BROKEN = textwrap.dedent(
    """
    import sys
    import geomlens.cli as cli
    import geomlens.commands.models as models
    def cmd_models(args):
        raise ZeroDivisionError("x" * 5000)
    models.main = cmd_models
    sys.exit(cli.main(sys.argv[1:]))
    """
)


def test_an_internal_error_is_one_line_and_debug_shows_the_traceback(capsys, monkeypatch):
    done = subprocess.run(
        [sys.executable, "-c", BROKEN, "models"], capture_output=True, text=True, timeout=120
    )
    line = one_sentence(
        done.returncode,
        done.stderr,
        "geomlens: internal error: ZeroDivisionError: xxx",
        "...; rerun with --debug for the traceback.",
        exit_code=1,
    )
    assert len(line) <= MAX_MESSAGE + 100
    import geomlens.commands.models as models

    def cmd_models(args):  # type: ignore[no-untyped-def]
        raise ZeroDivisionError("a bug")

    monkeypatch.setattr(models, "main", cmd_models)
    one_sentence(*run(capsys, ["models"]), "internal error: ZeroDivisionError: a bug", exit_code=1)
    with pytest.raises(ZeroDivisionError, match="a bug"):  # the traceback reaches the terminal
        main(["--debug", "models"])


def test_debug_is_accepted_after_the_command_and_user_errors_stay_exit_2(capsys):
    one_sentence(*run(capsys, ["capture", "--contexts", "0", "--debug"]), "--contexts")


def test_long_messages_are_bounded(capsys, monkeypatch):
    import geomlens.commands.models as models

    def cmd_models(args):  # type: ignore[no-untyped-def]
        raise GeomlensError("a " * 3000)

    monkeypatch.setattr(models, "main", cmd_models)
    line = one_sentence(*run(capsys, ["models"]))
    assert len(line) <= len("geomlens: error: ") + MAX_MESSAGE and line.endswith("...")


def test_a_full_disk_while_saving_a_figure_names_the_figure(tmp_path, monkeypatch):
    target = tmp_path / "figures" / "plot.png"
    fig = figures.new_figure(2, 2)
    figures.save(fig, target)
    before = target.read_bytes()

    def savefig(self, fname, **kwargs):  # type: ignore[no-untyped-def]
        Path(fname).write_bytes(b"half a png")
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(Figure, "savefig", savefig)
    with pytest.raises(OSError) as info:
        figures.save(fig, target)
    assert info.value.errno == errno.ENOSPC and info.value.filename == str(target)
    assert target.read_bytes() == before
    assert sorted(p.name for p in target.parent.iterdir()) == ["plot.png"]
    # A figure written in a forked child reports the same error to the parent.
    with pytest.raises(OSError) as info:
        figures.save_in_background([(fig, tmp_path / "other.png")])()
    assert info.value.errno == errno.ENOSPC and info.value.filename == str(tmp_path / "other.png")
