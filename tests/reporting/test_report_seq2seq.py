"""``geomlens report`` on an encoder-decoder: every stage runs, each number names its stack.

A tiny random T5 (v1.1: gated FFN, untied head) saved with a real tokenizer, loaded by path
as a user would; tiny windows (8 x 16 tokens), 3 concept items and no static PNG figures
keep it to seconds.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from seq2seq_models import tiny_t5

from geomlens.analyses.registry import ANALYSES, page_sections, report_stages
from geomlens.cli import main

ON_PAGE_ONLY = {a.section.anchor for a in ANALYSES if a.stage is None and a.section is not None}
"""Sections of analyses the report does not run (their own command's runs show them)."""
SECTIONS = tuple((s.anchor, s.title) for s in page_sections() if s.anchor not in ON_PAGE_ONLY)


@pytest.fixture(scope="module")
def t5_report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("t5-report")
    folder = tiny_t5(root, "t5-v1_1")
    out = root / "run"
    args = ["report", "--model", str(folder), "--contexts", "8", "--length", "16"]
    args += ["--figures", "interactive"]  # the page's figures; no static PNG is read here
    assert main([*args, "--limit", "3", "--batch-size", "8", "--out", str(out), "--quiet"]) == 0
    return out


def metrics(run: Path) -> dict[str, Any]:
    return json.loads((run / "metrics.json").read_text())


def test_every_stage_runs_on_an_encoder_decoder(t5_report: Path) -> None:
    m = metrics(t5_report)
    stages = json.loads((t5_report / "stages.json").read_text())
    assert stages == [a.name for a in report_stages(True)]  # every registered stage
    # the attention split has T5's bias as its own part, and the parts rebuild the scores
    for block in m["attention"]["parts"]:
        assert block["parts"][-1] == "pos_bias" and block["max_rel_error"] < 1e-6
    # induction runs on the decoder's self-attention
    assert len(m["induction"]["scores"]) == 2 and "unsupported" not in m["induction"]
    assert m["sphere"]["identity"]["max_rel_err"] < 1e-4
    walk = m["walk"]
    assert walk["stack"] == "encoder" and walk["refactor"]["max_rel_err"] < 1e-4
    decoder = walk["decoder"]
    assert {"encoding", "decoding", "kernels", "cross_attention"} <= set(decoder)
    assert len(decoder["decoding"]["greedy"]["tokens"]) == 8
    concepts = m["concepts"]
    assert concepts["model_kind"] == "encoder-decoder" and concepts["baseline"]["n"] == 3
    assert set(m["stacks"]) >= {"decomposition", "sphere", "walk", "concepts", "induction"}


def test_the_page_labels_each_section_with_its_stack(t5_report: Path, page) -> None:
    html = (t5_report / "report.html").read_text(encoding="utf-8")
    for anchor, _ in SECTIONS:
        assert f'<section id="{anchor}">' in html, anchor
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto((t5_report / "report.html").as_uri(), wait_until="domcontentloaded", timeout=180_000)
    page.wait_for_function(
        "[...document.querySelectorAll('div.plot')].every(d => d.querySelector('.main-svg'))",
        timeout=180_000,
    )
    text = page.locator("main").inner_text()
    assert "Not computed" not in text and "not available" not in text
    for anchor in ("decomposition", "sphere", "walk", "concepts"):
        note = page.locator(f"#{anchor} p.stack")
        assert note.count() == 1 and note.inner_text().startswith("Stack: "), anchor
        assert page.locator(f"#{anchor} figure, #{anchor} div.plot").count() >= 1, anchor
    assert "decoder" in page.locator("#walk").inner_text()
    assert errors == []


@pytest.fixture(scope="module")
def short_t5(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A T5 whose config allows 24 positions: shorter than the walk text and a task item."""
    return tiny_t5(tmp_path_factory.mktemp("short-t5"), "t5-v1_0", n_positions=24)


def one_line_error(args: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    rc = main(args)
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and "Traceback" not in err[0], err
    return err[0]


@pytest.mark.parametrize(
    ("command", "named"),
    [
        (["concepts", "--limit", "2"], "more than"),
        (["walk"], "more than"),
    ],
    ids=["task-longer-than-the-encoder", "text-longer-than-the-encoder"],
)
def test_inputs_longer_than_the_encoder_are_one_sentence(
    command: list[str], named: str, short_t5: Path, tmp_path: Path, capsys
) -> None:
    args = [*command, "--model", str(short_t5), "--out", str(tmp_path / "run"), "--quiet"]
    line = one_line_error(args, capsys)
    assert named in line and "(24)" in line, line
    assert not (tmp_path / "run" / "metrics.json").exists()


def test_an_encoder_decoder_option_on_a_decoder_only_model_is_one_sentence(
    tmp_path: Path, capsys
) -> None:
    args = ["concepts", "--model", "smollm2-135m", "--feed", "decoder", "--limit", "2"]
    line = one_line_error([*args, "--out", str(tmp_path / "run"), "--quiet"], capsys)
    assert "--feed decoder is for encoder-decoder models" in line and "drop --feed" in line
