"""The report page as a reader meets it: a glossary for every metric key, tables that
scroll inside their box, one copy of each figure, readable run facts, paper links, and a
page that fits a 1,400 px window with no console errors (MiniLM's session report)."""

from __future__ import annotations

import base64
import gzip
import json
import re
from html import escape
from pathlib import Path

import numpy as np
import plotly.offline
import pytest

from geomlens.analyses.attention.section import attention_section
from geomlens.analyses.decomposition.section import TABLE_KEYS
from geomlens.analyses.sphere.section import sphere_section
from geomlens.reporting.glossary import GLOSSARY, describe, descriptions
from geomlens.reporting.html import number, rounded
from geomlens.reporting.interactive import fewer_slider_steps
from geomlens.runs.runfolder import Run


def test_glossary_describes_every_per_layer_key_of_a_report(minilm_report: Path) -> None:
    """Every key of the per-layer rows the page and the Python API show has a sentence."""
    metrics = json.loads((minilm_report / "metrics.json").read_text())
    rows = [
        *metrics["decomposition"]["layers"],
        *metrics["capture"]["layers"],
        *metrics["walk"]["similarity"]["layers"],
        *metrics["walk"]["encoding"]["layers"],
    ]
    keys = {k for row in rows for k, v in row.items() if not isinstance(v, list)}
    missing = sorted(k for k in keys if describe(k) is None)
    assert missing == []


def test_glossary_sentences_are_one_sentence_each() -> None:
    for key, text in GLOSSARY.items():
        assert text.endswith(".") and ". " not in text, key
        assert len(text) < 240, key
    assert describe("share_pos_skip_first") == (
        GLOSSARY["share_pos"].rstrip(".") + ", position 0 left out."
    )
    assert describe("no_such_key") is None
    assert descriptions(["layer", "no_such_key"]) == {"layer": GLOSSARY["layer"]}


@pytest.fixture(scope="module")
def page_html(minilm_report: Path) -> str:
    return (minilm_report / "report.html").read_text(encoding="utf-8")


def section_of(html: str, anchor: str) -> str:
    """The HTML of one section of the page."""
    start = html.index(f'<section id="{anchor}">')
    return html[start : html.index("</section>", start)]


def test_tables_scroll_in_their_box_and_explain_their_headers(page_html: str) -> None:
    boxed = page_html.count('<div class="scroll"><table')
    claims = page_html.count('<table class="numbers claims">')  # a scroll box itself (CSS)
    assert boxed >= 8 and boxed + claims == page_html.count("<table")
    per_layer = section_of(page_html, "decomposition")
    for key in TABLE_KEYS:  # each column header carries the glossary's sentence
        title = escape(GLOSSARY[key])
        assert f'<th title="{title}"><a class="term" href="#term-{key}">{key}</a></th>' in per_layer
    glossary = section_of(page_html, "glossary")
    for key in TABLE_KEYS:  # ... and the glossary section defines it
        assert f'<dt id="term-{key}">{key}</dt><dd>{escape(GLOSSARY[key])}</dd>' in glossary


def test_plotly_is_inlined_once_compressed_and_figure_data_unpacks(page_html: str) -> None:
    """plotly.js appears once, as gzip of the very bundle plotly ships; packed figure data
    unpacks to JSON; nothing is fetched from a CDN."""
    assert page_html.count('id="plotly-gzip"') == 1
    assert "* plotly.js v" not in page_html and "cdn.plot.ly" not in page_html
    packed = re.search(r'id="plotly-gzip">([^<]*)</script>', page_html)
    assert packed is not None
    unpacked = gzip.decompress(base64.b64decode(packed.group(1))).decode("utf-8")
    assert unpacked == plotly.offline.get_plotlyjs()
    for kind, text in re.findall(
        r'<script type="(application/json|application/gzip-base64)" id="plot-[^"]*-data">'
        r"([^<]*)</script>",
        page_html,
    ):
        raw = text if kind == "application/json" else gzip.decompress(base64.b64decode(text))
        assert set(json.loads(raw)) == {"data", "layout"}


def test_each_figure_is_shown_once_with_a_line_on_how_to_read_it(
    minilm_report: Path, page_html: str
) -> None:
    figures = page_html.count("<figure")
    assert figures >= 8
    assert page_html.count('<span class="how">How to read this: ') == figures
    # the static twins of interactive figures stay in figures/ but not on the page
    assert (minilm_report / "figures" / "decomposition_shares.png").exists()
    assert "Variance shares per layer (static)" not in page_html
    assert "Cosine similarity between positions per layer</figcaption>" not in page_html
    images = re.findall(r'src="(data:image/png;base64,[^"]*)"', page_html)
    assert len(images) == len(set(images))


def test_each_papers_analyses_open_with_its_arxiv_link(page_html: str) -> None:
    for anchor, arxiv in (
        ("decomposition", "2310.04861"),
        ("attention", "2310.04861"),
        ("sphere", "2309.07315"),
        ("walk", "2308.10874"),
    ):
        body = section_of(page_html, anchor)
        assert f'href="https://arxiv.org/abs/{arxiv}"' in body.split("</p>")[0], anchor


def test_untrained_readout_is_flagged_and_norms_are_named_as_the_model_has_them(
    minilm_report: Path, tmp_path: Path
) -> None:
    """MiniLM has no LM head: its sphere and walk sections warn. Changing the recorded
    readout to a trained head removes the warning; an RMSNorm model is described as one."""
    page = (minilm_report / "report.html").read_text(encoding="utf-8")
    for anchor in ("sphere", "walk"):
        assert "This model has no trained output layer" in section_of(page, anchor)
    assert "is LayerNorm: projection onto the hyperplane" in section_of(page, "sphere")
    metrics = json.loads((minilm_report / "metrics.json").read_text())
    metrics["sphere"]["readout"] = metrics["sphere"]["trajectory"]["readout"] = (
        "final_norm then W_U"
    )
    metrics["sphere"]["norm_kind"] = "rmsnorm"
    (tmp_path / "metrics.json").write_text(json.dumps(metrics))
    html = sphere_section(Run(tmp_path))
    assert "no trained output layer" not in html
    assert "is RMSNorm: no centring" in html and "orthogonal to the all-ones" not in html


def test_sphere_section_shows_ffn_sub_updates_and_the_head_probe(page_html: str) -> None:
    body = section_of(page_html, "sphere")
    assert "FFN sub-updates: the value rows of largest norm" in body
    assert "push the prompt&#x27;s prediction" in body
    assert "the tokens W_VO writes for it" in body


def test_induction_table_renders_each_heads_split(tmp_path: Path) -> None:
    split = {
        "layer": 1,
        "head": 2,
        "score": 0.9,
        "induction": 0.9,
        "same_token": 0.05,
        "neighbours_local": 0.01,
        "neighbours_earlier": 0.02,
        "neighbours": 0.03,
        "other": 0.02,
    }
    induction = {"found": [[1, 2]], "top": [[1, 2]], "splits": [split], "threshold": 0.3}
    (tmp_path / "metrics.json").write_text(json.dumps({"induction": {**induction, "n": 8}}))
    html = attention_section(Run(tmp_path))
    assert "Induction heads: where each chosen head attends" in html
    assert "<td>1</td><td>2</td><td>0.900</td><td>0.050</td>" in html
    assert "1 head(s) score above 0.3" in html and "block 1 head 2" in html


def test_numbers_read_as_numbers() -> None:
    assert number(2070.4) == "2,070" and number(35921.1) == "35,921"
    assert number(0.1234) == "0.123" and number(1.5e-5) == "1.50e-05"
    values = np.array([0.1, 1 / 3, -2.5])
    figure = {"z": {"dtype": "f8", "bdata": base64.b64encode(values.tobytes()).decode()}}
    packed = rounded(figure)["z"]
    assert packed["dtype"] == "f4"
    again = np.frombuffer(base64.b64decode(packed["bdata"]), dtype="<f4")
    np.testing.assert_array_equal(again, values.astype(np.float32))
    assert rounded({"y": [1 / 3, 2]}) == {"y": [0.3333, 2]}


def test_page_fits_a_1400_px_window_with_no_console_errors(minilm_report: Path, browser) -> None:
    """Issue 32's check: Chromium at 1,400 px, the page no wider than the window, every
    figure drawn once plotly.js is unpacked, no console error."""
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto((minilm_report / "report.html").as_uri(), wait_until="load", timeout=180_000)
    page.wait_for_function(
        "[...document.querySelectorAll('div.plot')].every(d => d.querySelector('.main-svg'))",
        timeout=180_000,
    )
    assert page.evaluate("document.documentElement.scrollWidth") <= 1400
    wide = page.evaluate(
        "[...document.querySelectorAll('div.scroll')].some(d => d.scrollWidth > d.clientWidth)"
    )
    assert wide  # the per-layer tables are wider than the window: they scroll in their box
    assert errors == []
    page.close()


def test_the_page_keeps_fewer_layers_of_a_slider_figure() -> None:
    """A 12-layer heatmap slider cut to 6 evenly spread layers, the last kept and shown."""
    traces = [{"type": "heatmap", "z": [[i]], "visible": i == 11} for i in range(12)]
    steps = [
        {"label": f"L{i}", "args": [{"visible": [j == i for j in range(12)]}]} for i in range(12)
    ]
    figure = {"data": traces, "layout": {"sliders": [{"steps": steps, "active": 11}]}}
    cut = fewer_slider_steps(figure, 6)
    kept = [t["z"][0][0] for t in cut["data"]]
    assert kept == [0, 2, 4, 7, 9, 11]
    assert [t["visible"] for t in cut["data"]] == [False] * 5 + [True]
    slider = cut["layout"]["sliders"][0]
    assert [s["label"] for s in slider["steps"]] == [f"L{i}" for i in kept]
    assert slider["steps"][2]["args"][0]["visible"] == [False, False, True, False, False, False]
    assert slider["active"] == 5
    assert fewer_slider_steps(figure, 12) is figure


def test_claims_share_one_interval_note_and_the_run_names_its_model(minilm_report: Path) -> None:
    """Each claim's number points to one note saying how its interval is drawn (each way
    said once); the Run section names the model and says the time in readable units."""
    from geomlens.analyses.overview import claims_section, duration, run_section

    run = Run(minilm_report)
    claims = claims_section(run)
    table, note = claims.split("How each interval is drawn:")
    notes, cited = (
        re.findall(r"<sup>(\d+)</sup>", note),
        set(re.findall(r"<sup>(\d+)</sup>", table)),
    )
    assert claims.count("How each interval is drawn:") == 1 and "<th>interval</th>" not in claims
    assert cited and cited <= set(notes) and len(notes) == len(set(notes))
    manifest = run_section(run)
    assert "<td>model</td><td>minilm-l6</td>" in manifest and "time taken (s)" not in manifest
    assert [duration(s) for s in (42.4, 750, 4141)] == ["42 s", "12.5 min", "1 h 09 min"]
