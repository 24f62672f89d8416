"""``geomlens report`` and ``geomlens compare``: one run on real MiniLM weights, read back."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from geomlens.analyses.registry import (
    ANALYSES,
    claim_records,
    claims,
    page_sections,
    report_stages,
    write_report,
)
from geomlens.cli import main

ON_PAGE_ONLY = {a.section.anchor for a in ANALYSES if a.stage is None and a.section is not None}
"""Sections of analyses the report does not run (their own command's runs show them)."""
SECTIONS = tuple((s.anchor, s.title) for s in page_sections() if s.anchor not in ON_PAGE_ONLY)


@pytest.fixture(scope="module")
def report_run(minilm_report: Path) -> Path:
    """The report with its progress display on (conftest's ``minilm_report``);
    what it printed is kept in ../stderr.txt."""
    return minilm_report


def test_report_says_what_it_is_doing_the_whole_way(report_run: Path) -> None:
    """The capture bar, each stage's start and end, and each analysis step in between."""
    lines = (report_run.parent / "stderr.txt").read_text().replace("\r", "\n").splitlines()
    assert any(line.startswith("capture minilm-l6") for line in lines)
    # every stage the registry gives an encoder, numbered in turn
    titles = [a.title for a in report_stages(generates=False)]
    assert titles[:4] == [
        "position and context",
        "attention in the positional basis",
        "layer norm and the hypersphere",
        "movement through embedding space",
    ]
    n = len(titles)
    for i, title in enumerate(titles, 1):
        assert f"[{i}/{n}] {title} ..." in lines
        assert any(re.fullmatch(rf"\[{i}/{n}\] {title}: done in \d+ s", line) for line in lines)
    steps = [m[1] for line in lines if (m := re.fullmatch(r"(  \w+: .+) \(\d+ s\)", line))]
    papers = ("  decomposition:", "  attention:", "  sphere:", "  walk:")
    assert [step for step in steps if step.startswith(papers)] == [
        "  decomposition: outlier windows",
        "  decomposition: both views of every layer",
        "  decomposition: intervals over contexts",
        "  attention: attention in the positional basis",
        "  attention: induction heads",
        "  sphere: norm statistics and top tokens",
        "  sphere: head probe",
        "  sphere: logit lens and FFN sub-updates",
        "  sphere: UMAP of the trajectory",
        "  sphere: figures",
        "  walk: similarity maps",
        "  walk: encoding walk",
        "  walk: position kernels and the refactoring check",
    ]
    # the steps that scan the vocabulary layer by layer (seconds each on a real model)
    # show a bar of their layers or readouts, finished, with tqdm's time left
    n_layers = 6  # MiniLM's blocks: the encoding walk reads layers 0..6
    for step, unit, total in [
        ("  sphere: head probe", "layer", None),
        ("  sphere: logit lens and FFN sub-updates", "readout", None),
        ("  walk: encoding walk", "layer", n_layers + 1),
    ]:
        bar = [line for line in lines if line.startswith(f"{step}: ")]
        assert bar, (step, lines)
        done = re.search(rf"(\d+)/(\d+) \[[\d:]+<[\d:]+, +(\S+{unit}/s|\S+s/{unit})\]", bar[-1])
        assert done and done[1] == done[2], (step, bar[-1])
        assert total is None or int(done[2]) == total, (step, bar[-1])


def test_report_holds_every_analysis(report_run: Path) -> None:
    metrics = json.loads((report_run / "metrics.json").read_text())
    for section in ("capture", "decomposition", "attention", "sphere", "walk"):
        assert section in metrics
    assert json.loads((report_run / "stages.json").read_text()) == [
        a.name for a in report_stages(generates=False)
    ]
    page = (report_run / "report.html").read_text(encoding="utf-8")
    for anchor, _ in SECTIONS:
        if anchor != "concepts":  # MiniLM is an encoder: no concept tests
            assert f'<section id="{anchor}">' in page
    # self-contained: no external script, style or image is referenced
    assert not re.search(r"<(script|link|img)[^>]+(src|href)=\"(https?:)?//", page)
    assert "<noscript>" in page and "data:image/png;base64," in page
    # every claim has a verdict decided by a number of this run, kept in metrics.json
    model = json.loads((report_run / "manifest.json").read_text())["model"]
    found = claims(metrics, model)
    assert metrics["claims"] == claim_records(metrics, model)
    assert len(found) >= 11
    measured = [c for c in found if not c.verdict.startswith(("not measured", "not applicable"))]
    assert len(measured) >= 9 and all(c.value != "–" for c in measured)
    by_id = {c.id: c for c in found}
    # MiniLM is a BERT-style encoder, which Singh leaves out: its walk is shown, not judged
    assert "singh.walk_stays" in by_id and "singh.walk_leaves" not in by_id
    assert by_id["singh.walk_stays"].verdict.startswith("not applicable")
    # gamma/beta are measured on English word frequency, with an interval; Molina's claim
    # is about a language model's trained readout, which an encoder does not have
    zipf = by_id["molina.gamma_beta_common_words"]
    assert zipf.low is not None and zipf.low <= zipf.number <= zipf.high
    assert zipf.verdict.startswith("not applicable")


def test_untrusted_text_is_shown_not_run(report_run: Path, tmp_path: Path, page) -> None:
    """Prompts, token strings and names with markup appear as text and never execute."""
    evil = '<script>window.pwned=1</script><img src=x onerror="window.pwned=2">'
    run = tmp_path / "evil"
    shutil.copytree(report_run, run)
    metrics = json.loads((run / "metrics.json").read_text())
    metrics["sphere"]["prompt"] = evil
    metrics["sphere"]["trajectory"]["prediction"] = evil
    metrics["sphere"]["top_tokens"]["norm"]["top"][0] = evil
    metrics["sphere"]["trajectory"]["top5"][0] = [evil] * 5
    (run / "metrics.json").write_text(json.dumps(metrics))
    manifest = json.loads((run / "manifest.json").read_text())
    manifest["model"]["name"] = evil
    (run / "manifest.json").write_text(json.dumps(manifest))
    html = write_report(run).read_text(encoding="utf-8")
    assert evil not in html
    dialogs: list[str] = []
    page.on("dialog", lambda d: dialogs.append(d.message))
    page.goto((run / "report.html").as_uri(), wait_until="domcontentloaded", timeout=180_000)
    assert page.evaluate("window.pwned === undefined")
    assert page.locator("#sphere").get_by_text(evil, exact=False).count() >= 1
    assert dialogs == []


def test_report_in_a_real_browser(report_run: Path, page, output_path) -> None:
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto((report_run / "report.html").as_uri(), wait_until="domcontentloaded", timeout=180_000)
    page.wait_for_function(
        "[...document.querySelectorAll('div.plot')].every(d => d.querySelector('.main-svg'))",
        timeout=180_000,
    )
    plots = page.locator("div.plot")
    assert plots.count() >= 6
    for i in range(plots.count()):  # every figure container drew something
        box = plots.nth(i).bounding_box()
        assert box is not None and box["height"] > 100
        assert plots.nth(i).locator(".main-svg").count() >= 1
    links = page.locator("nav a")
    assert links.count() >= 6
    for i in range(links.count()):  # the navigation reaches every section
        target = links.nth(i).get_attribute("href")
        links.nth(i).click()
        page.wait_for_function(f"location.hash === '{target}'")
        top = page.locator(target).evaluate("e => e.getBoundingClientRect().top")
        assert abs(top) < 80, target
    Path(output_path).mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(Path(output_path) / "report.png"), full_page=False)
    assert (Path(output_path) / "report.png").stat().st_size > 10_000
    assert errors == []


def test_compare_two_runs(report_run: Path, tmp_path: Path, capsys) -> None:
    other = tmp_path / "second"
    shutil.copytree(report_run, other)
    assert main(["compare", str(report_run), str(other), "--out", str(tmp_path / "cmp")]) == 0
    rows = (tmp_path / "cmp" / "compare.csv").read_text().splitlines()
    assert len(rows) == 1 + 2 * 7  # header + two runs x 7 hidden-state layers
    html = (tmp_path / "cmp" / "compare.html").read_text()
    assert "(run)" in html and "(second)" in html
    assert '<section id="claims">' in html and "Layer norm is a projection" in html
    claims_csv = (tmp_path / "cmp" / "compare_claims.csv").read_text().splitlines()
    n_claims = len(json.loads((report_run / "metrics.json").read_text())["claims"])
    assert len(claims_csv) == 1 + 2 * n_claims
    assert claims_csv[0] == "run,id,paper,verdict,number,low,high,threshold,published"


def test_compare_refuses_a_folder_that_is_not_a_run(tmp_path: Path, capsys) -> None:
    assert main(["compare", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("geomlens: error:")
