"""A report in bfloat16 or float16: the page says the precision, and the layer-norm identity
is judged against its dtype's rounding (``max(1e-4, 4 * eps(dtype))``), not float32's.

A tiny random Llama (norm gains moved off 1) saved with a real tokenizer, loaded by path;
8 windows of 16 tokens, 3 concept items, no static figures.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
import transformers
from tiny_models import small_tokenizer

from geomlens.analyses.sphere.claims import identity_threshold, sphere_claims
from geomlens.cli import main

IDENTITY = "molina.layernorm_sphere"


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tokenizer = small_tokenizer(False)
    config = transformers.LlamaConfig(
        hidden_size=64,
        intermediate_size=96,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        vocab_size=len(tokenizer),
        max_position_embeddings=512,  # the walk's default text
        tie_word_embeddings=False,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(config)
    with torch.no_grad():
        for name, weight in model.named_parameters():
            if "norm" in name:
                weight.add_(0.1 * torch.randn_like(weight))
    out = tmp_path_factory.mktemp("precision") / "tiny-llama"
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


@pytest.fixture(scope="module", params=["bfloat16", "float16"])
def report(request: pytest.FixtureRequest, folder: Path) -> tuple[str, Path]:
    dtype, out = request.param, folder.parent / f"report-{request.param}"
    args = ["report", "--model", str(folder), "--contexts", "8", "--length", "16"]
    args += ["--dtype", dtype, "--figures", "none", "--limit", "3", "--quiet", "--out", str(out)]
    assert main(args) == 0
    return dtype, out


def claim(run: Path, claim_id: str) -> dict[str, Any]:
    metrics = json.loads((run / "metrics.json").read_text())
    return next(c for c in metrics["claims"] if c["id"] == claim_id)


def test_the_identity_is_judged_at_the_runs_precision(report: tuple[str, Path]) -> None:
    dtype, run = report
    metrics = json.loads((run / "metrics.json").read_text())
    identity = metrics["sphere"]["identity"]
    assert identity["dtype"] == dtype
    # float32's bound would call rounding in this dtype a failure of the construction
    assert identity["max_rel_err"] > 1e-4
    found = claim(run, IDENTITY)
    assert found["verdict"] == "reproduced"
    assert (
        found["threshold"]
        == identity_threshold(dtype)
        == 4 * torch.finfo(getattr(torch, dtype)).eps
    )
    assert identity["max_rel_err"] < found["threshold"]
    assert f"(a {dtype} forward pass)" in found["rule"] and dtype in found["threshold_source"]


def test_the_page_names_the_precision(report: tuple[str, Path]) -> None:
    dtype, run = report
    html = (run / "report.html").read_text(encoding="utf-8")
    summary = html[html.index('<section id="summary">') :]
    summary = summary[: summary.index("</section>")]
    assert f"d = 64) in {dtype} on the bbc corpus" in summary
    assert f"<td>precision</td><td>{dtype}</td>" in html.replace("\n", "")


@pytest.mark.parametrize(
    ("dtype", "error", "verdict"),
    [
        ("float32", 5e-5, "reproduced"),
        ("float32", 4e-4, "not reproduced"),  # float32 keeps its bound
        (None, 4e-4, "not reproduced"),  # a run that recorded no dtype ran in float32
        ("bfloat16", 0.0035, "reproduced"),
        ("bfloat16", 0.05, "not reproduced"),  # a construction off by 5% is not rounding
        ("float16", 0.0035, "reproduced"),
        ("float16", 0.005, "not reproduced"),
    ],
)
def test_the_bound_is_four_epsilons_of_the_dtype(
    dtype: str | None, error: float, verdict: str
) -> None:
    identity: dict[str, Any] = {"max_rel_err": error} | ({"dtype": dtype} if dtype else {})
    [found, _] = sphere_claims({"sphere": {"identity": identity}}, {})
    assert found.id == IDENTITY and found.verdict == verdict
    eps = torch.finfo(getattr(torch, dtype or "float32")).eps
    assert found.threshold == max(1e-4, 4 * eps)
