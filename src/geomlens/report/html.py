"""Small HTML builders for report pages: every text goes through ``escape``.

Token strings, document text and prompts are untrusted: they reach the page only as
escaped text or inside JSON whose ``<``, ``>`` and ``&`` are written as unicode escapes,
so nothing from a corpus or a prompt can close a tag or start a script.
"""

from __future__ import annotations

import base64
import html
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any


def escape(value: Any) -> str:
    """Any value as HTML-escaped text (quotes included)."""
    return html.escape(str(value), quote=True)


def number(value: Any, digits: int = 3) -> str:
    """A number for a table: integers as they are, floats to ``digits`` significant digits."""
    if value is None:
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if value != 0 and (abs(value) < 1e-3 or abs(value) >= 1e5):
            return f"{value:.{digits - 1}e}"
        return f"{value:.{digits}g}" if abs(value) >= 1 else f"{value:.{digits}f}"
    return escape(value)


def safe_json(data: Any) -> str:
    """JSON that is safe inside a ``<script>`` element (no ``</script>`` can appear)."""
    text = json.dumps(data, sort_keys=True, separators=(",", ":"), allow_nan=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def table(header: Sequence[str], rows: Sequence[Sequence[Any]], caption: str = "") -> str:
    """A table of numbers and text (numbers formatted, text escaped)."""
    head = "".join(f"<th>{escape(h)}</th>" for h in header)
    body = "".join(
        "<tr>" + "".join(f"<td>{number(cell)}</td>" for cell in row) + "</tr>" for row in rows
    )
    cap = f"<caption>{escape(caption)}</caption>" if caption else ""
    return (
        f'<table class="numbers">{cap}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'
    )


def image(path: Path, caption: str) -> str:
    """A PNG inlined as a data URI, with a caption."""
    data = base64.b64encode(path.read_bytes()).decode("ascii")
    alt = escape(caption)
    return (
        f'<figure class="static"><img alt="{alt}" src="data:image/png;base64,{data}">'
        f"<figcaption>{alt}</figcaption></figure>"
    )


def plot(figure_json: dict[str, Any], plot_id: str, caption: str) -> str:
    """A container for an interactive plotly figure; its data sits in a JSON script tag."""
    alt = escape(caption)
    return (
        f'<figure class="interactive js-only"><div class="plot" id="{escape(plot_id)}" '
        f'data-source="{escape(plot_id)}-data"></div><figcaption>{alt}</figcaption></figure>'
        f'<script type="application/json" id="{escape(plot_id)}-data">'
        f"{safe_json(figure_json)}</script>"
    )


def readings(lines: Sequence[str]) -> str:
    """One-line plain readings of the key numbers, as a list."""
    return '<ul class="readings">' + "".join(f"<li>{escape(x)}</li>" for x in lines) + "</ul>"


def section(anchor: str, title: str, body: str) -> str:
    """One navigable section of the page."""
    return f'<section id="{escape(anchor)}"><h2>{escape(title)}</h2>{body}</section>'
