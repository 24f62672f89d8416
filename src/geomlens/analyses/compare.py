"""``geomlens compare``: the per-layer position/context numbers of several runs side by side.

Like Table 1 of Song & Zhong (2023): per model, the relative norm of the positional part,
its ScreeNOT rank and the share of singular-value mass it explains; here for every layer
and with the variance shares beside them. Reads the "decomposition" section of each run
(``decompose`` or ``report``) and writes ``compare.html`` (self-contained) and
``compare.csv``.
"""

from __future__ import annotations

import csv
import re
import statistics
from pathlib import Path
from typing import Any

from geomlens.analyses.concepts.scheme_words import with_words
from geomlens.analyses.decomposition.schema import run_published, skip_first_layers
from geomlens.analyses.overview import published_tables
from geomlens.analyses.registry import run_claims
from geomlens.errors import GeomlensError
from geomlens.io.files import damaged, replacing, write_text_atomic
from geomlens.reporting import interactive as plots
from geomlens.reporting.html import coded, escape, plot, readings, section, table
from geomlens.reporting.page import LOADER, STYLE, plotly_element
from geomlens.runs.runfolder import RERUN, Run, open_run

COLUMNS = (
    *("share_pos", "share_ctx", "rel_norm_pos", "rel_norm_pos_centred"),
    *("pos_rank", "pos_explained", "pos_low_freq"),
)

CLAIM_KEYS = ("id", "paper", "verdict", "number", "low", "high", "threshold", "published")
"""The columns of compare_claims.csv after the run."""


def label(run: Run) -> str:
    """A run's name in the table: its model, then its folder."""
    model = run.manifest.get("model", {}).get("name", run.config.get("model"))
    return f"{model} ({run.path.name})"


SHARES = ("share_pos", "share_ctx", "pos_explained", "pos_low_freq")
"""Columns that are fractions: each lies in [0, 1]."""

NON_NEGATIVE = ("rel_norm_pos", "rel_norm_pos_centred", "pos_rank")
"""Columns that are norms or counts: none is below 0."""

ROUNDING = 1e-9
"""How far outside its range a stored number may lie by rounding."""


def row_problem(row: Any, n_layers: int | None) -> str | None:
    """What is wrong with one layer row of the decomposition section, or None."""
    if not isinstance(row, dict) or type(row.get("layer")) is not int:
        return "its decomposition section is not a list of layers"
    layer = row["layer"]
    if layer < 0 or (n_layers is not None and layer > n_layers):
        top = f"0 to {n_layers}" if n_layers is not None else "0 or more"
        return f"it lists layer {layer}, but the model's layers are {top}"
    for key in (*SHARES, *NON_NEGATIVE):
        value = row.get(key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return f"layer {layer}'s {key} is {value!r}, not a number"
        high = 1.0 + ROUNDING if key in SHARES else float("inf")
        if not -ROUNDING <= value <= high:
            shown = "[0, 1]" if key in SHARES else "0 or more"
            return f"layer {layer}'s {key} is {value}, outside {shown}"
    return None


def check_decomposition(run: Run) -> None:
    """The decomposition section of a run's metrics.json has the shape and the ranges
    compare reads: layers of the model, each once; shares in [0, 1]; norms and ranks not
    negative. One sentence naming the file as damaged otherwise."""
    if "decomposition" not in run.metrics:
        return
    rows: list[Any]
    try:
        rows = skip_first_layers(run.metrics)
    except (AttributeError, TypeError):
        rows = [None]
    n_layers = (run.manifest.get("model") or {}).get("n_layers")
    n_layers = n_layers if type(n_layers) is int else None
    seen: set[int] = set()
    for row in rows:
        why = row_problem(row, n_layers)
        if why is None and row["layer"] in seen:
            why = f"it lists layer {row['layer']} twice"
        if why is not None:
            raise damaged(run.path / "metrics.json", why, RERUN)
        seen.add(row["layer"])


def load_runs(paths: list[str | Path]) -> list[Run]:
    """Open each run; refuse one without a decomposition, or one given twice, naming it."""
    if len(paths) < 1:
        raise GeomlensError("compare needs at least one run folder.")
    given: dict[Path, str | Path] = {}
    for p in paths:
        key = Path(p).resolve()
        if key in given:
            raise GeomlensError(
                f"{p} is given twice (also as {given[key]}); give each run folder once."
            )
        given[key] = p
    runs: list[Run] = []
    for p in paths:
        run = open_run(p)
        check_decomposition(run)
        if not skip_first_layers(run.metrics):
            raise GeomlensError(
                f"{p} holds no position/context decomposition; give folders of "
                "'geomlens decompose' or 'geomlens report'."
            )
        runs.append(run)
    return runs


def long_rows(runs: list[Run]) -> list[list[Any]]:
    """One row per run and layer: run, layer, relative depth, then COLUMNS."""
    rows = []
    for run in runs:
        layers = skip_first_layers(run.metrics)
        depth = max(len(layers) - 1, 1)
        for i, r in enumerate(layers):
            rows.append([label(run), r["layer"], round(i / depth, 4), *[r.get(c) for c in COLUMNS]])
    return rows


def summary_rows(runs: list[Run]) -> list[list[Any]]:
    """Table 1: per run, medians over layers (position 0 skipped)."""
    rows = []
    for run in runs:
        layers = skip_first_layers(run.metrics)
        med = {
            c: statistics.median([r[c] for r in layers if r.get(c) is not None] or [float("nan")])
            for c in COLUMNS
        }
        rows.append([label(run), len(layers), *[med[c] for c in COLUMNS]])
    return rows


def claim_cell(claim: dict[str, Any]) -> str:
    """One run's claim as "verdict: number", with the published number when there is one."""
    cell = f"{claim['verdict']}: {claim['value']}"
    return cell + (f" (published: {claim['published']})" if claim.get("published") else "")


def claims_table(runs: list[Run]) -> tuple[list[str], list[list[Any]]]:
    """The papers' claims side by side: one row per claim, one "verdict: number" column per
    run (a claim a run does not make, such as an encoder-decoder's decoder stack, is "–")."""
    found = [{c["id"]: c for c in run_claims(run.metrics, run.manifest)} for run in runs]
    order = list(dict.fromkeys(cid for claims in found for cid in claims))
    rows = []
    for cid in order:
        first = next(claims[cid] for claims in found if cid in claims)
        cells = [
            coded(with_words(claim_cell(claims[cid]))) if cid in claims else "–" for claims in found
        ]
        rows.append([first["claim"], first["paper"], *cells])
    return ["claim", "paper", *(label(r) for r in runs)], rows


def claim_rows(runs: list[Run]) -> list[list[Any]]:
    """compare_claims.csv: one row per run and claim, with its number and interval."""
    return [
        [label(run), *(c.get(k) for k in CLAIM_KEYS)]
        for run in runs
        for c in run_claims(run.metrics, run.manifest)
    ]


FORMULA_STARTS = ("=", "+", "-", "@")
"""First characters that make a spreadsheet read a cell as a formula."""
PLAIN_NUMBER = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?")


def spreadsheet_cell(value: Any) -> Any:
    """``value`` as a CSV cell a spreadsheet shows as text: a text cell that starts like a
    formula (``=``, ``+``, ``-``, ``@``) gets a leading single quote, as spreadsheets
    expect; numbers, and text that is a plain number (``-0.5``), stay as they are."""
    if (
        isinstance(value, str)
        and value.startswith(FORMULA_STARTS)
        and not PLAIN_NUMBER.fullmatch(value)
    ):
        return "'" + value
    return value


def write_csv(path: Path, header: list[str], rows: list[list[Any]]) -> None:
    """A CSV whose text cells a spreadsheet shows as text, written whole or not at all."""
    with replacing(path) as tmp, open(tmp, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow([spreadsheet_cell(c) for c in header])
        writer.writerows([spreadsheet_cell(c) for c in row] for row in rows)


def write_compare(paths: list[str | Path], out: str | Path) -> Path:
    """Write compare.html, compare.csv (every layer) and compare_claims.csv into ``out``;
    return the HTML path."""
    runs = load_runs(paths)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    long = long_rows(runs)
    header = ["run", "layer", "depth", *COLUMNS]
    write_csv(out / "compare.csv", header, long)
    write_csv(out / "compare_claims.csv", ["run", *CLAIM_KEYS], claim_rows(runs))
    figures = "".join(
        plot(depth_figure(runs, key), f"plot-{key}", f"{words} by relative depth", DEPTH_HOW)
        for key, words in DEPTH_FIGURES.items()
    )
    body = section(
        "runs",
        "The runs",
        readings([shape_sentence(runs)])
        + table(
            ["run", "model", "corpus", "C (windows)", "T (tokens each)", "command"], run_rows(runs)
        ),
    )
    body += section(
        "table1",
        "Medians over layers (position 0 skipped)",
        table(["run", "layers", *COLUMNS], summary_rows(runs)),
    )
    body += section("claims", "The papers' claims, run by run", table(*claims_table(runs)))
    published = [(run, run_published(run.metrics, run.manifest)) for run in runs]
    if any(p for _, p in published):
        body += section(
            "published",
            "Published numbers for the same model",
            "".join(f"<h3>{escape(label(r))}</h3>{published_tables(p)}" for r, p in published if p),
        )
    body += section("figures", "By relative depth", figures)
    body += section("layers", "Every layer", table(header, long))
    title = "geomlens comparison: " + ", ".join(label(r) for r in runs)
    page = (
        '<!DOCTYPE html><html lang="en" class="no-js"><head><meta charset="utf-8">'
        f"<title>{escape(title)}</title><style>{STYLE}</style>{plotly_element()}</head><body>"
        '<nav><a href="#runs">Runs</a><a href="#table1">Table 1</a><a href="#claims">Claims</a>'
        '<a href="#figures">Figures</a><a href="#layers">Every layer</a></nav>'
        f"<main><h1>{escape(title)}</h1>{body}</main><script>{LOADER}</script></body></html>"
    )
    return write_text_atomic(out / "compare.html", page)


DEPTH_FIGURES = {
    "share_pos": "Positional share of the variance",
    "rel_norm_pos": "Relative norm of the positional part",
    "pos_rank": "ScreeNOT rank of the positional part",
}
"""The numbers drawn against relative depth, with the words that name them."""

DEPTH_HOW = (
    "one line per run, its layers spread from 0 (the embeddings) to 1 (the last layer) so "
    "that models of different depth line up; position 0 skipped."
)


def run_rows(runs: list[Run]) -> list[list[Any]]:
    """What each run read: its name, model, corpus, C windows of T tokens, command."""
    return [
        [
            label(run),
            (run.manifest.get("model") or {}).get("name", run.config.get("model")),
            run.config.get("corpus"),
            run.config.get("contexts"),
            run.config.get("length"),
            run.manifest.get("command"),
        ]
        for run in runs
    ]


def shape_sentence(runs: list[Run]) -> str:
    """Whether the runs read the same C windows of T tokens, in one sentence; where they
    differ, in which and why their numbers are then not like for like."""
    shapes = {
        "C": ("the windows", [run.config.get("contexts") for run in runs]),
        "T": ("the tokens per window", [run.config.get("length") for run in runs]),
    }
    if any(value is None for _, values in shapes.values() for value in values):
        return "C and T are not recorded for every run: compare their windows before their numbers."
    differ = {k: v for k, v in shapes.items() if len(set(v[1])) > 1}
    if not differ:
        c, t = shapes["C"][1][0], shapes["T"][1][0]
        return f"Every run reads the same C = {c} windows of T = {t} tokens."
    said = " and ".join(
        f"in {k}, {what} ("
        + ", ".join(f"{value} in {label(run)}" for value, run in zip(values, runs, strict=True))
        + ")"
        for k, (what, values) in differ.items()
    )
    return (
        f"The runs differ {said}: their numbers are not like for like, since a positional "
        "rank is bounded by the T positions counted and the positional estimate's sampling "
        "noise falls as C grows; read a difference between them with that in mind."
    )


def depth_figure(runs: list[Run], key: str) -> dict[str, Any]:
    """One line per run: ``key`` against relative depth (0 = embeddings, 1 = last layer)."""
    import plotly.graph_objects as go

    fig = go.Figure()
    for run in runs:
        layers = skip_first_layers(run.metrics)
        depth = max(len(layers) - 1, 1)
        fig.add_scatter(
            x=[i / depth for i in range(len(layers))],
            y=[r.get(key) for r in layers],
            mode="lines+markers",
            name=label(run),
        )
    fig.update_layout(
        title={"text": DEPTH_FIGURES.get(key, key)},
        xaxis={"title": {"text": "relative depth"}},
        height=340,
    )
    return plots.as_dict(fig)
