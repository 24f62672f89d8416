"""Every family end to end: ``geomlens report`` (capture, position and context with the
attention split, sphere with the head probe and logit lens, walk with its kernels and
refactoring, and for decoders the concept tests) on a tiny random model of each row of the
family table, saved as a folder with a real tokenizer and loaded by path as a user would.

The tokenizer is a small one trained on BBC news (``tiny_models.small_tokenizer``: byte-level
BPE for decoders, WordPiece for encoders); the model's vocabulary is the tokenizer's, so
loading's coverage check holds. Windows are tiny (8 x 16 tokens), the concept stage scores 3
items and no figure is drawn (``--figures none``: these runs check numbers, the report tests
check figures), so one family takes seconds.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
import transformers
from family_cases import CASES, Case
from schema_checks import check_round_trip
from tiny_models import small_tokenizer

from geomlens.cli import main
from geomlens.models.families import FAMILIES, family_for

TINY: dict[str, Any] = dict(
    hidden_size=32, intermediate_size=48, num_hidden_layers=3, max_position_embeddings=512
)


def _sizes(case: Case, vocab: int) -> dict[str, Any]:
    """The row's sizes made tiny, with a vocabulary and context the tokenizer and walk need."""
    sizes = {**case.sizes, **case.options}
    renamed = {
        "n_embd": "hidden_size",
        "n_layer": "num_hidden_layers",
        "n_positions": "max_position_embeddings",
    }
    for key, value in TINY.items():
        alias = next((a for a, k in renamed.items() if k == key and a in sizes), key)
        sizes[alias] = value
    heads = sizes.get("num_attention_heads", sizes.get("n_head", 4))
    hidden = next(a for a in ("n_embd", "hidden_size") if a in sizes or a == "hidden_size")
    sizes[hidden] = 8 * heads
    if "head_dim" in sizes:
        sizes["head_dim"] = 8
    if "n_inner" in sizes:
        sizes["n_inner"] = 48
    sizes["vocab_size"] = vocab
    return sizes


def _special_ids(tokenizer: Any, case: Case) -> dict[str, Any]:
    """The tokenizer's special token ids for the config (the case's own options win)."""
    ids = {f"{k}_token_id": getattr(tokenizer, f"{k}_token_id") for k in ("bos", "eos", "pad")}
    return {k: v for k, v in ids.items() if v is not None and k not in case.options}


def tiny_folder(case: Case, root: Path) -> Path:
    """Save a tiny random model of ``case`` with a real tokenizer into ``root/case.id``."""
    family = next(f for f in FAMILIES if f.name == case.family)
    tokenizer = small_tokenizer(family.is_encoder)
    sizes = {**_sizes(case, len(tokenizer)), **_special_ids(tokenizer, case)}
    config = transformers.CONFIG_MAPPING[case.model_type](**sizes)
    auto = {
        "causal-lm": transformers.AutoModelForCausalLM,
        "base": transformers.AutoModel,
    }[family.auto_class]
    torch.manual_seed(0)
    model = auto.from_config(config)
    folder = root / case.id
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("families")


FIRST_ROWS = list({c.family: c for c in reversed(CASES)}.values())[::-1]
"""One row per family (its first): the other rows vary options the HF-equivalence table
checks."""


@pytest.mark.parametrize("case", FIRST_ROWS, ids=[c.family for c in FIRST_ROWS])
def test_report_runs_on_every_family(case: Case, root: Path) -> None:
    folder = tiny_folder(case, root)
    out = root / f"run-{case.id}"
    args = ["report", "--model", str(folder), "--contexts", "8", "--length", "16"]
    rc = main([*args, "--limit", "3", "--out", str(out), "--batch-size", "8", "--figures", "none"])
    assert rc == 0
    metrics = json.loads((out / "metrics.json").read_text())
    encoder = family_for(transformers.AutoConfig.from_pretrained(folder)).is_encoder
    expected = {"decomposition", "sphere", "walk"} | (set() if encoder else {"concepts"})
    assert expected <= set(metrics), f"{case.id}: sections {sorted(metrics)}"
    assert metrics["capture"]["n_contexts"] == 8 and metrics["capture"]["layers"]
    sphere, walk = metrics["sphere"], metrics["walk"]
    assert sphere["identity"]["max_rel_err"] < 1e-4
    assert sphere["heads"] and sphere["trajectory"], f"{case.id}: head probe or logit lens"
    assert walk["refactor"]["max_rel_err"] < 1e-4 and walk["kernels"]["n_windows"] == 8
    attention = metrics["attention"]  # the split where scores are bilinear in the input
    if "unsupported" in attention:  # q/k norms or soft-capping
        assert "(not linear)" in attention["unsupported"], f"{case.id}: {attention}"
    else:
        split = attention["parts"]
        assert split and all(b["max_rel_error"] < 1e-5 for b in split), f"{case.id}: {split}"
    assert (out / "report.html").stat().st_size > 10_000
    held = check_round_trip(metrics)  # every block reads through its schema and back
    assert {"attention", "sphere", "walk", "capture"} | (set() if encoder else {"concepts"}) <= set(
        held
    ), f"{case.id}: {held}"


@pytest.mark.parametrize(
    ("config", "named"),
    [
        (transformers.MambaConfig(), ".safetensors"),
        (transformers.FalconConfig(alibi=True), "alibi=True"),
        (transformers.OPTConfig(do_layer_norm_before=False), "do_layer_norm_before=False"),
        (transformers.DeepseekV3Config(), ".safetensors"),
        (transformers.LlamaConfig(hidden_act="evil"), "activation 'evil'"),
    ],
    ids=[
        "unsupported-family",
        "falcon-alibi",
        "opt-post-norm",
        "deepseek-latent-attention",
        "unknown-activation",
    ],
)
def test_unsupported_families_and_options_are_one_sentence(
    config: Any, named: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config.save_pretrained(tmp_path)
    rc = main(["capture", "--model", str(tmp_path), "--out", str(tmp_path / "run")])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1, err
    assert named in err[0] and "Traceback" not in err[0]
    assert not (tmp_path / "run" / "metrics.json").exists()


def test_models_lists_the_families(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["models", "--families", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    names = {r["family"] for r in rows}
    assert len(names) >= 20 and {"gptj", "falcon", "bloom", "mixtral", "t5"} <= names
    by_name = {r["family"]: r for r in rows}
    assert by_name["bloom"]["position"] == "alibi" and by_name["gptj"]["layout"] == "parallel"
    types = {t for r in rows for t in r["model_types"]}
    named = "starcoder2 stablelm granite cohere olmo gpt_bigcode codegen qwen2_moe smollm3"
    named += " nemotron xglm distilbert electra xlm-roberta albert modernbert bart mt5"
    assert len(types) >= 45 and set(named.split()) <= types, set(named.split()) - types
    assert "llama3" in by_name["llama"]["rope_types"] and not by_name["bert"]["rope_types"]
    assert main(["models", "--families"]) == 0
    text = capsys.readouterr().out
    assert "olmo2" in text and "rope types" in text and "llama3" in text
