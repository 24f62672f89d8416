"""The report page agrees with itself, and ``compare`` draws its figures (issue 50, items 10
and 11).

One report of a tiny random Llama (16 windows of 32 tokens, interactive figures, 3 concept
items) is built once for the module; the claims chart, the summary, the sphere section,
the rank numbers and the concept schemes are read back from its page. ``compare`` puts it
beside a decomposition of the same model at T = 16 and is opened in Chromium.
"""

from __future__ import annotations

import base64
import contextlib
import gzip
import json
import re
import shutil
import statistics
from html import unescape
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeout
from tiny_models import saved_llama

from geomlens.analyses.concepts.scheme_words import LABEL
from geomlens.analyses.registry import write_report
from geomlens.cli import main
from geomlens.reporting.claims import VERDICTS, counted


@pytest.fixture(scope="module")
def tiny_llama(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 3-layer random Llama (d = 32) with a 1,024-token BBC tokenizer, saved as a folder."""
    folder = tmp_path_factory.mktemp("tiny-llama") / "llama"
    return saved_llama(folder, num_hidden_layers=3, max_position_embeddings=512)


SHAPE = ["--contexts", "16", "--batch-size", "16", "--quiet"]


@pytest.fixture(scope="module")
def report(tiny_llama: Path) -> Path:
    out = tiny_llama.parent / "report"
    args = ["report", "--model", str(tiny_llama), *SHAPE, "--length", "32"]
    assert main([*args, "--figures", "interactive", "--limit", "3", "--out", str(out)]) == 0
    return out


def metrics(run: Path) -> dict[str, Any]:
    return json.loads((run / "metrics.json").read_text())


def section_of(html: str, anchor: str) -> str:
    start = html.index(f'<section id="{anchor}">')
    return html[start : html.index("</section>", start)]


def visible(html: str) -> str:
    """The text a reader sees: no scripts, styles, tags or attributes (tooltips)."""
    html = re.sub(r"<(script|style)\b.*?</\1>", " ", html, flags=re.S)
    return unescape(re.sub(r"<[^>]+>", " ", html))


def figure_data(html: str, plot_id: str) -> dict[str, Any]:
    """The figure data of one plot of the page (plain JSON or gzip-base64)."""
    found = re.search(rf'<script type="([^"]+)" id="{plot_id}-data">(.*?)</script>', html, re.S)
    assert found is not None, plot_id
    text = found[2]
    if found[1] == "application/gzip-base64":
        text = gzip.decompress(base64.b64decode(text)).decode()
    return json.loads(text)


def test_the_claims_chart_draws_exactly_the_claims_the_summary_counts(report: Path) -> None:
    """Per verdict, the chart's dots are the summary's count; identity checks and variants
    are not drawn, and every counted claim is (with or without a number)."""
    html = (report / "report.html").read_text(encoding="utf-8")
    summary = visible(section_of(html, "summary"))
    said = re.search(r"(\d+) claims: " + ", ".join(rf"(\d+) {k}" for k in VERDICTS), summary)
    assert said is not None, summary
    figure = figure_data(html, "claims-glance")
    dots = {kind: 0 for kind in VERDICTS}
    drawn_ids = []
    for trace in figure["data"]:
        kind = trace.get("legendgroup", trace["name"])
        if kind in dots:
            dots[kind] += len(trace["y"])
            drawn_ids += trace.get("customdata", trace["y"])
    assert [dots[k] for k in VERDICTS] == [int(n) for n in said.groups()[1:]]
    assert sum(dots.values()) == int(said[1])
    records = metrics(report)["claims"]
    assert sorted(drawn_ids) == sorted(r["id"] for r in records if r["kind"] == "claim")
    assert counted(records)["apart"]  # this run has identity checks and variants to leave out
    assert "molina.layernorm_sphere" not in drawn_ids
    # every verdict's legend entry carries the summary's count
    for trace in figure["data"]:
        if trace["legendgroup"] in dots and trace["showlegend"]:
            assert trace["name"] == f"{trace['legendgroup']} ({dots[trace['legendgroup']]})"


def test_the_sphere_section_says_what_its_claim_row_says(report: Path, tmp_path: Path) -> None:
    """The gamma/beta reading quotes the verdict of the claim record, whatever it is: a
    planted verdict in metrics.json shows on the rebuilt page."""
    html = (report / "report.html").read_text(encoding="utf-8")
    record = next(
        r for r in metrics(report)["claims"] if r["id"] == "molina.gamma_beta_common_words"
    )
    sphere = visible(section_of(html, "sphere"))
    assert f"is {record['verdict']} in this run" in sphere
    assert "nothing here to compare" not in sphere
    run = tmp_path / "planted"
    shutil.copytree(report, run)
    found = metrics(run)
    for r in found["claims"]:
        if r["id"] == record["id"]:
            r.update(verdict="inconclusive", why="a planted reason", guard="chance")
    (run / "metrics.json").write_text(json.dumps(found))
    again = visible(section_of(write_report(run).read_text(encoding="utf-8"), "sphere"))
    assert "is inconclusive in this run (a planted reason; see Claims)" in again


def test_one_sentence_relates_the_positional_ranks(report: Path) -> None:
    """The ScreeNOT rank, the count above the noise floor (the low-rank claim's number)
    and the 95%-energy ranks, each named with its median over layers."""
    m = metrics(report)
    rows = m["decomposition"]["other_view"]["layers"]  # position 0 skipped
    median = {k: statistics.median(r[k] for r in rows) for k in RANKS}
    html = (report / "report.html").read_text(encoding="utf-8")
    sentence = next(
        s
        for s in map(unescape, re.findall(r"<li>([^<]*)</li>", section_of(html, "decomposition")))
        if s.startswith("The positional ranks on this page count different things")
    )
    assert f"ScreeNOT keeps {median['pos_rank']:g} direction" in sentence
    assert f"{median['pos_rank_corrected']:g} stand" in sentence
    assert (
        f"lies in {median['pos_rank95_corrected']:g} directions with the noise removed and in "
        f"{median['pos_rank95']:g} with it in" in sentence
    )
    low_rank = next(r for r in m["claims"] if r["id"] == "song.pos_low_rank")
    assert low_rank["number"] == median["pos_rank_corrected"]  # the claim's number, related
    assert sentence in visible(section_of(html, "summary"))


RANKS = ("pos_rank", "pos_rank_corrected", "pos_rank95_corrected", "pos_rank95")


def test_no_scheme_label_is_shown_as_text(report: Path) -> None:
    """Concept schemes read as words; their labels sit in tooltips (title attributes)."""
    html = (report / "report.html").read_text(encoding="utf-8")
    labels = set(metrics(report)["concepts"]["schemes"])
    assert labels and all(LABEL.fullmatch(label) for label in labels)
    assert LABEL.findall(visible(html)) == []
    for label in labels:
        assert f'title="{label}"' in section_of(html, "concepts")
    assert "pyramidal test: " in visible(section_of(html, "concepts"))
    bars = figure_data(html, "plot-concepts")["data"][0]
    assert not any(LABEL.search(x) for x in bars["x"])


@pytest.fixture(scope="module")
def comparison(report: Path, tiny_llama: Path) -> Path:
    """``compare`` of the report (T = 32) and a decomposition of the same model at T = 16."""
    short = tiny_llama.parent / "short"
    args = ["decompose", "--model", str(tiny_llama), *SHAPE, "--length", "16"]
    assert main([*args, "--figures", "none", "--out", str(short)]) == 0
    out = tiny_llama.parent / "compare"
    assert main(["compare", str(report), str(short), "--out", str(out)]) == 0
    return out / "compare.html"


def test_compare_draws_its_figures_and_says_the_runs_differ_in_t(comparison: Path, page) -> None:
    """Three plotly graphs drawn under "By relative depth", no console error; the runs'
    model, C and T in a table, and a sentence saying that they differ in T only."""
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(comparison.as_uri(), wait_until="load", timeout=180_000)
    with contextlib.suppress(PlaywrightTimeout):  # a page that draws nothing: counted below
        page.wait_for_function(
            "[...document.querySelectorAll('div.plot')].every(d => d.querySelector('.main-svg'))",
            timeout=90_000,
        )
    drawn = page.evaluate(
        "[...document.querySelectorAll('.js-plotly-plot')]"
        ".filter(d => d.querySelector('svg.main-svg')).length"
    )
    assert drawn == 3
    assert page.locator("#figures .js-plotly-plot").count() == 3
    assert errors == []
    html = comparison.read_text(encoding="utf-8")
    runs = visible(section_of(html, "runs"))
    assert re.search(r"The runs differ in T, the tokens per window \(32 in [^,]+, 16 in ", runs)
    assert "differ in C" not in runs  # both read 16 windows
    assert "C (windows)" in runs and "T (tokens each)" in runs


def test_compare_says_plainly_whether_the_runs_read_the_same_windows() -> None:
    from geomlens.analyses.compare import shape_sentence

    def run(name: str, contexts: int | None, length: int | None) -> Any:
        config = {"model": "m", "contexts": contexts, "length": length}
        return SimpleNamespace(path=Path(name), config=config, manifest={})

    same = [run("a", 16, 32), run("b", 16, 32)]
    assert shape_sentence(same) == "Every run reads the same C = 16 windows of T = 32 tokens."
    both = shape_sentence([run("a", 16, 32), run("b", 64, 32), run("c", 16, 128)])
    assert both.startswith(
        "The runs differ in C, the windows (16 in m (a), 64 in m (b), 16 in m (c)) and in T, "
        "the tokens per window (32 in m (a), 32 in m (b), 128 in m (c)): their numbers are "
        "not like for like"
    )
    assert "not recorded" in shape_sentence([run("a", None, 32), run("b", 16, 32)])
