"""Progress lines for the analysis steps that run after a capture.

A capture has its own progress bar; the analyses after it (tens of seconds each on a
laptop) say which step they are on, so that a long command is never silent for long.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable

from tqdm.auto import tqdm

Step = Callable[[str], None]
"""Called with a step's name as the step starts."""


def quiet(step: str) -> None:
    """A step reporter that says nothing."""


class StepLines:
    """Prints ``PREFIX: step (N s)`` on stderr as each step starts, N counted from the first."""

    def __init__(self, prefix: str, enabled: bool = True) -> None:
        self.prefix, self.enabled = prefix, enabled
        self.started: float | None = None
        self.current = ""

    def __call__(self, step: str) -> None:
        now = time.perf_counter()
        self.current = step
        if self.started is None:
            self.started = now
        if self.enabled:
            elapsed = now - self.started
            print(f"{self.prefix}: {step} ({elapsed:.0f} s)", file=sys.stderr, flush=True)


def step_bar(step: Step, total: int, unit: str = "item") -> tqdm:
    """A bar for the work of the step ``step`` last announced (``total`` items, layers or
    tokens, with the time left); silent unless ``step`` prints (a ``StepLines``)."""
    if isinstance(step, StepLines):
        return item_bar(total, f"{step.prefix}: {step.current}", step.enabled, unit)
    return item_bar(total, "", False, unit)


def token_bar(total: int, initial: int, desc: str, enabled: bool) -> tqdm:
    """The capture's progress bar, in tokens (the in-process and the Ray engine share it)."""
    return tqdm(
        total=total,
        initial=initial,
        unit="tok",
        unit_scale=True,
        desc=desc,
        disable=not enabled,
        dynamic_ncols=True,
    )


def item_bar(total: int, desc: str, enabled: bool, unit: str = "item") -> tqdm:
    """A progress bar over ``total`` items (or other units), with tqdm's estimate of the
    time left; for the steps of the concept tests (the baseline, each scheme)."""
    return tqdm(
        total=total,
        unit=unit,
        desc=desc,
        disable=not enabled,
        dynamic_ncols=True,
        leave=True,
    )
