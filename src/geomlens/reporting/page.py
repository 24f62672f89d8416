"""``report.html``: one self-contained page of a run folder's numbers and figures.

Everything is inlined (plotly.js, styles, data, PNGs as data URIs), so the file opens
offline and can be mailed. Tables, readings and static images need no JavaScript; the
interactive figures are drawn by the inlined plotly.js when scripts run. plotly.js is
inlined once, gzip-compressed (1.5 MB instead of 4.8 MB), and unpacked by the browser's own
``DecompressionStream``. The page lays out the sections it is given (the analyses' registry's, in
order) that the run has, then a glossary of the metric keys its tables use.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from geomlens.io.files import write_text_atomic
from geomlens.reporting.glossary import describe
from geomlens.reporting.html import escape, packed, section
from geomlens.reporting.section import Section
from geomlens.runs.runfolder import Run, open_run
from geomlens.runs.stored import RECORD

STYLE = """
body{font-family:system-ui,sans-serif;margin:0;color:#222;line-height:1.45}
nav{position:sticky;top:0;background:#1f3a5f;padding:.4em 1em;z-index:10}
nav a{color:#fff;margin-right:1.1em;text-decoration:none;font-size:.95em}
nav a:hover{text-decoration:underline}
main{max-width:1200px;margin:0 auto;padding:0 1.2em 3em}
section{padding-top:3em;margin-top:-1.5em}
h1{margin:.6em 0 .2em}
div.scroll{max-width:100%;overflow-x:auto;margin:.8em 0}
table.numbers{border-collapse:collapse;margin:0;font-size:.88em}
a.term{color:inherit;text-decoration:underline dotted}
span.coded{text-decoration:underline dotted;cursor:help}
pre{white-space:pre-wrap;overflow-wrap:anywhere}
.how{display:block;color:#444;font-style:italic}
.paper{font-size:.92em;color:#333}
.warning{background:#fff4e0;border-left:4px solid #d08a00;padding:.4em .8em}
dl.glossary dt{font-family:monospace;margin-top:.5em}
dl.glossary dd{margin-left:1.5em}
table.numbers td,table.numbers th{border:1px solid #ccc;padding:.2em .5em;text-align:right}
table.numbers td:first-child,table.numbers th:first-child{text-align:left}
table.claims td,table.claims th{text-align:left!important}
table.claims{display:block;max-width:100%;overflow-x:auto}
table.numbers caption{text-align:left;font-weight:600;padding:.3em 0}
ul.readings li{margin:.2em 0}
figure{margin:1em 0}
figure{max-width:100%}
figure img{max-width:100%;border:1px solid #eee}
figcaption{font-size:.85em;color:#555}
.plot{min-height:360px}
.verdict-reproduced{color:#176e2c;font-weight:600}
.verdict-not{color:#a3261b;font-weight:600}
.verdict-unsure{color:#8a5a00;font-weight:600}
.no-js .js-only{display:none}
.note{color:#555;font-size:.9em}
"""


LOADER = """
document.documentElement.classList.remove('no-js');
async function unpack(element){
  var bytes=Uint8Array.from(atob(element.textContent.trim()),function(c){return c.charCodeAt(0);});
  var stream=new Blob([bytes]).stream().pipeThrough(new DecompressionStream('gzip'));
  return await new Response(stream).text();
}
async function drawAll(){
  for(const div of document.querySelectorAll('div.plot')){
    var source=document.getElementById(div.dataset.source);
    var text=source.type==='application/gzip-base64'?await unpack(source):source.textContent;
    var data=JSON.parse(text);
    Plotly.newPlot(div,data.data,data.layout,{responsive:true,displaylogo:false});
  }
}
async function loadPlotly(){
  var packed=document.getElementById('plotly-gzip');
  if(!packed||typeof DecompressionStream==='undefined'){
    document.querySelectorAll('.js-only').forEach(function(e){e.style.display='none';});
    return;
  }
  var code=document.createElement('script');
  code.textContent=await unpack(packed);
  document.head.appendChild(code);
  await drawAll();
}
loadPlotly();
"""
"""Unpacks plotly.js (a browser without DecompressionStream hides the interactive figures;
the tables, readings and static figures remain), then draws every figure."""


@functools.cache
def packed_plotly() -> str:
    """plotly.js, gzip-compressed, as base64 (computed once per process)."""
    import plotly.offline

    return packed(plotly.offline.get_plotlyjs())


def plotly_element() -> str:
    """The script element holding plotly.js as ``LOADER`` looks for it (gzip, base64, id
    "plotly-gzip"): every page that draws figures carries it once, with ``LOADER`` last."""
    return f'<script type="application/gzip-base64" id="plotly-gzip">{packed_plotly()}</script>'


def metric_keys(data: Any) -> Iterator[str]:
    """Every dictionary key anywhere in ``data`` (the metrics' names)."""
    if isinstance(data, dict):
        for key, value in data.items():
            yield str(key)
            yield from metric_keys(value)
    elif isinstance(data, list):
        for value in data:
            yield from metric_keys(value)


def glossary_section(run: Run) -> str:
    """What each metric key of this run means (the tables' headers link here)."""
    keys = sorted({k for k in metric_keys(run.metrics) if describe(k)})
    entries = "".join(
        f'<dt id="term-{escape(k)}">{escape(k)}</dt><dd>{escape(describe(k))}</dd>' for k in keys
    )
    return (
        '<p class="note">Each metric key of this run, in one sentence; hover over a table '
        f'header for the same text.</p><dl class="glossary">{entries}</dl>'
    )


def stack_note(run: Run, anchor: str) -> str:
    """For an encoder-decoder, which stack the section's numbers come from ("" otherwise)."""
    stacks = run.metrics.get("stacks") or {}
    if anchor == "attention":
        anchor = "attention" if "attention" in stacks else "induction"
    if anchor not in stacks:
        return ""
    return f'<p class="note stack">Stack: {escape(stacks[anchor])}.</p>'


def stored_note(run: Run) -> str:
    """What the run folder keeps of its statistics and what was dropped ("" when the
    statistics are stored whole)."""
    path = run.path / RECORD
    if not path.exists():
        return ""
    record = json.loads(path.read_text(encoding="utf-8"))
    return (
        f'<p class="note">Stored statistics ({escape(record["file"])}, '
        f"{record.get('bytes', 0) / 1e6:.0f} MB): float32 for "
        f"{escape(', '.join(record['float32']))}; dropped: "
        f"{escape(', '.join(record['dropped']))} ({escape(record['why'])}).</p>"
    )


RunClaims = Callable[[dict[str, Any], dict[str, Any]], list[dict[str, Any]]]
"""(metrics, manifest) -> the run's claim records (computed for a run made before they
were kept)."""


def build_page(run: Run, sections: Sequence[Section], run_claims: RunClaims) -> str:
    """The whole page as one HTML string: the ``sections`` the run has, in order (a run
    made before its claims were kept gets them from ``run_claims``)."""
    if "claims" not in run.metrics:
        run.metrics["claims"] = run_claims(run.metrics, run.manifest)
    shown = [s for s in sections if s.present(run)]
    nav = "".join(f'<a href="#{s.anchor}">{escape(s.title)}</a>' for s in shown)
    nav += '<a href="#glossary">Glossary</a>'
    notes = {"run": stored_note(run)}
    body = "".join(
        section(
            s.anchor, s.title, stack_note(run, s.anchor) + s.build(run) + notes.get(s.anchor, "")
        )
        for s in shown
    )
    body += section("glossary", "Glossary", glossary_section(run))
    model = run.manifest.get("model", {}).get("name", run.config.get("model"))
    title = f"geomlens report: {model} on {run.config.get('corpus')}"
    return (
        '<!DOCTYPE html><html lang="en" class="no-js"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{escape(title)}</title><style>{STYLE}</style>"
        f"{plotly_element()}</head><body>"
        f'<nav id="nav">{nav}</nav><main><h1>{escape(title)}</h1>'
        '<noscript><p class="note">JavaScript is off: the tables, readings and static '
        "figures below are the full summary; the interactive figures need scripts (their "
        "data is also in the run folder's figures/).</p></noscript>"
        f"{body}</main><script>{LOADER}</script></body></html>"
    )


def write_report(path: str | Path, sections: Sequence[Section], run_claims: RunClaims) -> Path:
    """Write ``report.html`` of ``sections`` into a finished run folder (atomically) and
    return its path."""
    run = open_run(path)
    return write_text_atomic(run.path / "report.html", build_page(run, sections, run_claims))
