"""A ``Result`` shown in a notebook (``_repr_html_``) inlines plotly.js once per session:
the first display carries it, every later display (of the same result or another) draws
with it instead of inlining its megabytes again."""

from __future__ import annotations

from pathlib import Path

import plotly.graph_objects as go
import pytest

from geomlens.analyses import result as result_module
from geomlens.analyses.result import Result

PLOTLY_BANNER = "* plotly.js v"
"""The licence banner that opens the inlined plotly.js bundle."""


def shown(folder: Path, n_figures: int) -> Result:
    """A Result of ``n_figures`` small figures and no headline numbers."""
    result = Result(command="capture", folder=folder, metrics={})
    result.__dict__["figures"] = {
        f"fig{i}": go.Figure(go.Scatter(x=[0, 1], y=[i, i + 1])) for i in range(n_figures)
    }
    return result


@pytest.fixture
def fresh_session(monkeypatch):
    """A session in which no result has been displayed yet."""
    monkeypatch.setitem(result_module.PLOTLY_JS, "inlined", False)


def test_plotly_js_is_inlined_once_per_session(tmp_path, fresh_session):
    first = shown(tmp_path, 3)._repr_html_()
    again = shown(tmp_path, 3)._repr_html_()
    other = shown(tmp_path / "other", 2)._repr_html_()
    assert first.count(PLOTLY_BANNER) == 1
    assert again.count(PLOTLY_BANNER) == 0 and other.count(PLOTLY_BANNER) == 0
    assert first.count("plotly-graph-div") == 3 and again.count("plotly-graph-div") == 3
    assert other.count("plotly-graph-div") == 2
    # the bundle is the page's bulk: later displays are a small fraction of the first
    assert len(first) > 1_000_000 and len(again) < len(first) / 50


def test_no_figure_inlines_nothing_and_the_next_figure_inlines_it(tmp_path, fresh_session):
    empty = shown(tmp_path, 0)._repr_html_()
    assert PLOTLY_BANNER not in empty and "capture" in empty
    assert shown(tmp_path, 1)._repr_html_().count(PLOTLY_BANNER) == 1
