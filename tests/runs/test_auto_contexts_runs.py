"""``--contexts auto`` as a run (pipeline/auto.py) on a tiny GPT-2: an interrupted chunk
resumes at its last saved batch and no earlier chunk is captured again; a run interrupted in
its final analysis captures nothing again; the resumed run writes the metrics.json bytes of
an uninterrupted one (no wall-clock time in it: that is in the manifest's timing); the
activation shards of every chunk read as one store, each equal to Hugging Face's hidden
states of its windows; a corpus too small is refused, or stops with nothing to decide; a
budget too small for more than one look says it cut the run short; a simulated slow machine
stops at the same windows with the same verdicts; ``--max-contexts`` ends the schedule.

The looks use a stub rule that never decides (so every planned chunk is captured) and runs
no forward pass of its own, so that the forward passes counted are the capture's alone."""

from __future__ import annotations

import json
import time
from contextlib import nullcontext
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
import torch
from tiny_models import VOCAB, char_tokenizer

import geomlens.capturing.capture as capture_module
import geomlens.pipeline.auto as auto_module
from geomlens.analyses import registry
from geomlens.analyses.decomposition import sequential
from geomlens.capturing.capture import CaptureConfig
from geomlens.capturing.store import ActivationStore
from geomlens.cli import main
from geomlens.config.options import AUTO_BUDGET
from geomlens.pipeline.request import AutoContexts
from geomlens.pipeline.run import run

BATCH = 4
LOOKS = (16, 32, 64)
"""The stub rule's schedule: chunks of 16, 16 and 32 windows, 4 + 4 + 8 batches (16 windows
at least: a chunk keeps as many interval groups as the capture before it)."""


@dataclass(frozen=True)
class NeverDecided:
    """A ``ContextRule`` whose one claim stays inconclusive at every look."""

    spending: str = "none (a test rule)"

    def looks(self, first: int, available: int) -> tuple[int, ...]:
        return sequential.looks(first, available, len(LOOKS))

    def level(self, n_looks: int) -> float:
        return 0.95

    def look(self, acc, view, windows, batch_size, coverage, model, earlier=None):
        return sequential.Look(acc.n_contexts, {"x": "inconclusive"}, ["x"])

    def finishing(self, coverage: float) -> Any:
        return nullcontext()

    def sections(self, metrics: dict[str, Any], record: dict[str, Any]) -> dict[str, Any]:
        return {}


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny GPT-2 folder (64 positions, a character tokenizer of its vocabulary)."""
    from transformers import GPT2Config, GPT2LMHeadModel

    folder = tmp_path_factory.mktemp("tiny-gpt2")
    config = GPT2Config(vocab_size=VOCAB, n_positions=64, n_embd=32, n_layer=2, n_head=2)
    torch.manual_seed(0)
    GPT2LMHeadModel(config).save_pretrained(folder)
    char_tokenizer(VOCAB).save_pretrained(folder)
    return folder


def corpus(folder: Path, n_documents: int) -> Path:
    """A .jsonl corpus of ``n_documents`` different texts of about 40 characters."""
    path = folder / f"docs{n_documents}.jsonl"
    words = ["river", "stone", "market", "engine", "garden", "signal", "harbour", "winter"]
    lines = []
    for i in range(n_documents):
        text = " ".join(words[(i * k + k) % len(words)] for k in range(1, 8)) + f" {i}"
        lines.append(json.dumps({"text": text, "label": ["a", "b"][i % 2]}))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def request(tiny: Path, docs: Path, out: Path, analysis: Any = None, **config: Any) -> Any:
    """The capture of ``--contexts auto`` with the stub rule, a checkpoint after every batch."""
    made = CaptureConfig(
        model=str(tiny), corpus=str(docs), contexts=LOOKS[0], length=8, batch_size=BATCH, **config
    )
    return registry.run_request(
        "capture",
        made,
        out,
        auto=AutoContexts(60.0, rule=NeverDecided()),
        progress=False,
        checkpoint_every_s=0.0,
        analysis=analysis,
    )


class Forwards(list):
    """The batch size of each capture forward pass, appended as it runs; ``stop_at`` n
    raises KeyboardInterrupt (a Ctrl-C) at the n-th pass (0: never)."""

    stop_at = 0


@pytest.fixture
def forwards(monkeypatch) -> Forwards:
    """The capture's forward passes, counted (``Forwards``)."""
    seen = Forwards()
    real = capture_module.batch_hidden_states

    def counted(view, ids, *args, **kwargs):
        if len(seen) + 1 == seen.stop_at:
            raise KeyboardInterrupt
        seen.append(len(ids))
        return real(view, ids, *args, **kwargs)

    monkeypatch.setattr(capture_module, "batch_hidden_states", counted)
    return seen


def test_an_interrupted_chunk_resumes_at_its_last_batch(tiny, tmp_path, forwards):
    docs = corpus(tmp_path, 70)
    fresh = tmp_path / "fresh"
    run(request(tiny, docs, fresh))
    assert len(forwards) == 16  # 4 + 4 + 8 batches
    forwards.clear()

    out = tmp_path / "resumed"
    forwards.stop_at = 7  # the third batch of the second chunk
    with pytest.raises(KeyboardInterrupt):
        run(request(tiny, docs, out))
    assert len(forwards) == 6
    assert (out / "checkpoint" / "to_32").is_dir()  # the second chunk's own checkpoint
    forwards.clear()
    forwards.stop_at = 0
    run(request(tiny, docs, out))
    assert len(forwards) == 2 + 8  # the second chunk's last two batches, then the third
    # the same numbers as the uninterrupted run, byte for byte
    assert (out / "metrics.json").read_bytes() == (fresh / "metrics.json").read_bytes()
    metrics = json.loads((out / "metrics.json").read_text())
    record = metrics["capture"]["auto_contexts"]
    assert record["looks"] == list(LOOKS) and record["stopped"] == "last look"
    assert "minutes" not in record and "look_minutes" not in record
    timing = json.loads((out / "manifest.json").read_text())["timing"]
    assert timing["auto_contexts"]["minutes"] >= 0
    assert len(timing["auto_contexts"]["look_seconds"]) == len(LOOKS)
    assert not (out / "checkpoint").exists()
    assert not (out / "stats" / "auto_chunks.safetensors").exists()


def test_an_interruption_in_the_analysis_captures_nothing_again(tiny, tmp_path, forwards):
    docs = corpus(tmp_path, 70)
    out = tmp_path / "run"
    calls: list[int] = []

    def analysis(folder, view, windows, acc):
        calls.append(acc.n_contexts)
        if len(calls) == 1:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run(request(tiny, docs, out, analysis))
    assert len(forwards) == 16 and calls == [64]
    forwards.clear()
    run(request(tiny, docs, out, analysis))
    assert forwards == [] and calls == [64, 64]  # the saved statistics, analysed again


def block_output(into: list[torch.Tensor]) -> Any:
    """A forward hook appending a block's output hidden states to ``into``."""

    def hook(module: Any, args: Any, output: Any) -> None:
        into.append(output if torch.is_tensor(output) else output[0])

    return hook


def test_the_shards_of_every_chunk_read_as_one_store(tiny, tmp_path, forwards):
    from geomlens.models import load_model

    docs = corpus(tmp_path, 70)
    out = tmp_path / "run"
    run(request(tiny, docs, out, save_activations=True))
    store = ActivationStore(out / "activations")
    assert len(store) == 16  # one shard per batch of every chunk, none overwritten
    view = load_model(str(tiny))
    blocks = view.model.transformer.h
    seen = []
    for shard in store.iter_shards():
        seen.extend(shard["context_index"].tolist())
        last: list[torch.Tensor] = []  # the last block's output (HF's last state has ln_f)
        hook = blocks[-1].register_forward_hook(block_output(last))
        with torch.inference_mode():
            hf = view.model(shard["input_ids"], output_hidden_states=True).hidden_states
        hook.remove()
        expected = {**dict(enumerate(hf[: len(blocks)])), len(blocks): last[0]}
        for layer in store.layers:
            torch.testing.assert_close(shard[f"layer_{layer}"], expected[layer])
    assert sorted(seen) == list(range(LOOKS[-1]))
    assert store.layer(store.layers[0]).shape[0] == LOOKS[-1]


def test_a_budget_spent_by_the_first_look_says_so(tiny, tmp_path, forwards, capsys):
    """The wall-clock safety cuts the run short and says so in stderr, the finishing
    lines, the manifest and metrics.json (with the budget it spent)."""
    docs = corpus(tmp_path, 70)
    made = request(tiny, docs, tmp_path / "run")

    done = run(replace(made, auto=replace(made.auto, budget_minutes=1e-9)))
    err = capsys.readouterr().err
    assert "the first look always runs" in err and "stopped: budget" in err
    assert "cut short by the wall-clock safety --budget" in err
    assert len(forwards) == 4  # the first chunk only
    record = json.loads((tmp_path / "run" / "metrics.json").read_text())["capture"]
    auto = record["auto_contexts"]
    assert auto["looks"] == [LOOKS[0]] and auto["budget_minutes"] == 1e-9
    assert auto["cut_short"].startswith(
        f"cut short by the wall-clock safety --budget (1e-09 min) "
        f"at {LOOKS[0]} of the {LOOKS[-1]} planned windows"
    )
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert manifest["auto_contexts"]["cut_short"] == auto["cut_short"]
    assert registry.summary_lines("capture", done)[-1] == f"--contexts auto: {auto['cut_short']}"


class SlowClock:
    """A machine ``minutes`` slower per chunk: the auto loop's clock jumps that far ahead
    (and the chunk's capture reports that many more seconds) at every chunk."""

    def __init__(self, minutes: float) -> None:
        self.ahead, self.step = 0.0, 60.0 * minutes

    def perf_counter(self) -> float:
        return time.perf_counter() + self.ahead

    def capture(self, real: Any) -> Any:
        def slow(job, engine):
            acc, spent = real(job, engine)
            self.ahead += self.step
            return acc, {**spent, "seconds": spent.get("seconds", 0.0) + self.step}

        return slow


def test_a_slow_machine_stops_at_the_same_windows_with_the_same_verdicts(
    tiny, tmp_path, monkeypatch
):
    """The looks stop at a number of windows: the real rule on the same data and seed
    stops at the same look with the same verdicts, and writes the same metrics.json bytes,
    whether each chunk takes a moment or 8 minutes (24 minutes in all: past the 20 minutes
    a wall-clock stop once spent, within the safety's default)."""
    docs = corpus(tmp_path, 70)

    def auto_run(out: Path) -> dict[str, Any]:
        made = CaptureConfig(
            model=str(tiny), corpus=str(docs), contexts=LOOKS[0], length=8, batch_size=BATCH
        )
        req = registry.run_request(
            "capture",
            made,
            out,
            auto=AutoContexts(AUTO_BUDGET),
            progress=False,
        )
        run(req)
        return json.loads((out / "manifest.json").read_text())

    quick = auto_run(tmp_path / "quick")
    clock = SlowClock(8.0)
    monkeypatch.setattr(auto_module, "time", clock)
    monkeypatch.setattr(auto_module, "engine_capture", clock.capture(auto_module.engine_capture))
    slow = auto_run(tmp_path / "slow")
    assert slow["timing"]["auto_contexts"]["minutes"] >= 8.0 * len(slow["auto_contexts"]["looks"])
    assert slow["timing"]["auto_contexts"]["minutes"] > 20.0
    assert slow["auto_contexts"]["stopped"] == quick["auto_contexts"]["stopped"] != "budget"
    assert slow["auto_contexts"]["looks"] == quick["auto_contexts"]["looks"]
    assert slow["auto_contexts"]["verdicts"] == quick["auto_contexts"]["verdicts"]
    assert "cut_short" not in slow["auto_contexts"]
    metrics = (tmp_path / "slow" / "metrics.json").read_bytes()
    assert metrics == (tmp_path / "quick" / "metrics.json").read_bytes()


def test_the_looks_stop_at_max_contexts(tiny, tmp_path, forwards):
    """--max-contexts cuts the schedule to the doublings within it: 16 and 32 of 70."""
    docs = corpus(tmp_path, 70)
    made = request(tiny, docs, tmp_path / "run")
    run(replace(made, auto=replace(made.auto, max_contexts=40)))
    record = json.loads((tmp_path / "run" / "metrics.json").read_text())["capture"]
    auto = record["auto_contexts"]
    assert auto["planned"] == [16, 32] and auto["looks"] == [16, 32]
    assert auto["stopped"] == "last look" and auto["max_contexts"] == 40
    assert len(forwards) == 4 + 4


def test_one_document_is_refused_in_one_sentence(tiny, tmp_path, capsys):
    out = tmp_path / "run"
    docs = corpus(tmp_path, 1)
    argv = ["capture", "--model", str(tiny), "--corpus", str(docs), "--contexts", "auto"]
    code = main([*argv, "--length", "8", "--quiet", "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert "the corpus holds 1 window(s) of 8 tokens" in err
    assert not (out / "metrics.json").exists()


def test_three_documents_stop_with_nothing_to_decide(tiny, tmp_path, capsys):
    """The real rule: on 3 windows no position claim is measured, so nothing is decided."""
    out = tmp_path / "run"
    docs = corpus(tmp_path, 3)
    argv = ["capture", "--model", str(tiny), "--corpus", str(docs), "--contexts", "auto"]
    code = main([*argv, "--length", "8", "--quiet", "--figures", "none", "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 0, err
    assert "stopped: nothing to decide" in err
    record = json.loads((out / "metrics.json").read_text())["capture"]["auto_contexts"]
    assert record["stopped"] == "nothing to decide" and record["contexts"] == 3
    assert not set(record["verdicts"].values()) - {"not measured"}


def test_the_final_analysis_reuses_the_last_looks_draws(tiny, tmp_path, monkeypatch):
    """After the last look, the claims' intervals take the look's draws of the
    noise-corrected numbers instead of drawing them again, and write the metrics.json
    bytes of a run that draws them again."""
    from geomlens.analyses.decomposition import intervals
    from geomlens.analyses.decomposition import step as step_module
    from geomlens.analyses.decomposition.command import run_decompose

    docs = corpus(tmp_path, 70)
    made = CaptureConfig(
        model=str(tiny), corpus=str(docs), contexts=LOOKS[0], length=8, batch_size=BATCH
    )
    given: list[Any] = []
    real = intervals._layer_draws

    def seen(*args: Any) -> Any:
        given.append(args[7] if len(args) > 7 else None)
        return real(*args)

    monkeypatch.setattr(intervals, "_layer_draws", seen)
    monkeypatch.setattr(sequential, "COUNTED", frozenset())  # every look draws
    auto = AutoContexts(AUTO_BUDGET)
    run_decompose(made, tmp_path / "reused", auto=auto, progress=False, figures="none")
    assert given and all(r is not None and len(r[1]) == intervals.N_DRAWS for r in given)
    given.clear()
    monkeypatch.setattr(step_module, "reused_draws", lambda acc, seed: {})
    run_decompose(made, tmp_path / "drawn", auto=auto, progress=False, figures="none")
    assert given and all(r is None for r in given)
    metrics = (tmp_path / "reused" / "metrics.json").read_bytes()
    assert metrics == (tmp_path / "drawn" / "metrics.json").read_bytes()
