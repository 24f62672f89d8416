"""Hostile inputs that once gave a wrong number, an internal error or no end: each is now
one sentence (exit code 2, one line on stderr, no traceback) or the API's GeomlensError,
and nothing that looks finished is left behind.

The models are tiny llamas built from a config and saved with a character tokenizer; the
runs use 8 windows of 16 tokens and draw no figures. docs/errors.md ("Results checked,
identity whole, lists bounded") lists the same cases.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
import transformers
from safetensors.torch import load_file, save_file
from tiny_models import char_tokenizer

import geomlens.engines.ray as ray_engine
from geomlens.cli import main
from geomlens.engines import EngineConfig
from geomlens.errors import (
    FILE_LIMITS,
    GeomlensError,
    IdentityError,
    LimitError,
    NonFiniteResult,
)
from geomlens.io.files import content_hash, inside, safetensors_header_problem
from geomlens.io.jsontext import JSONTextError, loads
from geomlens.runs.runfolder import FINGERPRINT_VERSION, model_fingerprint
from geomlens.stats.decomposition import DecompositionAccumulator, clamped_at_zero
from geomlens.stats.eigen import top_eigenvalue
from geomlens.stats.finite import require_finite

VOCAB = 64
LLAMA: dict[str, Any] = dict(
    vocab_size=VOCAB,
    hidden_size=32,
    intermediate_size=48,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=64,
    tie_word_embeddings=False,
)
SMALL = "--contexts 8 --length 16 --batch-size 4 --figures none --quiet"


def save_llama(folder: Path, seed: int = 0, edit: Any = None) -> Path:
    """A random tiny llama (``edit(model)`` may change its weights) with a covering
    character tokenizer."""
    torch.manual_seed(seed)
    model = transformers.LlamaForCausalLM(transformers.LlamaConfig(**LLAMA))
    if edit is not None:
        with torch.no_grad():
            edit(model)
    model.save_pretrained(folder)
    char_tokenizer(VOCAB).save_pretrained(folder)
    return folder


def make_corpus(folder: Path) -> Path:
    folder.mkdir()
    for k in range(10):
        (folder / f"{k}.txt").write_text(f"text {k} about cats and the sea and rain. " * 6)
    return folder


@pytest.fixture(scope="module")
def d(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Prepared inputs: a sound model, a second one, a corpus."""
    root = tmp_path_factory.mktemp("hostile")
    save_llama(root / "ok")
    save_llama(root / "other", seed=1)
    make_corpus(root / "docs")
    return root


def refused(
    capsys: pytest.CaptureFixture[str], argv: str, *phrases: str, out: Path | None = None
) -> str:
    """Run ``argv``: exit 2, one line, no traceback, every phrase; returns the line."""
    capsys.readouterr()
    args = shlex.split(argv) + (["--out", str(out)] if out is not None else [])
    code = main(args)
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert code == 2, err
    assert len(lines) == 1, err
    assert "Traceback" not in err
    for phrase in phrases:
        assert phrase in lines[0], (phrase, lines[0])
    return lines[0]


def not_finished(out: Path) -> None:
    """Nothing that looks like a finished run: no complete manifest, no finished
    statistics, no temporary files."""
    manifest = out / "manifest.json"
    if manifest.exists():
        assert json.loads(manifest.read_text())["status"] != "complete"
    assert not (out / "stats" / "decomposition.safetensors").exists()
    assert not [p for p in out.rglob("*") if ".tmp" in p.name]


def capture(d: Path, model: Path, out: Path, extra: str = "") -> str:
    return f"capture --model {model} --corpus {d / 'docs'} {SMALL} {extra} --out {out}"


# every result checked before it is saved or printed ---------------------------------------


def nan_head(model: Any) -> None:
    model.lm_head.weight.fill_(float("nan"))


def nan_final_norm(model: Any) -> None:
    model.model.norm.weight.fill_(float("nan"))


@pytest.mark.parametrize(
    ("edit", "tensor"), [(nan_head, "lm_head.weight"), (nan_final_norm, "model.norm.weight")]
)
def test_a_model_with_nan_weights_is_refused_before_any_number(edit, tensor, d, tmp_path, capsys):
    model = save_llama(tmp_path / "nan", edit=edit)
    for command in ("capture", "sphere"):
        out = tmp_path / command
        argv = capture(d, model, out).replace("capture", command, 1)
        refused(capsys, argv, "NaN or infinite", tensor, "use intact weights")
        not_finished(out)
    task = tmp_path / "task.jsonl"
    endings = ["the sea", "a cat", "the rain", "a dog"]
    record = {"ctx_a": "we saw", "ctx_b": "", "endings": endings, "label": 0}
    task.write_text(json.dumps(record) + "\n" + json.dumps({**record, "label": 1}) + "\n")
    out = tmp_path / "concepts"
    argv = f"concepts --model {model} --task {task} --scheme sanity --quiet --out {out}"
    refused(capsys, argv, "NaN or infinite", tensor)
    assert not (out / "predictions.jsonl").exists()
    assert (
        "concepts" not in json.loads((out / "metrics.json").read_text() or "{}")
        if (out / "metrics.json").exists()
        else True
    )


def test_nan_scores_are_never_an_accuracy():
    """An argmax over NaN falls on choice 0: the scores are refused instead."""
    with pytest.raises(NonFiniteResult, match="the scores of item 0 hold 4 NaN"):
        require_finite(torch.full((4,), float("nan")), "the scores of item 0")
    with pytest.raises(NonFiniteResult, match=r"hold 1 NaN or infinite value \(of 3\)"):
        require_finite([0.5, float("inf"), -1.0], "the log-probabilities")
    require_finite(np.array([-3.0, -1e30]), "finite scores pass")


def test_non_finite_statistics_are_never_saved_as_finished(d, tmp_path, capsys, monkeypatch):
    """Sums past the float64 range (second moments of an embedding scaled by 1e21 once
    overflowed) stop the run before ``stats/decomposition.safetensors`` is written; a rerun
    says the same. The overflow is planted in the finished sums."""
    model = d / "ok"
    out = tmp_path / "run"
    real = DecompositionAccumulator.state_dict

    def overflowing(self):  # type: ignore[no-untyped-def]
        state = real(self)
        state["sumsq"] = state["sumsq"] * float("inf")
        return state

    monkeypatch.setattr(DecompositionAccumulator, "state_dict", overflowing)
    argv = capture(d, model, out, "--layers 0")
    refused(capsys, argv, "decomposition statistics' sumsq hold NaN or infinite values")
    not_finished(out)
    refused(capsys, argv, "NaN or infinite")
    not_finished(out)


def test_metrics_with_a_non_finite_number_are_not_written(tmp_path):
    from geomlens.runs.runfolder import write_json

    with pytest.raises(NonFiniteResult, match=r"capture.layers\[1\].rms_norm of metrics.json"):
        write_json(
            tmp_path / "metrics.json",
            {"capture": {"layers": [{"rms_norm": 1.0}, {"rms_norm": float("nan")}]}},
        )
    assert not list(tmp_path.iterdir())


def test_a_variance_below_zero_by_rounding_is_clamped_and_counted():
    """Identical windows: sum x^2 - n mean^2 cancels and can come out negative."""
    assert clamped_at_zero(-1e-9) == (0.0, True)
    assert clamped_at_zero(2.5) == (2.5, False)
    acc = DecompositionAccumulator([0], n_contexts=2, length=3, d_model=2, second_moment=False)
    state = acc.state_dict()
    # every state is (1e8, 1e8): the variance is 0, but the sum of squares is rounded low
    state["pos_sum"][0] = 2e8  # per position: 2 contexts
    state["ctx_sum"][0] = 3e8  # per context: 3 positions
    state["first"][0] = 1e8
    state["sumsq"][0] = 6 * 2 * 1e16 - 1024.0
    state["seen"][:] = 1
    acc.load_state_dict(state)
    stats = acc.finalize(0)
    assert stats.total_ss == 0.0 and stats.clamped and acc.variances_clamped == 1


def test_the_top_eigenvalue_falls_back_to_the_dense_solver(monkeypatch):
    import scipy.sparse.linalg

    rng = np.random.default_rng(0)
    a = rng.standard_normal((40, 40))
    m = a @ a.T
    exact = float(np.linalg.eigvalsh(m)[-1])
    assert top_eigenvalue(m) == pytest.approx(exact, rel=1e-9)

    def failing(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise scipy.sparse.linalg.ArpackError(-9999)

    monkeypatch.setattr(scipy.sparse.linalg, "eigsh", failing)
    assert top_eigenvalue(m) == pytest.approx(exact, rel=1e-12)
    m[3, 4] = float("nan")
    with pytest.raises(NonFiniteResult, match="the matrix holds NaN"):
        top_eigenvalue(m)


def test_decompose_norms_on_huge_states_survive_an_arpack_failure(monkeypatch):
    """The relative norms use the solver with the dense fallback: hidden states scaled by
    1e21 give the norms of the matrices themselves even when ARPACK fails."""
    import scipy.sparse.linalg

    from geomlens.analyses.decomposition.compute import relative_norms
    from geomlens.stats.decomposition import DecompositionStats

    rng = np.random.default_rng(1)
    c, t, dim = 6, 5, 24
    h = rng.standard_normal((c, t, dim)) * 1e21 + rng.standard_normal(dim) * 3e21
    flat = h.reshape(-1, dim)
    mean = flat.mean(0)
    stats = DecompositionStats(
        layer=0, mean=mean, pos=h.mean(0) - mean, ctx=h.mean(1) - mean,
        total_ss=float(((flat - mean) ** 2).sum()), second_moment=flat.T @ flat,
        n_contexts=c, positions=np.arange(t), skip_first=False,
    )  # fmt: skip
    broadcast = np.linalg.norm(np.tile(stats.pos, (c, 1)), 2)
    expected = (broadcast / np.linalg.norm(flat, 2), broadcast / np.linalg.norm(flat - mean, 2))

    def failing(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise scipy.sparse.linalg.ArpackError(-9999)

    assert relative_norms(stats) == pytest.approx(expected, rel=1e-9)
    monkeypatch.setattr(scipy.sparse.linalg, "eigsh", failing)
    assert relative_norms(stats) == pytest.approx(expected, rel=1e-9)


# identity that covers everything a number depends on ------------------------------------


@pytest.fixture
def finished(d: Path, tmp_path: Path) -> tuple[Path, Path]:
    """A copy of the sound model, and a finished capture run of it."""
    model = tmp_path / "model"
    shutil.copytree(d / "ok", model)
    out = tmp_path / "run"
    assert main(shlex.split(capture(d, model, out))) == 0
    return model, out


def flip_middle_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x40
    path.write_bytes(bytes(data))


def test_a_weight_changed_in_the_middle_of_its_file_is_a_changed_model(
    finished, d, tmp_path, capsys
):
    model, out = finished
    metrics = (out / "metrics.json").read_bytes()
    flip_middle_byte(model / "model.safetensors")  # same size, the header intact
    line = refused(capsys, capture(d, model, out), "its model changed since it finished")
    assert "start afresh" in line
    assert (out / "metrics.json").read_bytes() == metrics


def test_a_replaced_tokenizer_is_a_changed_model(finished, d, capsys):
    model, out = finished
    tokenizer = json.loads((model / "tokenizer.json").read_text())
    vocab = tokenizer["model"]["vocab"]
    first, second = list(vocab)[10:12]
    vocab[first], vocab[second] = vocab[second], vocab[first]  # two tokens swap ids
    (model / "tokenizer.json").write_text(json.dumps(tokenizer))
    refused(capsys, capture(d, model, out), "its model", "changed since it finished")


def test_content_hashes_are_whole_and_cached(tmp_path, monkeypatch):
    monkeypatch.setenv("GEOMLENS_CACHE", str(tmp_path / "cache"))
    path = tmp_path / "w.bin"
    path.write_bytes(bytes(3 << 20))
    first = content_hash(path)
    assert len(list((tmp_path / "cache" / "hashes").iterdir())) == 1
    assert content_hash(path) == first  # from the cache
    flip_middle_byte(path)  # the same size, another content (and change time)
    assert content_hash(path) != first
    assert content_hash(path, cache=False) == content_hash(path)
    assert model_fingerprint(tmp_path).startswith(FINGERPRINT_VERSION)


def test_a_given_view_must_be_the_named_model(d, tmp_path):
    import geomlens

    view = geomlens.load_model(str(d / "other"))
    common = dict(corpus=str(d / "docs"), contexts=8, length=16, progress=False, figures="none")
    with pytest.raises(IdentityError, match="loaded from .*other, not from"):
        geomlens.capture(model=str(d / "ok"), view=view, out=tmp_path / "a", **common)
    assert not (tmp_path / "a" / "manifest.json").exists()
    with pytest.raises(IdentityError, match="is float32, but the run asks for dtype bfloat16"):
        geomlens.capture(
            model=str(d / "other"), view=view, dtype="bfloat16", out=tmp_path / "b", **common
        )


def relabel(path: Path, tensor: str, dtype: str) -> None:
    """Rewrite the safetensors header of ``path``: ``tensor`` is said to be ``dtype``."""
    data = path.read_bytes()
    n = int.from_bytes(data[:8], "little")
    header = json.loads(data[8 : 8 + n])
    header[tensor]["dtype"] = dtype
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (n - len(text))
    assert len(text) == n
    path.write_bytes(data[:8] + text + data[8 + n :])


def test_a_weight_labelled_as_an_integer_type_is_refused(d, tmp_path, capsys):
    model = tmp_path / "i32"
    shutil.copytree(d / "ok", model)
    weights = model / "model.safetensors"
    relabel(weights, "model.layers.0.mlp.up_proj.weight", "I32")
    assert "stored as I32, an integer type" in str(safetensors_header_problem(weights))
    out = tmp_path / "run"
    refused(capsys, capture(d, model, out), "is damaged", "up_proj.weight is stored as I32")
    not_finished(out)
    relabel(weights, "model.layers.0.mlp.up_proj.weight", "F16")  # half the bytes it has
    assert "does not fit its" in str(safetensors_header_problem(weights))


# limits on what a user supplies; repeated JSON keys ---------------------------------------


def hellaswag(path: Path, endings: list[str], label: int = 0, extra: str = "") -> Path:
    record = json.dumps({"ctx_a": "we saw", "ctx_b": "", "endings": endings, "label": label})
    path.write_text(record[:-1] + extra + "}\n")
    return path


@pytest.mark.parametrize(
    ("endings", "extra", "phrases"),
    [
        ([f"end {i}" for i in range(101)], "", ("has 101 choices, more than the 100",)),
        (["the sea"] * 4, "", ("the same choice twice (choices 0 and 1: 'the sea')",)),
        (["a", "b"], ', "label": 1', ("the key 'label' appears twice",)),
    ],
    ids=["too-many-choices", "identical-endings", "repeated-gold-label"],
)
def test_task_items_are_bounded_and_unambiguous(endings, extra, phrases, d, tmp_path, capsys):
    task = hellaswag(tmp_path / "task.jsonl", endings, extra=extra)
    out = tmp_path / "run"
    refused(capsys, f"concepts --model {d / 'ok'} --task {task} --quiet", *phrases, out=out)
    assert not (out / "predictions.jsonl").exists()


def test_a_nouns_file_past_the_limit_is_refused(d, tmp_path, capsys):
    nouns = tmp_path / "nouns.txt"
    nouns.write_text("\n".join(f"noun{i}" for i in range(10_001)))
    out = tmp_path / "run"
    argv = capture(d, d / "ok", out, f"--nouns {nouns}").replace("capture", "sphere", 1)
    refused(capsys, argv, "has 10,001 nouns, more than the 10,000 geomlens takes")


@pytest.mark.parametrize("value", ["nan", "-1", "abc"])
def test_checkpoint_every_takes_seconds(value, tmp_path, capsys):
    out = tmp_path / "run"
    refused(
        capsys,
        f"capture --checkpoint-every {value}",
        f"--checkpoint-every: takes a number of seconds, 0 or more (got '{value}')",
        out=out,
    )
    assert not out.exists()


def test_repeated_keys_are_refused_but_task_metadata_may_repeat():
    with pytest.raises(JSONTextError, match="'label' appears twice"):
        loads('{"label": 0, "endings": ["a", "b"], "label": 1}')
    with pytest.raises(JSONTextError, match="'x' appears twice"):
        loads('{"examples": [{"x": 1, "x": 2}]}')
    # BIG-bench's own timedial task.json repeats a metadata key geomlens does not read
    assert loads('{"keywords": [], "examples": [], "keywords": ["a"]}')["keywords"] == ["a"]
    with pytest.raises(LimitError):
        from geomlens.errors import within_limit

        within_limit("a sweep", "scheme combinations", 100_001, "use fewer")


@pytest.mark.parametrize("where", ["file", "label folder"])
def test_a_corpus_name_that_is_not_utf8_is_one_sentence(where, d, tmp_path, capsys):
    corpus = tmp_path / "corpus"
    folder = os.fsencode(corpus) + (b"/lab\xff" if where == "label folder" else b"")
    os.makedirs(folder, exist_ok=True)
    for k in range(10):
        name = folder + (b"/doc\xff%d.txt" if where == "file" else b"/doc%d.txt") % k
        with open(name, "w") as f:
            f.write("text about cats and the sea and rain. " * 6)
    out = tmp_path / "run"
    argv = f"capture --model {d / 'ok'} --corpus {corpus} {SMALL}"
    refused(capsys, argv, "has a name that is not UTF-8 text", "\\udcff", out=out)
    not_finished(out)


# one boundary for every entry point -----------------------------------------------------


def write_metrics(run: Path, text: str) -> None:
    (run / "metrics.json").write_text(text)


@pytest.mark.parametrize(
    ("text", "phrase"),
    [
        ('{"decomposition": {"layers": [{"layer": 0, "share_pos": NaN}]}}', "NaN"),
        ('{"decomposition": {"layers": [{"layer": 0, "share_pos": Infinity}]}}', "Infinity"),
        ('{"decomposition": {"layers": [{"layer": 0, "share_pos": "0.3"}]}}', "share_pos"),
        ('{"decomposition": {"layers": [{"layer": 0, "share_pos": {"a": 1}}]}}', "share_pos"),
        ('{"decomposition": {"layers": [7]}}', "layers[0]"),
        ('{"decomposition": {"layers": []}, "claims": {"a": 1}}', "claims"),
        ('{"decomposition": {"layers": []}, "claims": [3]}', "claims[0]"),
    ],
    ids=["nan", "infinity", "string", "object", "row-not-object", "claims-object", "claim"],
)
def test_compare_validates_the_metrics_it_reads(text, phrase, finished, tmp_path, capsys):
    _, run = finished
    write_metrics(run, text)
    line = refused(capsys, f"compare {run} --out {tmp_path / 'cmp'}", "metrics.json", phrase)
    assert "unreadable" in line
    assert not (tmp_path / "cmp" / "compare.html").exists()


def test_a_tasks_value_outside_out_is_refused(tmp_path, capsys):
    out = tmp_path / "data"
    refused(
        capsys,
        f"data bigbench --tasks ../../evil --out {out} --archive {tmp_path / 'none.tar.gz'}",
        "lies outside",
    )
    assert not (tmp_path / "evil").exists()
    assert inside(tmp_path, "a/b/task.json", "x") == tmp_path.resolve() / "a/b/task.json"
    with pytest.raises(GeomlensError, match="lies outside"):
        inside(tmp_path, "/etc/task.json", "member /etc/task.json")


def test_ray_connection_noise_stays_off_the_one_line(monkeypatch, capfd):
    """Ray's C++ core writes its retries to file descriptor 2 before Python sees the
    error: they go aside, and the error is one sentence."""

    class FakeRay:
        @staticmethod
        def is_initialized() -> bool:
            return False

        @staticmethod
        def init(**kwargs: Any) -> None:
            os.write(2, b"[W rpc_client.h:153] Failed to connect to GCS\n" * 20)
            raise ConnectionError("Could not find any running Ray instance")

    monkeypatch.setattr(ray_engine, "require_ray", lambda: FakeRay)
    engine = EngineConfig(name="ray", ray_address="10.0.0.1:1")
    joining = pytest.raises(GeomlensError, match="could not join the Ray cluster at 10.0.0.1:1")
    with joining, ray_engine.connected(engine):
        pass
    assert "rpc_client" not in capfd.readouterr().err


TERMINATED = textwrap.dedent(
    """
    import os, signal, sys
    from pathlib import Path
    from geomlens.io.files import replacing
    target = Path(sys.argv[1])
    with replacing(target) as tmp:
        tmp.write_text("half")
        os.kill(os.getpid(), getattr(signal, sys.argv[2]))
        tmp.write_text("never")
    """
)


def default_signal_actions() -> None:
    """In the child: SIGTERM and SIGHUP end the process (the test runner may ignore them)."""
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)


@pytest.mark.parametrize("name", ["SIGTERM", "SIGHUP"])
def test_a_temporary_file_is_removed_when_a_signal_ends_the_process(name, tmp_path):
    target = tmp_path / "report.html"
    target.write_text("before")
    done = subprocess.run(
        [sys.executable, "-c", TERMINATED, str(target), name],
        capture_output=True,
        timeout=60,
        preexec_fn=default_signal_actions,  # under nohup SIGHUP is ignored, and stays so
    )
    assert done.returncode == -getattr(signal, name)  # still ended by the signal
    assert [p.name for p in tmp_path.iterdir()] == ["report.html"]
    assert target.read_text() == "before"


SAVING_TERMINATED = textwrap.dedent(
    """
    import os, signal, sys
    from pathlib import Path
    import torch
    import geomlens.capturing.store as store
    def save_file(tensors, filename, metadata=None):
        Path(filename).write_bytes(b"half")
        os.kill(os.getpid(), signal.SIGTERM)
    store.save_file = save_file
    store.save_atomic({"x": torch.zeros(2)}, Path(sys.argv[1]))
    """
)


def test_a_statistics_file_being_saved_is_removed_on_sigterm(tmp_path):
    target = tmp_path / "state_00001.safetensors"
    done = subprocess.run(
        [sys.executable, "-c", SAVING_TERMINATED, str(target)], capture_output=True, timeout=120
    )
    assert done.returncode == -signal.SIGTERM, done.stderr
    assert list(tmp_path.iterdir()) == []


def test_the_api_raises_geomlens_errors_only(d, tmp_path, monkeypatch):
    import errno

    import geomlens
    import geomlens.commands.capture
    from geomlens.errors import InternalError

    def failing(error: BaseException) -> Any:
        def run(*args: Any, **kwargs: Any) -> Any:
            raise error

        return run

    common = dict(model=str(d / "ok"), corpus=str(d / "docs"), out=tmp_path / "r")
    monkeypatch.setattr(geomlens.commands.capture, "run", failing(ZeroDivisionError("x")))
    with pytest.raises(InternalError, match=r"capture\(\) failed inside geomlens") as err:
        geomlens.capture(**common)
    assert isinstance(err.value.__cause__, ZeroDivisionError)
    full = OSError(errno.ENOSPC, "No space left on device", str(tmp_path / "r" / "m.json"))
    monkeypatch.setattr(geomlens.commands.capture, "run", failing(full))
    with pytest.raises(GeomlensError, match="cannot write .*m.json: No space left on device"):
        geomlens.capture(**common)
    monkeypatch.setattr(geomlens.commands.capture, "run", failing(KeyboardInterrupt()))
    with pytest.raises(KeyboardInterrupt):
        geomlens.capture(**common)
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "manifest.json").write_text('{"config": {}, "config": {"a": 1}}')
    with pytest.raises(GeomlensError, match="appears twice"):
        geomlens.open_run(bad)


def test_saved_weights_round_trip_through_the_header_check(d):
    """The check passes every file the tiny models and their copies are saved as."""
    path = d / "ok" / "model.safetensors"
    assert safetensors_header_problem(path) is None
    assert set(load_file(str(path))) >= {"lm_head.weight"}
    save_file({"x": torch.zeros(2)}, str(d / "extra.safetensors"))
    assert safetensors_header_problem(d / "extra.safetensors") is None


@pytest.mark.parametrize(
    ("option", "phrase"),
    [({"device": "tpu"}, "device 'tpu' is not available here; use one of: cpu"),
     ({"attention": "evil"}, "attention 'evil' is not an attention implementation; use one of")],
)  # fmt: skip
def test_load_model_names_a_bad_device_or_attention(option, phrase, d):
    import geomlens

    with pytest.raises(GeomlensError, match=phrase) as err:
        geomlens.load_model(str(d / "ok"), **option)
    assert "\n" not in str(err.value) and "weights" not in str(err.value)


@pytest.mark.parametrize("value", [float("nan"), -1.0])
def test_the_api_refuses_a_checkpoint_every_like_the_cli(value, d, tmp_path):
    import geomlens

    out = tmp_path / "run"
    with pytest.raises(GeomlensError, match="checkpoint_every takes a number of seconds"):
        geomlens.capture(
            model=str(d / "ok"), corpus=str(d / "docs"), out=out, checkpoint_every=value
        )
    assert not out.exists()


@pytest.mark.skipif(torch.backends.mps.is_available(), reason="this machine has mps")
def test_a_device_this_machine_lacks_is_one_sentence(d, tmp_path, capsys):
    out = tmp_path / "run"
    argv = capture(d, d / "ok", out, "--device mps")
    refused(capsys, argv, "device 'mps' is not available here; use one of: cpu")
    not_finished(out)


# the last cases: nested configs, URLs without their filesystem, odd task and text files ------


def test_a_config_with_a_nested_config_it_does_not_have_is_refused(d, tmp_path, capsys):
    model = tmp_path / "nested"
    shutil.copytree(d / "ok", model)
    config = json.loads((model / "config.json").read_text())
    config["text_config"] = dict(config)
    (model / "config.json").write_text(json.dumps(config))
    out = tmp_path / "run"
    refused(capsys, capture(d, model, out), "holds a text_config, which a llama config")
    assert not out.exists()


def test_a_multimodal_model_is_refused_naming_its_other_part(tmp_path, capsys):
    config = transformers.LlavaConfig(
        text_config={"model_type": "llama", **LLAMA},
        vision_config=dict(
            model_type="clip_vision_model",
            hidden_size=32,
            intermediate_size=48,
            num_hidden_layers=1,
            num_attention_heads=4,
            image_size=28,
            patch_size=14,
        ),
    )
    model = tmp_path / "llava"
    transformers.LlavaForConditionalGeneration(config).save_pretrained(model)
    char_tokenizer(VOCAB).save_pretrained(model)
    refused(capsys, f"capture --model {model} {SMALL}", "multimodal llava", "vision_config")


def test_an_activation_url_without_its_filesystem_is_one_sentence_before_any_work(
    d, tmp_path, capsys, monkeypatch
):
    import fsspec.core

    with pytest.raises(GeomlensError, match="not a URL fsspec can open"):
        EngineConfig(activations_dir="nosuch://x").validate(save_activations=True)

    def missing(url: str, **kwargs: Any) -> Any:
        raise ImportError("Install s3fs to access S3")

    monkeypatch.setattr(fsspec.core, "url_to_fs", missing)
    out = tmp_path / "run"
    extra = "--save-activations --activations-dir s3://bucket/acts"
    refused(capsys, capture(d, d / "ok", out, extra), "s3://bucket/acts needs", "s3fs")
    assert not out.exists()


def test_a_task_file_with_a_byte_order_mark_reads_like_one_without(d, tmp_path):
    from geomlens.analyses.concepts.tasks import read_task

    plain = hellaswag(tmp_path / "plain.jsonl", ["the sea", "the sky"])
    marked = tmp_path / "marked.jsonl"
    marked.write_bytes(b"\xef\xbb\xbf" + plain.read_bytes())
    big = tmp_path / "task.json"
    examples = [{"input": "we saw", "target_scores": {"the sea": 1, "the sky": 0}}]
    big.write_text(json.dumps({"name": "t", "examples": examples}), encoding="utf-8-sig")
    assert read_task(marked).items == read_task(plain).items
    assert [list(i.choices) for i in read_task(big).items] == [["the sea", "the sky"]]


@pytest.mark.skipif(not Path("/dev/null").exists(), reason="no /dev/null")
def test_a_task_that_is_a_device_says_so(d, tmp_path, capsys):
    refused(
        capsys,
        f"concepts --model {d / 'ok'} --task /dev/null --quiet",
        "task file /dev/null is not a regular file",
        out=tmp_path / "run",
    )


def test_a_text_file_that_is_not_utf8_names_the_byte(d, tmp_path, capsys):
    text = tmp_path / "bytes.txt"
    text.write_bytes(b"plain words, then \xff\xfe and more")
    refused(
        capsys,
        f"walk --model {d / 'ok'} --text-file {text} --figures none --quiet",
        "is not UTF-8 text (byte 18)",
        out=tmp_path / "run",
    )


@pytest.mark.parametrize(
    ("call", "phrase"),
    [
        (lambda g: g.open_run(3), "open_run(): path takes"),
        (lambda g: g.open_result(None), "open_result(): folder takes"),
        (lambda g: g.load_corpus(5), "load_corpus(): source takes"),
        (lambda g: g.make_windows("bbc", None, 4, 8), "make_windows(): corpus takes a Corpus"),
        (lambda g: g.make_windows(None), "missing a required argument"),
    ],
    ids=["open_run", "open_result", "load_corpus", "make_windows-type", "make_windows-missing"],
)
def test_the_public_readers_raise_geomlens_errors_only(call, phrase):
    import geomlens

    with pytest.raises(GeomlensError, match=phrase.replace("(", r"\(").replace(")", r"\)")):
        call(geomlens)


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="no /dev/zero")
@pytest.mark.parametrize(
    ("argv", "what"),
    [
        ("walk --text-file /dev/zero --figures none", "--text-file /dev/zero"),
        ("sphere --nouns /dev/zero --figures none", "--nouns /dev/zero"),
    ],
    ids=["text-file", "nouns"],
)
def test_a_device_given_as_a_text_file_is_refused_before_it_fills_memory(
    argv, what, d, tmp_path, capsys
):
    out = tmp_path / "run"
    refused(capsys, f"{argv} --model {d / 'ok'} --quiet", f"{what} is not a regular file", out=out)
    assert not out.exists()


def test_a_text_file_past_its_limit_is_refused_naming_the_limit(d, tmp_path, monkeypatch):
    from geomlens.analyses.concepts.tasks import read_task

    monkeypatch.setitem(FILE_LIMITS, "task file", 2**20)
    task = tmp_path / "big.jsonl"
    task.write_bytes(b" " * (2**20 + 1))
    with pytest.raises(GeomlensError, match="larger than the 1 MiB geomlens reads"):
        read_task(task)
