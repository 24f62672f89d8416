"""Interactive plotly figures of numbers already in metrics.json, for report pages.

Each function returns a plotly figure as a plain dict (``{"data": ..., "layout": ...}``)
that the page embeds as JSON; nothing here computes a statistic.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import plotly.graph_objects as go

SHARE_COLOURS = {"share_pos": "#1f77b4", "share_ctx": "#ff7f0e", "share_resid": "#bbbbbb"}
PART_COLOURS = ("#1f77b4", "#9467bd", "#2ca02c", "#ff7f0e", "#bbbbbb")
VIEW_PATTERNS = ("", "/")
"""Bar fill of each view of position 0: solid for the first, hatched for the second."""


def as_dict(fig: go.Figure) -> dict[str, Any]:
    """The figure as JSON-ready data and layout (numpy arrays as lists)."""
    data: dict[str, Any] = fig.to_plotly_json()
    return {"data": data["data"], "layout": data["layout"]}


def _layout(title: str, xaxis: str, yaxis: str, **extra: Any) -> dict[str, Any]:
    return {
        "title": {"text": title},
        "xaxis": {"title": {"text": xaxis}},
        "yaxis": {"title": {"text": yaxis}},
        "height": 360,
        "margin": {"l": 60, "r": 20, "t": 50, "b": 50},
        "template": "plotly_white",
        **extra,
    }


def shares(views: Sequence[tuple[str, Sequence[dict[str, Any]]]]) -> dict[str, Any]:
    """Stacked variance shares per layer, one group of bars per view of position 0."""
    import plotly.graph_objects as go

    fig = go.Figure()
    for v, (view_name, rows) in enumerate(views):
        layers = [str(r["layer"]) for r in rows]
        for key, colour in SHARE_COLOURS.items():
            fig.add_bar(
                x=layers,
                y=[r[key] for r in rows],
                name=key.removeprefix("share_"),
                marker={"color": colour, "pattern": {"shape": VIEW_PATTERNS[v % 2]}},
                offsetgroup=str(v),
                legendgroup=view_name,
                legendgrouptitle={"text": f"{view_name} ({'solid' if v == 0 else 'hatched'})"},
            )
    fig.update_layout(**_layout("Variance shares by layer", "layer", "share of variance"))
    fig.update_layout(barmode="relative", legend={"groupclick": "toggleitem"})
    return as_dict(fig)


RANK_KEYS = ["pos_rank", "pos_rank95", "pos_stable_rank"]
"""The positional-rank lines drawn per layer (the report and the Python API)."""
GEOMETRY_KEYS = [
    "pos_low_freq",
    "pos_smoothness",
    "incoherence_mean",
    "incoherence_random",
    "ctx_cluster_ari",
]
"""The frequency, incoherence and clustering lines drawn per layer."""


def error_bars(
    rows: Sequence[dict[str, Any]], key: str, intervals: dict[str, dict[str, Any]] | None
) -> dict[str, Any] | None:
    """Plotly ``error_y`` of one line from the per-layer intervals ({layer: {key: [lo, hi]}})."""
    if not intervals:
        return None
    up: list[float | None] = []
    down: list[float | None] = []
    for r in rows:
        low, high = (intervals.get(str(r["layer"])) or {}).get(key) or (None, None)
        value = r.get(key)
        if low is None or high is None or value is None:
            up.append(None)
            down.append(None)
        else:
            up.append(high - value)
            down.append(value - low)
    if all(u is None for u in up):
        return None
    return {"type": "data", "symmetric": False, "array": up, "arrayminus": down}


def per_layer(
    rows: Sequence[dict[str, Any]],
    keys: Sequence[str],
    title: str,
    yaxis: str,
    log: bool = False,
    intervals: dict[str, dict[str, Any]] | None = None,
    names: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """One line per key over layers, with 95% intervals as error bars where given
    (``intervals``: layer -> key -> [low, high]); a line is named by its key, or by its
    words in ``names`` with the key kept in its hover text."""
    import plotly.graph_objects as go

    fig = go.Figure()
    for key in keys:
        words = (names or {}).get(key)
        fig.add_scatter(
            x=[r["layer"] for r in rows],
            y=[r.get(key) for r in rows],
            mode="lines+markers",
            name=words or key,
            error_y=error_bars(rows, key, intervals),
            hovertemplate=None
            if words is None
            else f"{words} ({key})<br>layer %{{x}}: %{{y}}<extra></extra>",
        )
    fig.update_layout(**_layout(title, "layer", yaxis))
    if log:
        fig.update_yaxes(type="log")
    return as_dict(fig)


def spectra(spectra_by_layer: dict[str, Sequence[float]], title: str) -> dict[str, Any]:
    """Singular values of the positional part, one line per layer, log scale."""
    import plotly.graph_objects as go
    from plotly.colors import sample_colorscale

    fig = go.Figure()
    ordered = sorted(spectra_by_layer.items(), key=lambda kv: int(kv[0]))
    colours = sample_colorscale("Viridis", max(len(ordered), 2))
    for i, (layer, values) in enumerate(ordered):
        top = values[0] if values else 0.0
        kept = [s for s in values if top > 0 and s > top * 1e-10]
        fig.add_scatter(
            y=kept,
            x=list(range(1, len(kept) + 1)),
            mode="lines",
            name=f"layer {layer}",
            line={"color": colours[i * (len(colours) - 1) // max(len(ordered) - 1, 1)]},
        )
    fig.update_layout(**_layout(title, "index", "singular value"))
    fig.update_yaxes(type="log")
    return as_dict(fig)


def attention_parts(
    blocks: Sequence[tuple[int, Sequence[str], Sequence[Sequence[float | None]]]],
) -> dict[str, Any]:
    """Each logit part's share of variance per head, stacked, one group of bars per block:
    ``blocks`` holds (block, part names, share[head][part]) for each block."""
    import plotly.graph_objects as go

    fig = go.Figure()
    for b, (layer, parts, share) in enumerate(blocks):
        heads = [f"b{layer}h{h}" for h in range(len(share))]
        for p, name in enumerate(parts):
            fig.add_bar(
                x=heads,
                y=[row[p] for row in share],
                name=name,
                marker={"color": PART_COLOURS[p % len(PART_COLOURS)]},
                legendgroup=name,
                showlegend=b == 0,
            )
    fig.update_layout(
        **_layout("Attention logit parts per head", "block and head", "share of logit variance")
    )
    fig.update_layout(barmode="relative")
    return as_dict(fig)


def bars(
    labels: Sequence[str],
    values: Sequence[float | None],
    title: str,
    yaxis: str,
    errors: Sequence[tuple[float, float]] | None = None,
    hover: Sequence[str] | None = None,
) -> dict[str, Any]:
    """Plain bars, with optional [low, high] error bars and a hover text per bar."""
    import plotly.graph_objects as go

    fig = go.Figure()
    error_y = None
    if errors is not None:
        error_y = {
            "type": "data",
            "symmetric": False,
            "array": [hi - (v or 0.0) for v, (_, hi) in zip(values, errors, strict=True)],
            "arrayminus": [(v or 0.0) - lo for v, (lo, _) in zip(values, errors, strict=True)],
        }
    fig.add_bar(
        x=list(labels),
        y=list(values),
        error_y=error_y,
        hovertext=None if hover is None else list(hover),
        hoverinfo=None if hover is None else "text+y",
    )
    fig.update_layout(**_layout(title, "", yaxis))
    return as_dict(fig)


def fewer_slider_steps(figure: dict[str, Any], keep: int) -> dict[str, Any]:
    """A slider figure (one trace per step, one visible) cut to ``keep`` evenly spread
    steps, the last kept: for the page, where each heatmap costs its bytes; the figure
    file keeps them all."""
    traces = figure["data"]
    sliders = (figure.get("layout") or {}).get("sliders") or []
    if len(traces) <= keep or len(sliders) != 1 or len(sliders[0]["steps"]) != len(traces):
        return figure
    n = len(traces)
    chosen = sorted({round(i * (n - 1) / (keep - 1)) for i in range(keep)})
    steps = [sliders[0]["steps"][i] for i in chosen]
    for k, step in enumerate(steps):
        step["args"] = [{"visible": [j == k for j in range(len(chosen))]}, *step["args"][1:]]
    data = [{**traces[i], "visible": i == chosen[-1]} for i in chosen]
    slider = {**sliders[0], "steps": steps, "active": len(chosen) - 1}
    return {"data": data, "layout": {**figure["layout"], "sliders": [slider]}}


Level = tuple[float, str]
"""A horizontal reference line: its value and its legend name."""


def _levels(fig: go.Figure, x: Sequence[Any], levels: Sequence[Level]) -> None:
    """Dashed horizontal lines across ``x`` (one legend entry each)."""
    if not x:
        return
    for value, name in levels:
        fig.add_scatter(
            x=[min(x), max(x)],
            y=[value, value],
            mode="lines",
            name=name,
            line={"dash": "dash", "width": 1, "color": "#777777"},
            hoverinfo="name",
        )


def noise_shares(
    rows: Sequence[dict[str, Any]],
    levels: Sequence[Level],
    intervals: dict[str, dict[str, Any]] | None = None,
    title: str = "Noise share of the positional estimate",
) -> dict[str, Any]:
    """``pos_noise_share`` per layer (one point each, 95% intervals as error bars where
    given) and the levels it is read against (``levels``, e.g. the 10% a claim needs)."""
    import plotly.graph_objects as go

    fig = go.Figure()
    layers = [r["layer"] for r in rows]
    fig.add_scatter(
        x=layers,
        y=[r.get("pos_noise_share") for r in rows],
        mode="lines+markers",
        name="noise share (pos_noise_share)",
        error_y=error_bars(rows, "pos_noise_share", intervals),
    )
    _levels(fig, layers, levels)
    fig.update_layout(**_layout(title, "layer", "share of pos's energy that is noise"))
    fig.update_yaxes(range=[0, 1])
    return as_dict(fig)


def outlier_ratios(
    found: Sequence[dict[str, Any]], k: float | None, title: str = "Outlier windows"
) -> dict[str, Any]:
    """One point per flagged (window, layer, position) of ``found`` ({"window", "layer",
    "position", "norm", "median"}): its hidden-state norm over the median over windows at
    that layer and position, log axis, one trace per window; the rule's ``k`` as a line."""
    import plotly.graph_objects as go

    fig = go.Figure()
    for window in sorted({f["window"] for f in found}):
        mine = [f for f in found if f["window"] == window]
        fig.add_scatter(
            x=[f["layer"] for f in mine],
            y=[f["norm"] / f["median"] if f["median"] else None for f in mine],
            mode="markers",
            name=f"window {window}",
            text=[f"position {f['position']}: norm {f['norm']:.4g}" for f in mine],
        )
    if k is not None:
        _levels(fig, [f["layer"] for f in found], [(k, f"k = {k:g} (the rule)")])
    fig.update_layout(**_layout(title, "layer", "norm / median norm over windows"))
    fig.update_yaxes(type="log")
    return as_dict(fig)


def ratio_per_layer(
    rows: Sequence[dict[str, Any]],
    key: str,
    over: str,
    name: str,
    levels: Sequence[Level],
    title: str,
    yaxis: str,
    intervals: dict[str, dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """``row[key] / row[over]`` per layer (None where either is missing or ``over`` is 0),
    with ``key``'s 95% interval divided by ``row[over]`` as error bars (``over`` a fixed
    baseline, not resampled), and reference ``levels``."""
    import plotly.graph_objects as go

    def ratio(row: dict[str, Any], value: Any) -> float | None:
        scale = row.get(over)
        return None if value is None or not scale else float(value) / float(scale)

    scaled = [{**r, key: ratio(r, r.get(key))} for r in rows]
    scaled_intervals: dict[str, dict[str, Any]] = {}
    for r in rows:
        found = ((intervals or {}).get(str(r["layer"])) or {}).get(key)
        if found:  # the interval scales like the number
            scaled_intervals[str(r["layer"])] = {key: [ratio(r, v) for v in found]}
    fig = go.Figure()
    layers = [r["layer"] for r in rows]
    fig.add_scatter(
        x=layers,
        y=[r[key] for r in scaled],
        mode="lines+markers",
        name=name,
        error_y=error_bars(scaled, key, scaled_intervals),
    )
    _levels(fig, layers, levels)
    fig.update_layout(**_layout(title, "layer", yaxis))
    return as_dict(fig)
