"""Small HTML builders for report pages: every text goes through ``escape``.

Token strings, document text and prompts are untrusted: they reach the page only as
escaped text or inside JSON whose ``<``, ``>`` and ``&`` are written as unicode escapes,
so nothing from a corpus or a prompt can close a tag or start a script.
"""

from __future__ import annotations

import base64
import gzip
import html
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from geomlens.reporting.glossary import describe

SIGNIFICANT = 4
"""Significant digits of the floats in a page's figure data (what a reader can hover)."""

PAPERS = {
    "song": (
        "Song & Zhong (2023)",
        "2310.04861",
        "Uncovering hidden geometry in Transformers via disentangling position and context",
    ),
    "molina": (
        "Molina (2023)",
        "2309.07315",
        "Traveling Words: A Geometric Interpretation of Transformers",
    ),
    "singh": (
        "Singh (2023)",
        "2308.10874",
        "Analyzing Transformer Dynamics as Movement through Embedding Space",
    ),
}
"""The papers the analyses come from: key -> (citation, arXiv id, title)."""

PACK_ABOVE = 100_000
"""Figure data longer than this many characters is inlined gzip-compressed (base64); the
page's loader unpacks it with the browser's ``DecompressionStream``."""


def escape(value: Any) -> str:
    """Any value as HTML-escaped text (quotes included)."""
    return html.escape(str(value), quote=True)


class Html(str):
    """Markup already built from escaped text: ``number``, ``table`` and ``readings`` keep
    it as it is."""


def coded(pieces: Sequence[tuple[str, str | None]]) -> Html:
    """Text in which codes (a scheme label, a metric key) show as words: each (words, code)
    piece is its words, with its code, when it has one, as the tooltip a reader hovers."""
    return Html(
        "".join(
            escape(words)
            if code is None
            else f'<span class="coded" title="{escape(code)}">{escape(words)}</span>'
            for words, code in pieces
        )
    )


def number(value: Any, digits: int = 3) -> str:
    """A number for a table: integers as they are, floats to ``digits`` significant digits."""
    if value is None:
        return "–"
    if isinstance(value, Html):
        return value
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if value != 0 and (abs(value) < 1e-3 or abs(value) >= 1e7):
            return f"{value:.{digits - 1}e}"
        if abs(value) >= 10**digits:  # 2,070 rather than 2.07e+03
            return f"{value:,.0f}"
        return f"{value:.{digits}g}" if abs(value) >= 1 else f"{value:.{digits}f}"
    return escape(value)


def safe_json(data: Any) -> str:
    """JSON that is safe inside a ``<script>`` element (no ``</script>`` can appear)."""
    text = json.dumps(data, sort_keys=True, separators=(",", ":"), allow_nan=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def term(label: str, key: str | None = None) -> str:
    """A column header: the label, with the glossary's sentence for ``key`` (default: the
    label itself) as hover text and a link to the page's glossary."""
    text = describe(key or label)
    if text is None:
        return f"<th>{escape(label)}</th>"
    anchor = escape(f"term-{key or label}")
    return f'<th title="{escape(text)}"><a class="term" href="#{anchor}">{escape(label)}</a></th>'


def table(
    header: Sequence[str],
    rows: Sequence[Sequence[Any]],
    caption: str = "",
    keys: Sequence[str | None] | None = None,
) -> str:
    """A table of numbers and text (numbers formatted, text escaped) in a box that scrolls
    sideways when the table is wider than the page. A column whose header (or whose entry
    of ``keys``) is a metric key gets the glossary's sentence as hover text."""
    names = list(keys) if keys is not None else list(header)
    head = "".join(term(h, k) for h, k in zip(header, names, strict=True))
    body = "".join(
        "<tr>" + "".join(f"<td>{number(cell)}</td>" for cell in row) + "</tr>" for row in rows
    )
    cap = f"<caption>{escape(caption)}</caption>" if caption else ""
    return (
        f'<div class="scroll"><table class="numbers">{cap}<thead><tr>{head}</tr></thead>'
        f"<tbody>{body}</tbody></table></div>"
    )


def rounded(data: Any, digits: int = SIGNIFICANT) -> Any:
    """JSON data with every float cut to ``digits`` significant digits, and plotly's packed
    float64 arrays (``{"dtype": "f8", "bdata": ...}``) packed as float32 (figure data: the
    page shows values, and full doubles triple the bytes of a heatmap)."""
    if isinstance(data, float):
        return float(f"{data:.{digits}g}") if math.isfinite(data) else data
    if isinstance(data, list):
        return [rounded(x, digits) for x in data]
    if isinstance(data, dict):
        if data.get("dtype") == "f8" and isinstance(data.get("bdata"), str):
            values = np.frombuffer(base64.b64decode(data["bdata"]), dtype="<f8")
            packed = base64.b64encode(values.astype("<f4").tobytes()).decode("ascii")
            return {**data, "dtype": "f4", "bdata": packed}
        return {k: rounded(v, digits) for k, v in data.items()}
    return data


def paper(key: str, what: str) -> str:
    """The line that opens a paper's analyses: what they are, with the paper linked."""
    cite, arxiv, title = PAPERS[key]
    return (
        f'<p class="paper">{escape(what)} From {escape(cite)}, <a href="https://arxiv.org/abs/'
        f'{arxiv}" title="{escape(title)}">arXiv:{arxiv}</a>.</p>'
    )


def how_to_read(how: str) -> str:
    """The "how to read this" line under a figure ("" without one)."""
    return f'<span class="how">How to read this: {escape(how)}</span>' if how else ""


def image(path: Path, caption: str, how: str = "") -> str:
    """A PNG inlined as a data URI, with a caption and its "how to read this" line."""
    data = base64.b64encode(path.read_bytes()).decode("ascii")
    alt = escape(caption)
    return (
        f'<figure class="static"><img alt="{alt}" src="data:image/png;base64,{data}">'
        f"<figcaption>{alt}{how_to_read(how)}</figcaption></figure>"
    )


def plot(figure_json: dict[str, Any], plot_id: str, caption: str, how: str = "") -> str:
    """A container for an interactive plotly figure, with a caption and its "how to read
    this" line; its data (floats to ``SIGNIFICANT`` digits) sits in a JSON script tag."""
    alt = escape(caption)
    return (
        f'<figure class="interactive js-only"><div class="plot" id="{escape(plot_id)}" '
        f'data-source="{escape(plot_id)}-data"></div><figcaption>{alt}{how_to_read(how)}'
        f"</figcaption></figure>{data_script(f'{plot_id}-data', figure_json)}"
    )


def packed(text: str) -> str:
    """``text`` gzip-compressed (no timestamp: equal input, equal bytes), as base64."""
    raw = gzip.compress(text.encode("utf-8"), compresslevel=9, mtime=0)
    return base64.b64encode(raw).decode("ascii")


def data_script(element_id: str, figure_json: dict[str, Any]) -> str:
    """A figure's data (floats to ``SIGNIFICANT`` digits) in a script element: JSON, or
    gzip-compressed base64 above ``PACK_ABOVE`` characters."""
    text = safe_json(rounded(figure_json))
    if len(text) > PACK_ABOVE:
        kind, text = "application/gzip-base64", packed(text)
    else:
        kind = "application/json"
    return f'<script type="{kind}" id="{escape(element_id)}">{text}</script>'


def readings(lines: Sequence[str]) -> str:
    """One-line plain readings of the key numbers, as a list (``Html`` lines kept as they
    are, the others escaped)."""
    items = "".join(f"<li>{x if isinstance(x, Html) else escape(x)}</li>" for x in lines)
    return f'<ul class="readings">{items}</ul>'


def warning(text: str) -> str:
    """A caution the reader must see before the numbers it qualifies."""
    return f'<p class="warning">{escape(text)}</p>'


def section(anchor: str, title: str, body: str) -> str:
    """One navigable section of the page."""
    return f'<section id="{escape(anchor)}"><h2>{escape(title)}</h2>{body}</section>'
