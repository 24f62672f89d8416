"""``report.html``: one self-contained page of a run folder's numbers and figures.

Everything is inlined (plotly.js, styles, data, PNGs as data URIs), so the file opens
offline and can be mailed. Tables, readings and static images need no JavaScript; the
interactive figures are drawn by the inlined plotly.js when scripts run. The page lays out
the sections of ``report/registry.py`` that the run has.
"""

from __future__ import annotations

from pathlib import Path

import plotly.offline

from geomlens.io.files import write_text_atomic
from geomlens.io.runfolder import Run, open_run
from geomlens.report.html import escape, section
from geomlens.report.registry import REGISTRY

SECTIONS = tuple((s.anchor, s.title) for s in REGISTRY)

STYLE = """
body{font-family:system-ui,sans-serif;margin:0;color:#222;line-height:1.45}
nav{position:sticky;top:0;background:#1f3a5f;padding:.4em 1em;z-index:10}
nav a{color:#fff;margin-right:1.1em;text-decoration:none;font-size:.95em}
nav a:hover{text-decoration:underline}
main{max-width:1200px;margin:0 auto;padding:0 1.2em 3em}
section{padding-top:3em;margin-top:-1.5em}
h1{margin:.6em 0 .2em}
table.numbers{border-collapse:collapse;margin:.8em 0;font-size:.88em}
table.numbers td,table.numbers th{border:1px solid #ccc;padding:.2em .5em;text-align:right}
table.numbers td:first-child,table.numbers th:first-child{text-align:left}
table.claims td,table.claims th{text-align:left!important}
table.numbers caption{text-align:left;font-weight:600;padding:.3em 0}
ul.readings li{margin:.2em 0}
figure{margin:1em 0}
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
function drawAll(){
  document.querySelectorAll('div.plot').forEach(function(div){
    var data=JSON.parse(document.getElementById(div.dataset.source).textContent);
    Plotly.newPlot(div,data.data,data.layout,{responsive:true,displaylogo:false});
  });
}
if(document.readyState==='loading'){document.addEventListener('DOMContentLoaded',drawAll);}
else{drawAll();}
"""


def stack_note(run: Run, anchor: str) -> str:
    """For an encoder-decoder, which stack the section's numbers come from ("" otherwise)."""
    stacks = run.metrics.get("stacks") or {}
    if anchor == "attention":
        anchor = "attention" if "attention" in stacks else "induction"
    if anchor not in stacks:
        return ""
    return f'<p class="note stack">Stack: {escape(stacks[anchor])}.</p>'


def build_page(run: Run) -> str:
    """The whole page as one HTML string."""
    shown = [s for s in REGISTRY if s.present(run)]
    nav = "".join(f'<a href="#{s.anchor}">{escape(s.title)}</a>' for s in shown)
    body = "".join(
        section(s.anchor, s.title, stack_note(run, s.anchor) + s.build(run)) for s in shown
    )
    model = run.manifest.get("model", {}).get("name", run.config.get("model"))
    title = f"geomlens report: {model} on {run.config.get('corpus')}"
    return (
        '<!DOCTYPE html><html lang="en" class="no-js"><head><meta charset="utf-8">'
        f"<title>{escape(title)}</title><style>{STYLE}</style>"
        f"<script>{plotly.offline.get_plotlyjs()}</script></head><body>"
        f'<nav id="nav">{nav}</nav><main><h1>{escape(title)}</h1>'
        '<noscript><p class="note">JavaScript is off: the tables, readings and static '
        "figures below are the full summary; the interactive figures need scripts.</p></noscript>"
        f"{body}</main><script>{LOADER}</script></body></html>"
    )


def write_report(path: str | Path) -> Path:
    """Write ``report.html`` into a finished run folder (atomically) and return its path."""
    run = open_run(path)
    return write_text_atomic(run.path / "report.html", build_page(run))
