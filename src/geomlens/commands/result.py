"""What every API call returns: the run's numbers, its figures and its folder."""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from geomlens.errors import GeomlensError
from geomlens.io.runfolder import Run, open_run

if TYPE_CHECKING:
    import plotly.graph_objects as go


def _median_row(rows: list[dict[str, Any]]) -> dict[str, Any]:
    return rows[len(rows) // 2]


def headline(metrics: dict[str, Any]) -> list[tuple[str, Any]]:
    """A few numbers that say what the run found, as (label, value) pairs."""
    found: list[tuple[str, Any]] = []
    dec = metrics.get("decomposition")
    if dec:
        rows = dec["layers"] if dec["skip_first"] else dec["other_view"]["layers"]
        mid = _median_row(rows)
        found += [
            (f"share_pos, layer {mid['layer']} (position 0 skipped)", mid["share_pos"]),
            (f"share_ctx, layer {mid['layer']} (position 0 skipped)", mid["share_ctx"]),
            (f"pos_rank, layer {mid['layer']} (position 0 skipped)", mid["pos_rank"]),
        ]
    elif metrics.get("capture"):
        mid = _median_row(metrics["capture"]["layers"])
        found += [
            (f"share_pos, layer {mid['layer']}", mid["share_pos"]),
            (f"share_pos, layer {mid['layer']} (position 0 skipped)", mid["share_pos_skip_first"]),
        ]
    sphere = metrics.get("sphere")
    if sphere:
        found += [
            ("layer-norm identity, max relative error", sphere["identity"]["max_rel_err"]),
            ("logit-lens prediction", sphere["trajectory"]["prediction"]),
        ]
    walk = metrics.get("walk")
    if walk:
        found += [
            ("heads with negative self-bias", walk["kernels"]["negative_self_bias_fraction"]),
            ("per-head refactoring, max relative error", walk["refactor"]["max_rel_err"]),
        ]
    concepts = metrics.get("concepts") or {}
    if concepts.get("baseline"):
        base = concepts["baseline"]
        found += [(f"baseline {k}", base[k]) for k in ("acc", "acc_norm", "acc_bytes")]
        if concepts.get("ranking"):
            best = concepts["ranking"][0]
            key = concepts.get("headline", "normalised_vs_acc")
            found.append((f"best scheme ({best}), {key}", concepts["schemes"][best].get(key)))
    return found


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return html.escape(str(value))


@dataclass(frozen=True)
class Result:
    """One finished run of a command, read back from its folder.

    Attributes:
        command: the command that made it ("decompose", "sphere", ...).
        folder: the run folder (``manifest.json``, ``metrics.json``, ``figures/``, ...).
        metrics: every number, as in ``metrics.json``.

    ``figures`` (plotly figures by name, built on first use from the folder's saved
    numbers and figures), ``images`` (static PNGs by name), ``summary()`` (the lines the
    command line prints) and ``run`` (the ``Run`` with its manifest and statistics)
    complete it; in a notebook the result shows as a table of headline numbers followed
    by its figures.
    """

    command: str
    folder: Path
    metrics: dict[str, Any] = field(repr=False)

    @cached_property
    def run(self) -> Run:
        """The run folder read back (manifest, config, windows, statistics)."""
        return open_run(self.folder)

    @cached_property
    def figures(self) -> dict[str, go.Figure]:
        """Plotly figures by name, rebuilt from what the run saved:

        - capture: ``shares`` (variance shares per layer, both views of position 0);
        - decompose: ``shares``, ``ranks``, ``geometry``, ``spectra``, ``spiral`` (3-D
          positional spiral) and ``attention_parts`` (where the model's attention splits);
        - sphere: ``trajectory`` (3-D UMAP of the logit-lens trajectory);
        - walk: ``similarity_layers``, ``similarity_cos`` and ``similarity_dot``;
        - concepts: ``schemes`` (accuracy over the baseline's, with intervals);
        - report: all of those its stages computed.

        Gram matrices, heatmaps, head probes, walks and the other static figures are
        matplotlib PNGs: see ``images``.
        """
        from geomlens.report.run_figures import figures_of

        return figures_of(self.folder, self.metrics)

    @cached_property
    def images(self) -> dict[str, Path]:
        """The static PNG figures in ``figures/``, by file stem."""
        from geomlens.report.run_figures import images_of

        return images_of(self.folder)

    def summary(self) -> list[str]:
        """The lines ``geomlens <command>`` prints when it finishes."""
        from geomlens.commands.summaries import SUMMARIES

        return SUMMARIES[self.command](self.run)

    def headline(self) -> list[tuple[str, Any]]:
        """A few numbers that say what the run found, as (label, value) pairs."""
        return headline(self.metrics)

    def _repr_html_(self) -> str:
        rows = [("command", self.command), ("folder", str(self.folder)), *self.headline()]
        body = "".join(
            f"<tr><th style='text-align:left'>{html.escape(k)}</th><td>{_cell(v)}</td></tr>"
            for k, v in rows
        )
        parts = [f"<table>{body}</table>"]
        for i, (name, fig) in enumerate(self.figures.items()):
            # plotly.js once, from its CDN, with the first figure; the others reuse it.
            plot = fig.to_html(include_plotlyjs="cdn" if i == 0 else False, full_html=False)
            parts.append(f"<div title='{html.escape(name)}'>{plot}</div>")
        return "".join(parts)


def open_result(folder: str | Path) -> Result:
    """The ``Result`` of a finished run folder written by any command (or the API)."""
    from geomlens.commands.summaries import SUMMARIES

    run = open_run(folder)  # refuses a folder without a finished run
    command = run.manifest.get("command")
    if command not in SUMMARIES:
        raise GeomlensError(
            f"{run.path} holds a run of {command!r}, not one of {', '.join(SUMMARIES)}."
        )
    return result_of(str(command), run)


def result_of(command: str, run: Run) -> Result:
    """The ``Result`` of a run a command just returned (its ``Run`` reused)."""
    result = Result(command=command, folder=run.path, metrics=run.metrics)
    result.__dict__["run"] = run  # cached_property's slot: no second read of the manifest
    return result
