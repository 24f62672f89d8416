"""What every API call returns: the run's numbers, its figures and its folder."""

from __future__ import annotations

import html
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from geomlens.errors import GeomlensError
from geomlens.runs.runfolder import Run, open_run

if TYPE_CHECKING:
    import pandas as pd
    import plotly.graph_objects as go

    from geomlens.config.run import CaptureRunConfig
    from geomlens.models.view import ModelView


def headline(metrics: dict[str, Any]) -> list[tuple[str, Any]]:
    """A few numbers that say what the run found, as (label, value) pairs: each registered
    analysis's (``analyses/registry.py``), in order."""
    from geomlens.analyses import registry

    return registry.headline(metrics)


ROW_KEYS = ("layer", "block")
"""A list of dicts whose first row has one of these keys is a per-layer (or per-block) table."""

PREFERRED = ("decomposition", "capture")
"""The table ``Result.layers()`` gives when none is named, first found first."""


def layer_tables(metrics: dict[str, Any], path: str = "") -> dict[str, list[dict[str, Any]]]:
    """Every per-layer table in ``metrics``, by its path of keys joined with "/" (e.g.
    "decomposition/layers", "decomposition/other_view/layers", "capture/layers")."""
    found: dict[str, list[dict[str, Any]]] = {}
    for key, value in metrics.items():
        where = f"{path}/{key}" if path else str(key)
        if isinstance(value, dict):
            found.update(layer_tables(value, where))
        elif (
            isinstance(value, list)
            and value
            and isinstance(value[0], dict)
            and any(k in value[0] for k in ROW_KEYS)
        ):
            found[where] = value
    return found


def pandas() -> Any:
    """The pandas module, or one sentence saying how to install it."""
    from geomlens.io.extras import available, install_hint

    if not available("pandas"):
        raise GeomlensError(
            f"per-layer tables are pandas DataFrames, and pandas is not installed: "
            f"{install_hint('pandas')}."
        )
    import pandas

    return pandas


PLOTLY_JS = {"inlined": False}
"""Whether a displayed ``Result`` has inlined plotly.js in this Python session (a notebook's
kernel): the first display carries it (about 4.9 MB; offline, no CDN) and every later one
draws with it, instead of inlining it again."""


def plotly_js_once() -> bool:
    """True the first time in this session (inline plotly.js now), False after."""
    first = not PLOTLY_JS["inlined"]
    PLOTLY_JS["inlined"] = True
    return first


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

    ``layers()`` (a per-layer table as a pandas DataFrame, the metric glossary as its
    column descriptions), ``figures`` (plotly figures by name, built on first use from the
    folder's saved numbers and figures), ``images`` (static PNGs by name), ``summary()``
    (the lines the command line prints) and ``run`` (the ``Run`` with its manifest and
    statistics) complete it; in a notebook the result shows as a table of headline numbers
    followed
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
        from geomlens.analyses.registry import figures_of

        return figures_of(self.folder, self.metrics)

    @cached_property
    def images(self) -> dict[str, Path]:
        """The static PNG figures in ``figures/``, by file stem."""
        from geomlens.reporting.saved_figures import images_of

        return images_of(self.folder)

    def summary(self) -> list[str]:
        """The lines ``geomlens <command>`` prints when it finishes."""
        from geomlens.analyses import registry

        return registry.summary_lines(self.command, self.run)

    def headline(self) -> list[tuple[str, Any]]:
        """A few numbers that say what the run found, as (label, value) pairs."""
        return headline(self.metrics)

    def tables(self) -> list[str]:
        """The names of the run's per-layer tables, for ``layers(name)``."""
        return list(layer_tables(self.metrics))

    def layers(self, name: str | None = None) -> pd.DataFrame:
        """A per-layer table of the run as a pandas DataFrame, one row per layer.

        ``name`` is one of ``tables()`` ("decomposition/layers", "capture/layers", ...);
        by default the decomposition's primary view, else the capture's. Each column's
        meaning (the metric glossary, ``geomlens.reporting.glossary``) is in
        ``df.attrs["descriptions"]`` (column -> sentence); ``glossary(df.columns)`` gives
        them as a table.
        """
        pd = pandas()
        tables = layer_tables(self.metrics)
        if not tables:
            raise GeomlensError(f"the {self.command} run in {self.folder} has no per-layer table.")
        if name is None:
            preferred = [f"{p}/layers" for p in PREFERRED if f"{p}/layers" in tables]
            name = preferred[0] if preferred else next(iter(tables))
        if name not in tables:
            raise GeomlensError(
                f"the {self.command} run has no table {name!r}; it has {', '.join(tables)}."
            )
        frame = pd.DataFrame(tables[name])
        frame.attrs["table"] = name
        frame.attrs["descriptions"] = self.glossary(frame.columns).to_dict()
        return frame

    def glossary(self, keys: Iterable[str] | None = None) -> pd.Series:
        """What each metric key means (one sentence each), as a pandas Series indexed by
        key: of ``keys``, or of every column of every per-layer table of the run."""
        from geomlens.reporting.glossary import descriptions

        pd = pandas()
        if keys is None:
            keys = dict.fromkeys(k for rows in layer_tables(self.metrics).values() for k in rows[0])
        return pd.Series(descriptions(list(keys)), name="description", dtype=object)

    def _repr_html_(self) -> str:
        rows = [("command", self.command), ("folder", str(self.folder)), *self.headline()]
        body = "".join(
            f"<tr><th style='text-align:left'>{html.escape(k)}</th><td>{_cell(v)}</td></tr>"
            for k, v in rows
        )
        parts = [f"<table>{body}</table>"]
        # plotly.js once per session, inlined with the first figure shown (works offline);
        # every later figure, of this result or another, reuses it
        for name, fig in self.figures.items():
            plot = fig.to_html(include_plotlyjs=plotly_js_once(), full_html=False)
            parts.append(f"<div title='{html.escape(name)}'>{plot}</div>")
        return "".join(parts)


def open_result(folder: str | Path) -> Result:
    """The ``Result`` of a finished run folder written by any command (or the API)."""
    from geomlens.analyses import registry

    run = open_run(folder)  # refuses a folder without a finished run
    command = run.manifest.get("command")
    known = registry.command_summaries()
    if command not in known:
        names = ", ".join(known)
        raise GeomlensError(f"{run.path} holds a run of {command!r}, not one of {names}.")
    return result_of(str(command), run)


def result_of(command: str, run: Run) -> Result:
    """The ``Result`` of a run a command just returned (its ``Run`` reused)."""
    result = Result(command=command, folder=run.path, metrics=run.metrics)
    result.__dict__["run"] = run  # cached_property's slot: no second read of the manifest
    return result


def run_result(
    config: CaptureRunConfig, runner: Callable[..., Run], view: ModelView | None, **own: Any
) -> Result:
    """The ``Result`` of ``runner`` (``run_capture``, ``run_decompose``, ...) called on
    ``config``, the command's ``own`` arguments and ``view`` (and ``auto`` with
    ``--contexts auto``)."""
    from geomlens.config.options import AUTO, auto_budget, auto_max_contexts
    from geomlens.pipeline.request import AutoContexts

    if config.auto_contexts:
        own["auto"] = AutoContexts(
            auto_budget(AUTO, config.budget), auto_max_contexts(AUTO, config.max_contexts)
        )
    done = runner(
        config.capture,
        config.out,
        view=view,
        progress=config.progress,
        checkpoint_every_s=config.checkpoint_every,
        engine=config.engine,
        figures=config.figures,
        **own,
    )
    return result_of(config.command, done)
