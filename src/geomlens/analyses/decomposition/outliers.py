"""Outlier windows: windows whose hidden state at some position past the first is
massive where the other windows' are not, found from the norms the capture kept.

Some decoders put a massive activation on a token besides the first in a few windows
(SmolLM2-135M: about 1% of BBC windows carry one at position 1, hidden-state norm about
17,000 against a median of about 160). One such window is a large share of the positional
mean at its position and of the spread between groups of windows: at 128 windows, two of
them set SmolLM2's mutual coherence of pos and ctx at layer 15 (0.95 with them, 0.46
without). The rule
that flags them follows the median-multiple criterion of Sun, Chen, Kolter & Liu (2024),
"Massive Activations in Large Language Models" (arXiv:2402.17762, Section 2), who count an
activation as massive when its magnitude is above 100 and roughly a thousand times the
median magnitude in its hidden state. Here the quantity is a whole hidden state's norm and
the median is over windows at the same layer and position (one massive feature in a
d-vector raises the norm far less than the feature itself):

    flag (window c, layer l, position t >= 1) when ||h[c, t]|| > k * median_c' ||h[c', t]||

with k = ``K`` = 25. Position 0 is left out: it is massive in every window (the view
without position 0 handles it), so a median over windows does not single it out anyway.

k was chosen on the bundled models (128 BBC windows of 128 tokens): in MiniLM-L6 no window
passes 4.1 times the median anywhere; in SmolLM2-135M the windows kept reach at most 13.5
(layers 3-9, where states about ten times the usual norm turn up in many windows), while
the two outlier windows reach 53 and 102 (position 1, layers 12-28). k = 10 would set
aside 59 of the 128 windows for those common early-layer states; any k between 14 and 52
sets aside exactly the two.

A flagged window is taken out of every layer's sums exactly: the sums are linear in the
windows, so the flagged windows are rerun through the model into an accumulator of their
own and subtracted (``DecompositionAccumulator.without``). See docs/decomposition.md,
"Outlier windows", for the ratios measured on the bundled models.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from geomlens.stats.decomposition import DecompositionAccumulator

K = 25.0
"""How many times the median over windows a norm must exceed to flag its window (chosen
in the gap between 13.5 and 53 measured on SmolLM2: see the module's docstring)."""

MIN_WINDOWS = 8
"""Fewer windows give no outlier check: the median of a handful is no baseline."""

RULE = (
    "a window is set aside when its hidden-state norm at some position t >= 1 of some "
    "layer exceeds k times the median over windows of the norms at that layer and "
    "position (after the median-multiple criterion of Sun et al. 2024, arXiv:2402.17762)"
)

NO_NORMS = (
    "the capture kept no per-window norms (saved before they existed), so no window was checked"
)


@dataclass(frozen=True)
class Outlier:
    """One flagged (window, layer, position): its norm and the median over windows there."""

    window: int
    layer: int
    position: int
    norm: float
    median: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "window": self.window,
            "layer": self.layer,
            "position": self.position,
            "norm": self.norm,
            "median": self.median,
        }


def norm_ratios(norms: npt.NDArray[np.floating]) -> tuple[np.ndarray, np.ndarray]:
    """(ratios [L, C, T-1], medians [L, T-1]): each norm at positions 1.. over the median
    over windows at its layer and position (inf where that median is 0 and the norm not).

    Args:
        norms: [L, C, T] ||h[c, t]|| per layer.
    """
    rest = np.asarray(norms, dtype=np.float64)[:, :, 1:]
    medians = np.median(rest, axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = rest / medians[:, None, :]
    ratios[np.isnan(ratios)] = 0.0  # 0 / 0: a state of norm zero where the median is zero
    return ratios, medians


def find_outliers(
    norms: npt.NDArray[np.floating], layers: Sequence[int], k: float = K
) -> list[Outlier]:
    """Every (window, layer, position >= 1) whose norm exceeds k times the median over
    windows at that layer and position, ordered by window, layer, position; none with
    fewer than ``MIN_WINDOWS`` windows.

    Args:
        norms: [L, C, T] ||h[c, t]|| per layer (``DecompositionAccumulator.window_norms``).
        layers: the L hidden-state layers of ``norms``.
        k: the multiple of the median.
    """
    norms = np.asarray(norms, dtype=np.float64)
    if norms.shape[1] < MIN_WINDOWS or norms.shape[2] < 2:
        return []
    ratios, medians = norm_ratios(norms)
    found = []
    for li, c, t in zip(*np.nonzero(ratios > k), strict=True):
        found.append(
            Outlier(
                window=int(c),
                layer=int(layers[li]),
                position=int(t) + 1,
                norm=float(norms[li, c, t + 1]),
                median=float(medians[li, t]),
            )
        )
    return sorted(found, key=lambda o: (o.window, o.layer, o.position))


def ratio_summary(
    norms: npt.NDArray[np.floating], windows: Sequence[int]
) -> dict[str, float | None]:
    """How clearly the rule separates: the largest ratio to the median (over layers and
    positions >= 1) of any window kept, and the smallest such largest ratio of the windows
    set aside (None where there are none)."""
    ratios, _ = norm_ratios(norms)
    if ratios.size == 0:
        return {"largest_ratio_kept": None, "smallest_ratio_set_aside": None}
    per_window = ratios.max(axis=(0, 2))
    aside = np.zeros(per_window.size, dtype=bool)
    aside[list(windows)] = True
    return {
        "largest_ratio_kept": float(per_window[~aside].max()) if (~aside).any() else None,
        "smallest_ratio_set_aside": float(per_window[aside].min()) if aside.any() else None,
    }


@dataclass(frozen=True)
class SetAside:
    """The outlier check of one run.

    Attributes:
        clean: the accumulator without the flagged windows (the input one when none).
        kept: [C'] the windows ``clean``'s rows are, indices into the run's windows.
        outliers: every flagged (window, layer, position).
        record: what metrics.json keeps of the check beside them (``set_aside``).
        checked: whether the capture kept the norms the check reads.
    """

    clean: DecompositionAccumulator
    kept: np.ndarray
    outliers: list[Outlier]
    record: dict[str, Any]
    checked: bool = True

    @property
    def windows(self) -> list[int]:
        """The windows set aside, in order (none where ``clean`` is the input)."""
        return [int(c) for c in self.record.get("windows_set_aside", [])]


def set_aside(
    acc: DecompositionAccumulator,
    rerun: Callable[[list[int]], DecompositionAccumulator],
    k: float = K,
) -> SetAside:
    """Find the outlier windows of a complete accumulator and take them out exactly.

    Args:
        acc: the run's accumulator, every window seen once.
        rerun: windows -> an accumulator of ``acc``'s grid fed only those windows
            (``capturing.capture.capture_contexts``): what is subtracted.
        k: the multiple of the median.

    Returns:
        The accumulator without them (``acc`` itself when there are none, or when the
        capture kept no norms), and the record for metrics.json: the rule and k, the
        windows set aside, how clearly the rule separates them (``ratio_summary``), and
        the largest relative difference between the rerun's norms and the capture's
        (0 when the rerun reproduced the capture's hidden states bit for bit).
    """
    everything = np.arange(acc.n_contexts)
    if acc.window_norms is None:
        unchecked = {"k": k, "rule": RULE, "windows_set_aside": [], "why": NO_NORMS}
        return SetAside(acc, everything, [], unchecked, checked=False)
    norms = acc.window_norms.cpu().numpy()
    found = find_outliers(norms, acc.layers, k)
    windows = sorted({o.window for o in found})
    record: dict[str, Any] = {
        "k": k,
        "rule": RULE,
        "min_windows": MIN_WINDOWS,
        "windows_set_aside": windows,
        **ratio_summary(norms, windows),
    }
    if acc.n_contexts < MIN_WINDOWS:
        record["why"] = f"fewer than {MIN_WINDOWS} windows: none was checked"
    if not windows:
        return SetAside(acc, everything, [], record)
    if acc.n_contexts - len(windows) < 2:
        record["why"] = f"setting {len(windows)} aside would leave fewer than 2 windows"
        record["windows_set_aside"] = []
        return SetAside(acc, everything, found, record)
    removed = rerun(windows)
    record["rerun_max_rel_diff"] = rerun_difference(acc, removed, windows)
    kept = np.setdiff1d(everything, windows)
    return SetAside(acc.without(removed), kept, found, record)


def rerun_difference(
    acc: DecompositionAccumulator, removed: DecompositionAccumulator, windows: Sequence[int]
) -> float | None:
    """The largest relative difference between the norms of ``windows`` as the rerun saw
    them and as the capture did: how exactly the subtraction takes them out (None without
    norms)."""
    if acc.window_norms is None or removed.window_norms is None:
        return None
    rows = list(windows)
    first = acc.window_norms[:, rows].double().cpu()
    again = removed.window_norms[:, rows].double().cpu()
    scale = float(first.abs().max())
    return float((first - again).abs().max()) / scale if scale > 0 else 0.0
