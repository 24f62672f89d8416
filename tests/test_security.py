"""Nothing runs code from files: safetensors or GGUF weights only, no pickle, no eval.

A scan of the source tree for calls that deserialise or execute code, and the loader seen
from Hugging Face's side: which keyword arguments reach ``from_pretrained``.
"""

from __future__ import annotations

import ast
import json
import pickle
import shutil
from pathlib import Path
from typing import Any

import pytest
import torch
import transformers

from geomlens.capturing import CaptureConfig
from geomlens.cli import build_parser, capture_config, main
from geomlens.errors import GeomlensError
from geomlens.models import load_model
from geomlens.models.bundled import BUNDLED
from geomlens.models.loading import check_no_code

SRC = Path(__file__).resolve().parents[1] / "src" / "geomlens"


def dotted(node: ast.expr) -> str:
    """``torch.load`` for the expression ``torch.load``; "" for anything not a plain name."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = dotted(node.value)
        return f"{base}.{node.attr}" if base else ""
    return ""


def is_true(node: ast.expr | None) -> bool:
    return isinstance(node, ast.Constant) and node.value is True


def findings(tree: ast.AST) -> list[tuple[int, str]]:
    """Every call or literal in one module that could run code from a file."""
    found: list[tuple[int, str]] = []
    forbidden_calls = {
        "eval": "eval()",
        "exec": "exec()",
        "compile": "compile()",
        "__import__": "__import__()",
        "pickle.load": "pickle.load",
        "pickle.loads": "pickle.loads",
        "pickle.Unpickler": "pickle.Unpickler",
        "marshal.loads": "marshal.loads",
        "dill.load": "dill.load",
        "dill.loads": "dill.loads",
        "yaml.load": "yaml.load (use yaml.safe_load)",
        "yaml.unsafe_load": "yaml.unsafe_load",
        "yaml.full_load": "yaml.full_load",
    }
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            names = [a.name for a in node.names]
            module = node.module if isinstance(node, ast.ImportFrom) else None
            for name in [module or "", *names]:
                if name.split(".")[0] in ("pickle", "dill", "marshal", "cloudpickle"):
                    found.append((node.lineno, f"import of {name}"))
        if isinstance(node, ast.Call):
            name = dotted(node.func)
            keywords = {k.arg: k.value for k in node.keywords}
            if name in forbidden_calls:
                found.append((node.lineno, forbidden_calls[name]))
            if name == "torch.load" and not is_true(keywords.get("weights_only")):
                found.append((node.lineno, "torch.load without weights_only=True"))
            if name in ("np.load", "numpy.load") and is_true(keywords.get("allow_pickle")):
                found.append((node.lineno, "numpy.load with allow_pickle=True"))
            if is_true(keywords.get("trust_remote_code")):
                found.append((node.lineno, "trust_remote_code=True"))
        if isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values, strict=True):
                if (
                    isinstance(key, ast.Constant)
                    and key.value == "trust_remote_code"
                    and is_true(value)
                ):
                    found.append((node.lineno, '{"trust_remote_code": True}'))
    return found


def test_the_scan_catches_what_it_looks_for():
    code = """
import pickle
torch.load(path)
torch.load(path, weights_only=False)
eval("1")
AutoModel.from_pretrained(x, trust_remote_code=True)
kwargs = {"trust_remote_code": True}
yaml.load(text)
"""
    kinds = {kind for _, kind in findings(ast.parse(code))}
    assert kinds == {
        "import of pickle",
        "torch.load without weights_only=True",
        "eval()",
        "trust_remote_code=True",
        '{"trust_remote_code": True}',
        "yaml.load (use yaml.safe_load)",
    }
    safe = "torch.load(p, weights_only=True)\nmodel.eval()\nyaml.safe_load(t)\nf(trust_remote_code=flag)"
    assert findings(ast.parse(safe)) == []


def test_source_runs_no_code_from_files():
    problems = []
    for path in sorted(SRC.rglob("*.py")):
        for line, kind in findings(ast.parse(path.read_text(encoding="utf-8"))):
            problems.append(f"{path.relative_to(SRC.parent)}:{line}: {kind}")
    assert problems == []


class Recorder:
    """Wraps ``from_pretrained`` of the Auto classes and records geomlens' own calls.

    Calls Hugging Face makes from inside one of them (a tokenizer reading its config) are
    not recorded: only what geomlens passes matters here.
    """

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.depth = 0
        for cls in (
            transformers.AutoConfig,
            transformers.AutoModel,
            transformers.AutoModelForCausalLM,
            transformers.AutoTokenizer,
        ):
            monkeypatch.setattr(
                cls, "from_pretrained", self.wrap(cls.__name__, cls.from_pretrained)
            )

    def wrap(self, name: str, real: Any) -> Any:
        def from_pretrained(*args: Any, **kwargs: Any) -> Any:
            if self.depth == 0:
                self.calls.append((name, dict(kwargs)))
            self.depth += 1
            try:
                return real(*args, **kwargs)
            finally:
                self.depth -= 1

        return from_pretrained

    def kwargs_of(self, name: str) -> list[dict[str, Any]]:
        return [kwargs for called, kwargs in self.calls if called == name]


def test_loading_passes_trust_remote_code_true_only_when_asked(monkeypatch):
    """False is said explicitly: left unset, Hugging Face may ask at a prompt."""
    recorder = Recorder(monkeypatch)
    load_model("minilm-l6")
    assert {name for name, _ in recorder.calls} == {"AutoConfig", "AutoModel", "AutoTokenizer"}
    assert all(kwargs.get("trust_remote_code") is False for _, kwargs in recorder.calls)
    assert [k["use_safetensors"] for k in recorder.kwargs_of("AutoModel")] == [True]

    recorder.calls.clear()
    load_model("minilm-l6", trust_remote_code=True)
    assert len(recorder.calls) == 3
    assert all(kwargs.get("trust_remote_code") is True for _, kwargs in recorder.calls)


def test_trust_remote_code_is_a_capture_option_outside_the_run_identity():
    args = build_parser().parse_args(["capture", "--trust-remote-code"])
    assert capture_config(args).trust_remote_code is True
    plain = capture_config(build_parser().parse_args(["capture"]))
    assert plain.trust_remote_code is False
    assert capture_config(args).to_dict() == plain.to_dict()
    assert "trust_remote_code" not in CaptureConfig().to_dict()


def test_the_command_line_flag_reaches_hugging_face(monkeypatch, tmp_path):
    corpus = tmp_path / "docs"
    corpus.mkdir()
    for k in range(2):
        text = ("the geometry of language models", "positions and contexts on a sphere")[k]
        (corpus / f"{k}.txt").write_text(f"{text} " * 10)  # windows that differ
    argv = ["capture", "--model", "minilm-l6", "--corpus", str(corpus), "--quiet"]
    argv += ["--contexts", "2", "--length", "8"]
    recorder = Recorder(monkeypatch)
    assert main([*argv, "--out", str(tmp_path / "a")]) == 0
    assert recorder.calls and all(k.get("trust_remote_code") is False for _, k in recorder.calls)
    recorder.calls.clear()
    assert main([*argv, "--trust-remote-code", "--out", str(tmp_path / "b")]) == 0
    assert recorder.calls and all(k.get("trust_remote_code") is True for _, k in recorder.calls)
    same = (tmp_path / "a" / "metrics.json").read_bytes()
    assert (tmp_path / "b" / "metrics.json").read_bytes() == same


class Canary:
    """A pickle that creates a file when it is unpickled."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self) -> tuple[Any, ...]:
        return (open, (str(self.path), "w"))


@pytest.fixture
def pickle_only_folder(tmp_path: Path) -> tuple[Path, Path]:
    """A MiniLM folder whose weights are a pickle that would create ``canary``."""
    paths = BUNDLED["minilm-l6"].part_paths()
    assert paths is not None
    folder = tmp_path / "model"
    folder.mkdir()
    for path in paths[0].iterdir():
        if path.is_file() and path.suffix != ".safetensors":
            shutil.copy(path, folder / path.name)
    canary = tmp_path / "canary"
    (folder / "pytorch_model.bin").write_bytes(pickle.dumps({"weight": Canary(canary)}))
    return folder, canary


def test_a_folder_with_only_pickled_weights_is_refused(pickle_only_folder, monkeypatch):
    folder, canary = pickle_only_folder

    def no_torch_load(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("torch.load was called")

    monkeypatch.setattr(torch, "load", no_torch_load)
    with pytest.raises(GeomlensError) as info:
        load_model(folder)
    message = str(info.value)
    assert "holds no .safetensors weights" in message and "pytorch_model.bin" in message
    assert "\n" not in message
    assert not canary.exists()


def test_hugging_face_is_told_to_use_safetensors_only(pickle_only_folder, monkeypatch):
    """With geomlens' own check out of the way, use_safetensors=True still refuses the pickle."""
    folder, canary = pickle_only_folder
    monkeypatch.setattr("geomlens.models.loading.check_safetensors", lambda folder: None)
    with pytest.raises(GeomlensError, match="could not load the weights"):
        load_model(folder)
    assert not canary.exists()


def test_a_folder_asking_to_run_its_code_needs_the_flag(tmp_path):
    (tmp_path / "config.json").write_text(
        json.dumps({"model_type": "bert", "auto_map": {"AutoModel": "modeling_x.Model"}})
    )
    with pytest.raises(GeomlensError, match="--trust-remote-code"):
        check_no_code(tmp_path)
    check_no_code(tmp_path, trust_remote_code=True)
    with pytest.raises(GeomlensError, match="--trust-remote-code"):
        load_model(tmp_path)


def test_the_concepts_flag_reaches_hugging_face_outside_the_run_identity(monkeypatch, tmp_path):
    from importlib import resources

    task = str(resources.files("geomlens") / "data" / "timedial_200.json")
    argv = ["concepts", "--model", "smollm2-135m", "--task", task, "--limit", "1"]
    argv += ["--scheme", "sanity", "--quiet", "--out", str(tmp_path / "c")]
    recorder = Recorder(monkeypatch)
    assert main([*argv, "--trust-remote-code"]) == 0
    assert recorder.calls and all(k.get("trust_remote_code") is True for _, k in recorder.calls)
    config = json.loads((tmp_path / "c" / "manifest.json").read_text())["config"]
    assert "trust_remote_code" not in config
