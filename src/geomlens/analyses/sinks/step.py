"""The attention-sink step: reads what the capture's "sinks" tap filled, writes the "sinks"
block of metrics.json and the heat map ``figures/sinks_rate.png``. See docs/sinks.md."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from geomlens.analyses.base import StageRequest
from geomlens.analyses.common.applicable import not_applicable
from geomlens.analyses.sinks import figures
from geomlens.analyses.sinks.compute import EPSILON, MAX_KEYS, SINK_WINDOWS, SinkResult, SinkTap
from geomlens.analyses.sinks.schema import KEY, SinkHead, SinkLayer, SinkMetrics
from geomlens.corpus import Windows
from geomlens.io.progress import Step, quiet
from geomlens.models.view import ModelView
from geomlens.pipeline.taps import filled_tap
from geomlens.reporting.figures import drawn, rendered_in_background, save_later
from geomlens.runs.runfolder import RunFolder
from geomlens.stats import DecompositionAccumulator
from geomlens.stats.intervals import percentiles, resamples
from geomlens.stats.rounding import sig


def sink_windows() -> int:
    """The windows whose attention the capture reads for the sinks (its "sinks" tap)."""
    return SINK_WINDOWS


def _rounded(a: np.ndarray) -> list[list[float]]:
    return [[sig(float(x)) for x in row] for row in a]


def mean_interval(values: np.ndarray, seed: int) -> tuple[float | None, float | None]:
    """The 95% bootstrap interval of the mean of ``values`` (windows resampled)."""
    if values.size < 2:
        return None, None
    lo, hi = percentiles(values[resamples(values.size, seed)].mean(1))
    return sig(lo), sig(hi)


def layer_rows(found: SinkResult) -> list[SinkLayer]:
    """Per layer: its modal sink position, the windows' sinks and their token ids."""
    head_mean = found.alpha.mean(1)  # [L, K]
    rows = []
    for layer in range(found.positions.shape[1]):
        pos = found.positions[:, layer]
        values, counts = np.unique(pos, return_counts=True)
        modal = int(values[np.argmax(counts)])
        order = np.argsort(-head_mean[layer])[:3]
        rows.append(
            SinkLayer(
                layer=layer,
                position=modal,
                share=sig(float(counts.max() / pos.size)),
                alpha=sig(float(found.sink_alpha[:, layer].mean())),
                first_token=sig(float(head_mean[layer, 0])),
                positions=[int(p) for p in pos],
                token_ids=[int(t) for t in found.tokens[:, layer]],
                top=[[int(j), sig(float(head_mean[layer, j]))] for j in order],
            )
        )
    return rows


def elsewhere(found: SinkResult) -> list[SinkHead]:
    """Heads whose mean importance peaks at a key other than the first, above epsilon
    (a causal model's keys searched in the first half of the window, as for the sinks)."""
    span = max(1, found.alpha.shape[-1] // 2) if found.causal else found.alpha.shape[-1]
    best = found.alpha[..., :span].argmax(-1)  # [L, H]
    out = []
    for layer, head in zip(*np.nonzero(best), strict=True):
        value = float(found.alpha[layer, head, best[layer, head]])
        if value > EPSILON:
            out.append(
                SinkHead(
                    layer=int(layer),
                    head=int(head),
                    position=int(best[layer, head]),
                    alpha=sig(value),
                )
            )
    return out


def metrics_block(found: SinkResult, seed: int) -> SinkMetrics:
    """The metrics.json block of the tap's result."""
    low, high = mean_interval(found.window_rates, seed)
    rates64 = found.window_rates_64
    low64, high64 = (None, None) if rates64 is None else mean_interval(rates64, seed)
    return SinkMetrics(
        n_windows=found.n_windows,
        length=found.length,
        causal=found.causal,
        epsilon=EPSILON,
        sink_rate=sig(found.sink_rate),
        sink_rate_low=low,
        sink_rate_high=high,
        sink_rate_64=None if rates64 is None else sig(float(rates64.mean())),
        sink_rate_64_low=low64,
        sink_rate_64_high=high64,
        first_token=_rounded(found.alpha[..., 0]),
        rate_map=_rounded(found.above),
        first_token_64=None if found.alpha_64 is None else _rounded(found.alpha_64[..., 0]),
        rate_map_64=None if found.above_64 is None else _rounded(found.above_64),
        layers=layer_rows(found),
        elsewhere=elsewhere(found),
        max_keys=MAX_KEYS,
    )


@dataclass(frozen=True)
class SinkAnalysis:
    """The step on a finished capture (an ``Analysis``)."""

    seed: int
    step: Step = quiet

    def __call__(
        self, folder: RunFolder, view: ModelView, windows: Windows, acc: DecompositionAccumulator
    ) -> None:
        self.step("attention sinks")
        skipped = not_applicable(view, "the attention sinks")
        if skipped is not None:
            folder.merge_metrics(KEY, skipped)
            return
        # built as the capture built it (its state holds a row per window it may read)
        found = filled_tap(folder, "sinks", SinkTap(view, sink_windows())).finalize()
        block = metrics_block(found, self.seed)
        folder.merge_metrics(KEY, block.to_dict())
        if drawn():
            with rendered_in_background():
                save_later(figures.rate_figure(block), folder.path / "figures" / "sinks_rate.png")


def sink_stage(request: StageRequest, step: Step) -> SinkAnalysis:
    """The report's attention-sink stage."""
    return SinkAnalysis(request.config.seed, step)
