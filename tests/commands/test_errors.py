"""Bad inputs across the commands: one sentence on stderr, exit code 2, nothing computed lost.

One table drives the test; docs/errors.md lists the same cases. Most run through
``geomlens.cli.main`` in this process and fail before a model loads; those that need one
use MiniLM; a few run as a subprocess to show that no traceback reaches the terminal.
"""

from __future__ import annotations

import errno
import json
import os
import shlex
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch
from safetensors import SafetensorError

import geomlens.capturing.capture
import geomlens.capturing.store
from geomlens.cli import main
from geomlens.errors import os_error_sentence
from geomlens.models.bundled import BUNDLED

# A small corpus folder (``docs``) keeps tokenizing out of the runtime of cases that capture.
TINY = "--model minilm-l6 --corpus {d}/docs --contexts 2 --length 16 --quiet"
CAPTURE6 = (
    "capture --model minilm-l6 --corpus {d}/docs --contexts 6 --length 16 --batch-size 2 --quiet"
)
RUNS_WITH_OUT = ("capture", "decompose", "walk", "sphere", "concepts", "arithmetic", "report")

Hook = Callable[[Path, Path, pytest.MonkeyPatch], None]


@dataclass(frozen=True)
class Case:
    """One bad input: the command line, what its sentence must say, and optional hooks.

    ``argv`` is formatted with ``d`` (the folder of prepared inputs) and ``out`` (this
    case's run folder); ``before`` runs first and ``after`` checks what was kept.
    """

    id: str
    argv: str
    phrases: tuple[str, ...]
    subprocess: bool = False
    before: Hook | None = None
    after: Hook | None = None


# hooks ----------------------------------------------------------------------------------


def skip_as_root(d: Path, out: Path, mp: pytest.MonkeyPatch) -> None:
    if os.geteuid() == 0:
        pytest.skip("root writes to any folder: the run-folder-under-a-file case covers this")
    out.mkdir()
    out.chmod(0o500)


def skip_with_cuda(d: Path, out: Path, mp: pytest.MonkeyPatch) -> None:
    if torch.cuda.is_available():
        pytest.skip("a CUDA device is present")


def fill_out_folder(d: Path, out: Path, mp: pytest.MonkeyPatch) -> None:
    out.mkdir()
    (out / "notes.txt").write_text("not a run")


def corrupt_manifest(d: Path, out: Path, mp: pytest.MonkeyPatch) -> None:
    out.mkdir()
    (out / "manifest.json").write_text('{"config": ')


def finished_run_unchanged(d: Path, out: Path, mp: pytest.MonkeyPatch) -> None:
    finished = d / "finished"
    manifest = json.loads((finished / "manifest.json").read_text())
    assert manifest["status"] == "complete" and manifest["config"]["seed"] == 0
    assert (finished / "stats" / "decomposition.safetensors").exists()
    assert "capture" in json.loads((finished / "metrics.json").read_text())


def disk_full_at_second_checkpoint(d: Path, out: Path, mp: pytest.MonkeyPatch) -> None:
    """safetensors reports a full disk as its own error, as it does on a real full disk."""
    real = geomlens.capturing.store.save_file
    calls = {"n": 0}

    def save_file(tensors, filename, *args, **kwargs):  # type: ignore[no-untyped-def]
        calls["n"] += 1
        if calls["n"] == 2:
            raise SafetensorError(
                "Error while serializing: I/O error: No space left on device (os error 28)"
            )
        return real(tensors, filename, *args, **kwargs)

    mp.setattr(geomlens.capturing.store, "save_file", save_file)


def first_checkpoint_kept_then_resumes(d: Path, out: Path, mp: pytest.MonkeyPatch) -> None:
    progress = json.loads((out / "checkpoint" / "progress.json").read_text())
    assert progress == {"batches_done": 1}
    assert (out / "checkpoint" / "state_00001.safetensors").exists()
    assert not list(out.rglob("*.tmp"))
    mp.undo()  # space freed: the same command resumes and finishes
    argv = shlex.split(CAPTURE6.format(d=d))
    assert main([*argv, "--checkpoint-every", "0", "--out", str(out)]) == 0
    assert json.loads((out / "manifest.json").read_text())["status"] == "complete"
    assert not (out / "checkpoint").exists()


def disk_full_at_metrics(d: Path, out: Path, mp: pytest.MonkeyPatch) -> None:
    """Writing metrics.json fails the way Path.write_text does: ENOSPC, no file name."""
    real = Path.write_text

    def write_text(self: Path, *args, **kwargs):  # type: ignore[no-untyped-def]
        if self.name.startswith("metrics.json.tmp"):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(self, *args, **kwargs)

    mp.setattr(Path, "write_text", write_text)


def statistics_kept_then_finishes(d: Path, out: Path, mp: pytest.MonkeyPatch) -> None:
    stats = out / "stats" / "decomposition.safetensors"
    assert stats.exists() and not list(out.glob("metrics.json.tmp*"))
    before = stats.read_bytes()
    mp.undo()
    assert main([*shlex.split(CAPTURE6.format(d=d)), "--out", str(out)]) == 0
    assert stats.read_bytes() == before  # reused, not recomputed
    assert "capture" in json.loads((out / "metrics.json").read_text())
    assert not (out / "checkpoint").exists()


def nan_in_second_batch(d: Path, out: Path, mp: pytest.MonkeyPatch) -> None:
    real = geomlens.capturing.capture.batch_hidden_states
    calls = {"n": 0}

    def hidden_states(*args, **kwargs):  # type: ignore[no-untyped-def]
        hidden = real(*args, **kwargs)
        calls["n"] += 1
        if calls["n"] == 2:
            hidden[3] = torch.full_like(hidden[3], float("nan"))
        return hidden

    mp.setattr(geomlens.capturing.capture, "batch_hidden_states", hidden_states)


def batches_before_nan_kept(d: Path, out: Path, mp: pytest.MonkeyPatch) -> None:
    progress = json.loads((out / "checkpoint" / "progress.json").read_text())
    assert progress == {"batches_done": 1}
    assert (out / "checkpoint" / "state_00001.safetensors").exists()


def skip_with_s3fs(d: Path, out: Path, mp: pytest.MonkeyPatch) -> None:
    import importlib.util

    if importlib.util.find_spec("s3fs") is not None:
        pytest.skip("s3fs is installed")


def store_of_another_run(d: Path, out: Path, mp: pytest.MonkeyPatch) -> None:
    store = out.parent / "store"
    store.mkdir()
    record = {"format": 1, "run": "0" * 32, "run_folder": "/elsewhere/run", "status": "complete"}
    (store / "store.json").write_text(json.dumps(record))


def store_untouched(d: Path, out: Path, mp: pytest.MonkeyPatch) -> None:
    store = out.parent / "store"
    assert sorted(p.name for p in store.iterdir()) == ["store.json"]
    assert not (out / "manifest.json").exists()


def decomposition_rows(*rows: dict) -> Hook:
    """A copy of the finished run (at ``out``) whose metrics hold these decomposition rows."""

    def hook(d: Path, out: Path, mp: pytest.MonkeyPatch) -> None:
        shutil.copytree(d / "finished", out)
        metrics = json.loads((out / "metrics.json").read_text())
        metrics["decomposition"] = {"skip_first": True, "layers": list(rows)}
        (out / "metrics.json").write_text(json.dumps(metrics))

    return hook


def negative_sum_of_squares(d: Path, out: Path, mp: pytest.MonkeyPatch) -> None:
    """The finished run, unfinished again, with its statistics edited to a negative sumsq."""
    from safetensors.torch import load_file, save_file

    shutil.copytree(d / "finished", out)
    manifest = json.loads((out / "manifest.json").read_text())
    manifest["status"] = "running"
    (out / "manifest.json").write_text(json.dumps(manifest))
    stats = out / "stats" / "decomposition.safetensors"
    state = load_file(str(stats))
    state["sumsq"] = -state["sumsq"].abs() - 1.0
    save_file(state, str(stats))


def long_jsonl_line(d: Path, out: Path, mp: pytest.MonkeyPatch) -> None:
    import geomlens.corpus.sources

    mp.setattr(geomlens.corpus.sources, "MAX_JSONL_LINE", 4096)
    lines = [json.dumps({"text": "short words"}), json.dumps({"text": "x" * 20_000})]
    Path(f"{out}-long.jsonl").write_text("\n".join(lines) + "\n")


def latin1_text_with_bom(d: Path, out: Path, mp: pytest.MonkeyPatch) -> None:
    Path(f"{out}-bom.txt").write_bytes(b"\xef\xbb\xbfcaf\xe9 au lait")


# the table ------------------------------------------------------------------------------

CASES = [
    # the command line itself
    Case("unknown-command", "frobnicate", ("invalid choice: 'frobnicate'", "geomlens --help")),
    Case("contexts-not-a-number", "capture --contexts abc", ("--contexts", "'abc'"), True),
    Case("layers-not-a-list", "capture --layers x", ("--layers takes 'all'",)),
    Case("unknown-dtype", "capture --dtype float8", ("--dtype", "float8")),
    Case("text-and-text-file", "walk --text hi --text-file f.txt", ("not allowed with",)),
    # sizes
    Case("zero-contexts", "capture --contexts 0", ("--contexts must be at least 1",)),
    Case("negative-contexts", "capture --contexts -3", ("--contexts must be at least 1",)),
    Case("zero-length", "capture --length 0", ("--length must be at least 2",)),
    Case("negative-length", "capture --length -5", ("--length must be at least 2",)),
    Case("zero-batch-size", "capture --batch-size 0", ("--batch-size must be at least 1",)),
    Case("negative-batch-size", "decompose --batch-size -2", ("--batch-size must be at least 1",)),
    Case("negative-seed", "capture --seed -1", ("--seed must be 0 or more",)),
    Case("negative-offset", "sphere --offset -1", ("--offset must be 0 or more",)),
    Case("negative-generate", "walk --generate -1", ("--generate must be 0 or more",)),
    Case("unknown-device", "capture --device tpu", ("--device 'tpu'", "cpu, cuda")),
    Case(
        "cuda-without-cuda",
        "capture --device cuda",
        ("no CUDA device",),
        before=skip_with_cuda,
    ),
    Case("workers-without-ray", "capture --workers 2", ("need --engine ray",)),
    # models
    Case("unknown-model", "capture --model nosuch-model", ("unknown model 'nosuch-model'",)),
    Case("folder-without-model", "capture --model {d}/empty", ("holds no model",)),
    Case("corrupt-gguf", "capture --model {d}/junk.gguf", ("is not a GGUF file",)),
    Case(
        "corrupt-safetensors",
        f"capture {TINY} --model {{d}}/corrupt-minilm",
        ("model.safetensors is damaged: it is truncated", "copy or convert the model again"),
    ),
    Case("pickle-weights-only", "capture --model {d}/pickle-minilm", ("holds no .safetensors",)),
    Case("model-code-in-folder", "capture --model {d}/remote-code", ("--trust-remote-code",)),
    Case(
        "window-longer-than-positions",
        "capture --model minilm-l6 --length 600",
        ("--length 600", "512 positions"),
    ),
    Case("layers-out-of-range", f"capture {TINY} --layers 0,99", ("--layers [99] out of range",)),
    Case(
        "generate-on-an-encoder",
        "walk --model minilm-l6 --generate 3",
        ("--generate needs a decoder-only model",),
    ),
    # corpora
    Case("missing-corpus", "capture --corpus {d}/nope.jsonl", ("does not exist",)),
    Case("corpus-of-another-type", "capture --corpus {d}/table.csv", ("neither a folder",)),
    Case("empty-corpus-file", "capture --corpus {d}/empty.jsonl", ("has no lines",)),
    Case("empty-corpus-folder", "capture --corpus {d}/empty", ("has no .txt files",)),
    Case("binary-corpus-file", "capture --corpus {d}/binary", ("is not text",)),
    Case("binary-jsonl", "capture --corpus {d}/binary.jsonl", ("not valid UTF-8",)),
    Case("jsonl-not-utf8", "capture --corpus {d}/latin1.jsonl", ("not valid UTF-8 (byte 13)",)),
    Case(
        "malformed-jsonl-line", "capture --corpus {d}/broken.jsonl", ("line 2 of", "not valid JSON")
    ),
    Case("jsonl-without-text", "capture --corpus {d}/notext.jsonl", ("has no field 'text'",)),
    Case(
        "too-few-documents",
        f"capture {TINY} --corpus {{d}}/two-docs --contexts 5",
        ("only 2 documents", "lower --contexts or --length"),
    ),
    # other inputs of the analyses
    Case("missing-nouns-file", "sphere --nouns {d}/nope.txt", ("--nouns", "cannot read")),
    Case("nouns-not-utf8", "sphere --nouns {d}/latin1.txt", ("not UTF-8",)),
    Case("one-noun", "sphere --nouns {d}/one-noun.txt", ("at least 2 words",)),
    Case(
        "one-noun-twice",
        "sphere --nouns {d}/one-noun-twice.txt",
        ("one word only ('cat', 2 times)", "at least 2 different"),
    ),
    Case("missing-text-file", "walk --text-file {d}/nope.txt", ("cannot read --text-file",)),
    # concept-space tests
    Case("unknown-task", "concepts --task no_such_task", ("task 'no_such_task'",)),
    Case("malformed-task-file", "concepts --task {d}/broken-task.json", ("not valid JSON",)),
    Case("task-of-another-shape", "concepts --task {d}/odd-task.json", ("BIG-bench",)),
    Case(
        "unknown-scheme",
        "concepts --task {d}/task.json --scheme nosuch",
        ("unknown scheme 'nosuch'",),
    ),
    Case(
        "unknown-scheme-in-a-sweep",
        "concepts --task {d}/task.json --sweep {d}/odd-sweep.yaml",
        ("unknown scheme field 'nosuchkey'",),
    ),
    Case(
        "malformed-sweep",
        "concepts --task {d}/task.json --sweep {d}/broken-sweep.yaml",
        ("not valid YAML or JSON",),
    ),
    Case("limit-zero", "concepts --limit 0", ("--limit must be at least 1",)),
    # addition study
    Case("bad-digit-range", "arithmetic --train-digits x", ("--train-digits takes a range",)),
    Case("negative-width", "arithmetic --d-model -1", ("--d-model must be at least 1",)),
    # reports and comparisons
    Case("report-zero-contexts", "report --contexts 0", ("--contexts must be at least 1",)),
    Case(
        "compare-of-a-folder-that-is-not-a-run",
        "compare {d}/empty --out {out}",
        ("holds no geomlens run",),
    ),
    Case(
        "compare-of-a-capture-run",
        "compare {d}/finished --out {out}",
        ("holds no position/context decomposition",),
    ),
    # activation stores
    Case(
        "activations-dir-s3-without-s3fs",
        f"capture {TINY} --save-activations --activations-dir s3://bucket/acts",
        ("s3://bucket/acts needs a package that is not installed",),
        before=skip_with_s3fs,
    ),
    Case(
        "activations-dir-in-memory",
        f"capture {TINY} --save-activations --activations-dir memory://acts",
        ("memory:// location", "vanish when the process ends"),
    ),
    Case(
        "activations-dir-of-another-run",
        f"capture {TINY} --save-activations --activations-dir {{out}}/../store",
        ("belongs to another run", "/elsewhere/run", "its own --activations-dir"),
        before=store_of_another_run,
        after=store_untouched,
    ),
    # degenerate data and damaged numbers
    Case("one-context-capture", "capture --contexts 1", ("--contexts 1", "at least 2")),
    Case("cpu-device-index", "capture --device cpu:1", ("--device 'cpu:1' does not exist",)),
    Case(
        "negative-sum-of-squares",
        f"capture {TINY}",
        ("decomposition.safetensors is unreadable", "negative sum of squares"),
        before=negative_sum_of_squares,
    ),
    Case(
        "jsonl-line-too-long",
        f"capture {TINY} --corpus {{out}}-long.jsonl",
        ("line 2 of", "longer than 0 MiB"),
        before=long_jsonl_line,
    ),
    Case(
        "text-file-not-utf8-after-a-bom",
        "walk --model minilm-l6 --text-file {out}-bom.txt",
        ("not UTF-8 text (byte 6)",),
        before=latin1_text_with_bom,
    ),
    Case("whitespace-only-corpus", "capture --corpus {d}/blank-docs", ("only whitespace",)),
    Case("task-file-is-a-device", "concepts --task /dev/null", ("not a regular file",)),
    Case(
        "compare-the-same-run-twice",
        "compare {d}/finished {d}/finished --out {out}",
        ("is given twice",),
    ),
    Case(
        "compare-a-share-out-of-range",
        "compare {out} --out {out}-cmp",
        ("metrics.json is unreadable", "share_pos is 5.0, outside [0, 1]"),
        before=decomposition_rows({"layer": 1, "share_pos": 5.0}),
    ),
    Case(
        "compare-a-layer-the-model-lacks",
        "compare {out} --out {out}-cmp",
        ("lists layer 99", "layers are 0 to 6"),
        before=decomposition_rows({"layer": 99, "share_pos": 0.5}),
    ),
    Case(
        "compare-a-negative-layer",
        "compare {out} --out {out}-cmp",
        ("lists layer -5",),
        before=decomposition_rows({"layer": -5, "share_pos": 0.5}),
    ),
    Case(
        "compare-a-layer-twice",
        "compare {out} --out {out}-cmp",
        ("lists layer 2 twice",),
        before=decomposition_rows({"layer": 2, "share_pos": 0.5}, {"layer": 2, "share_pos": 0.4}),
    ),
    # run folders and the disk
    Case("out-is-a-file", "capture --out {d}/table.csv", ("is a file; give a folder",)),
    Case(
        "out-under-a-file",
        "capture --out {d}/table.csv/run",
        ("cannot write the run folder", "Not a directory"),
        True,
    ),
    Case(
        "unwritable-out",
        "capture --out {out}",
        ("cannot write the run folder", "Permission denied"),
        before=skip_as_root,
    ),
    Case(
        "out-holds-other-files",
        "capture --out {out}",
        ("not empty and holds no geomlens run",),
        before=fill_out_folder,
    ),
    Case("unreadable-manifest", "capture --out {out}", ("is unreadable",), before=corrupt_manifest),
    Case(
        "out-of-another-config",
        f"capture {TINY} --seed 7 --out {{d}}/finished",
        ("different config", "differs in: seed"),
        after=finished_run_unchanged,
    ),
    Case(
        "disk-full-at-a-checkpoint",
        f"{CAPTURE6} --checkpoint-every 0",
        ("cannot write", "state_00002.safetensors", "No space left on device", "rerun"),
        before=disk_full_at_second_checkpoint,
        after=first_checkpoint_kept_then_resumes,
    ),
    Case(
        "disk-full-at-metrics",
        CAPTURE6,
        ("cannot write", "metrics.json", "No space left on device"),
        before=disk_full_at_metrics,
        after=statistics_kept_then_finishes,
    ),
    Case(
        "nan-in-activations",
        f"{CAPTURE6} --layers 0-4",
        ("layer 3 holds NaN", "batch 2 of 3", "batches 1-1 before it are saved"),
        before=nan_in_second_batch,
        after=batches_before_nan_kept,
    ),
]


def minilm_folder() -> Path:
    paths = BUNDLED["minilm-l6"].part_paths()
    assert paths is not None, BUNDLED["minilm-l6"].install
    return paths[0]


def copy_minilm_without_weights(target: Path) -> None:
    target.mkdir()
    for path in minilm_folder().iterdir():
        if path.is_file() and path.suffix != ".safetensors":
            shutil.copy(path, target / path.name)


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder of bad inputs, and one finished tiny run (``finished``)."""
    d = tmp_path_factory.mktemp("bad")
    (d / "empty").mkdir()
    (d / "junk.gguf").write_bytes(b"\x00\x01junk" * 100)
    copy_minilm_without_weights(d / "corrupt-minilm")
    with open(minilm_folder() / "model.safetensors", "rb") as f:
        (d / "corrupt-minilm" / "model.safetensors").write_bytes(f.read(200_000))
    copy_minilm_without_weights(d / "pickle-minilm")
    (d / "pickle-minilm" / "pytorch_model.bin").write_bytes(b"not even a pickle")
    (d / "remote-code").mkdir()
    (d / "remote-code" / "config.json").write_text(
        json.dumps({"model_type": "bert", "auto_map": {"AutoModel": "modeling.Model"}})
    )
    (d / "table.csv").write_text("a,b\n1,2\n")
    (d / "empty.jsonl").write_bytes(b"")
    (d / "binary").mkdir()
    (d / "binary" / "image.txt").write_bytes(bytes(range(256)) * 20)
    (d / "binary.jsonl").write_bytes(bytes(range(255, -1, -1)) * 20)
    (d / "latin1.jsonl").write_bytes('{"text": "caf\u00e9"}\n'.encode("latin-1"))
    (d / "broken.jsonl").write_text('{"text": "one"}\n{"text": \n')
    (d / "notext.jsonl").write_text('{"body": "one"}\n')
    (d / "docs").mkdir()
    for k in range(8):
        (d / "docs" / f"{k}.txt").write_text(f"document {k} on the geometry of language " * 8)
    (d / "two-docs").mkdir()
    for k in range(2):
        (d / "two-docs" / f"{k}.txt").write_text("the geometry of language models " * 20)
    (d / "blank-docs").mkdir()
    for k in range(3):
        (d / "blank-docs" / f"{k}.txt").write_text(" \n\t " * k)
    (d / "latin1.txt").write_bytes("caf\u00e9\nna\u00efve\n".encode("latin-1"))
    (d / "one-noun.txt").write_text("cat\n")
    (d / "one-noun-twice.txt").write_text("cat\ncat\n")
    (d / "broken-task.json").write_text('{"examples": [')
    (d / "odd-task.json").write_text(json.dumps({"examples": [{"input": "x"}]}))
    (d / "task.json").write_text(
        json.dumps(
            {
                "examples": [
                    {"input": "The sky is", "target_scores": {"blue": 1, "green": 0}},
                    {"input": "Grass is", "target_scores": {"green": 1, "blue": 0}},
                ]
            }
        )
    )
    (d / "odd-sweep.yaml").write_text("nosuchkey: [1, 2]\n")
    (d / "broken-sweep.yaml").write_text("test: [pyramidal,\n")
    assert main(["capture", *shlex.split(TINY.format(d=d)), "--out", str(d / "finished")]) == 0
    return d


def run_case(case: Case, d: Path, out: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    argv = shlex.split(case.argv.format(d=d, out=out))
    if argv[0] in RUNS_WITH_OUT and "--out" not in argv:
        argv += ["--out", str(out)]
    if argv[0] in RUNS_WITH_OUT and "--quiet" not in argv:
        argv.append("--quiet")
    if case.subprocess:
        done = subprocess.run(
            [sys.executable, "-m", "geomlens.cli", *argv],
            capture_output=True,
            text=True,
            timeout=300,
        )
        return done.returncode, done.stderr
    capsys.readouterr()
    code = main(argv)
    return code, capsys.readouterr().err


def test_the_table_has_at_least_twenty_distinct_inputs():
    assert len({c.id for c in CASES}) == len(CASES) >= 20
    assert len({(c.argv, c.before) for c in CASES}) == len(CASES)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_input_gives_one_sentence_and_exit_code_2(
    case: Case,
    inputs: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
):
    out = tmp_path / "run"
    if case.before is not None:
        case.before(inputs, out, monkeypatch)
    code, err = run_case(case, inputs, out, capsys)
    lines = err.splitlines()
    assert code == 2, err
    assert "Traceback" not in err, err
    assert len(lines) == 1, err
    sentence = lines[0]
    assert sentence.startswith("geomlens: error: ") and sentence.endswith("."), sentence
    for phrase in case.phrases:
        assert phrase in sentence, (phrase, sentence)
    if case.after is not None:
        case.after(inputs, out, monkeypatch)


@pytest.mark.parametrize(
    ("code", "phrases"),
    [
        (errno.ENOSPC, ("cannot write /x/y", "No space left on device", "free some space")),
        (errno.EACCES, ("cannot access /x/y", "Permission denied", "permissions")),
        (errno.EROFS, ("cannot write /x/y", "Read-only file system", "writable file system")),
    ],
)
def test_os_errors_read_as_one_sentence(code: int, phrases: tuple[str, ...]):
    sentence = os_error_sentence(OSError(code, os.strerror(code), "/x/y"))
    assert "\n" not in sentence and sentence.endswith(".")
    for phrase in phrases:
        assert phrase in sentence, (phrase, sentence)
