"""The report's default concept task: the first of an ordered preference list on which the
model's answers use their context.

The concept claims ask how much of what a context adds a scheme's vectors keep
(``gain.retained_gain``); on a task where the model scores the same without its context
there is nothing to keep, and no claim can be decided. So the report does not fix one
task: it walks ``REPORT_TASKS`` in order, scores each available task's baseline and its
no-context control on the report's items, and takes the first whose baseline beats the
control by the paired test (``gain.context_test``). When none does, it takes the first
available one and the claims say that no task qualified. The scores of the chosen task
are handed to the concept run, so the choice costs nothing more when the first task
qualifies (SmolLM2: step_inference, 0.53 against 0.33 on the first 40 items, p = 0.008).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import resources

import numpy as np
import numpy.typing as npt

from geomlens.analyses.concepts.baseline import (
    BATCH_TOKENS,
    ChoiceScores,
    Prepared,
    baseline_scores,
    no_context_scores,
    prepare,
)
from geomlens.analyses.concepts.gain import context_test
from geomlens.analyses.concepts.schema import ContextTestRecord, TaskTried
from geomlens.analyses.concepts.tasks import load_task
from geomlens.errors import GeomlensError
from geomlens.models.view import ModelView

REPORT_TASKS = (
    "goal_step_wikihow/step_inference",
    "goal_step_wikihow/goal_inference",
    "timedial",
)
"""The report's concept tasks in order of preference: short wikiHow contexts that decide the
answer first (SmolLM2's baseline beats its no-context control on both), timedial last (its
long dialogues leave SmolLM2 at its no-context level)."""

PACKAGED = {
    "goal_step_wikihow/step_inference": "step_inference_200.json",
    "timedial": "timedial_200.json",
}
"""The slices packaged with geomlens (first 200 items, geomlens/data/NOTICE-bigbench.md),
read when no data folder holds the whole task."""


def task_spec(name: str) -> str | None:
    """What ``load_task`` reads for the task ``name``: the name itself when a data folder
    holds it, else its packaged slice, else None (not on this machine)."""
    try:
        load_task(name)
        return name
    except GeomlensError:
        packaged = PACKAGED.get(name)
        return None if packaged is None else str(resources.files("geomlens") / "data" / packaged)


def report_tasks() -> list[tuple[str, str | None]]:
    """(name, what ``load_task`` reads or None) of every task of ``REPORT_TASKS``."""
    return [(name, task_spec(name)) for name in REPORT_TASKS]


def correct_acc(
    prepared: Sequence[Prepared], scores: Sequence[ChoiceScores]
) -> npt.NDArray[np.bool_]:
    """[n] whether each item's choice by summed log-likelihood (acc) is the gold one."""
    gold = np.array([p.item.gold for p in prepared])
    return np.array([s.predictions()["acc"] for s in scores]) == gold


@dataclass(frozen=True)
class Choice:
    """The task the report's concept stage runs, why, and its scores.

    Attributes:
        spec: what ``load_task`` reads.
        tried: the preference list up to the chosen task, each with its test.
        scored: the chosen task's baseline and no-context scores of the report's items.
    """

    spec: str
    tried: list[TaskTried]
    scored: tuple[list[ChoiceScores], list[ChoiceScores]]


def choose_task(
    view: ModelView,
    limit: int,
    seed: int,
    *,
    tasks: Sequence[tuple[str, str | None]] | None = None,
    batch_tokens: int = BATCH_TOKENS,
    step: Callable[[str], None] | None = None,
) -> Choice:
    """The first task of ``tasks`` (default ``report_tasks()``) whose baseline beats its
    no-context control on its first ``limit`` items (zero-shot); the first available one when
    none does."""
    tried: list[TaskTried] = []
    first: Choice | None = None
    for name, spec in report_tasks() if tasks is None else tasks:
        if spec is None:
            tried.append(TaskTried(task=name, available=False))
            continue
        if step is not None:
            step(f"does {name} use its context? the baseline and the choices alone")
        task = load_task(spec)
        prepared = prepare(view, task, task.take(limit), 0, seed)
        base = baseline_scores(view, prepared, batch_tokens=batch_tokens)
        none = no_context_scores(view, prepared, batch_tokens=batch_tokens)
        test = context_test(correct_acc(prepared, base), correct_acc(prepared, none))
        record = ContextTestRecord.from_dict(test.to_dict())
        tried.append(TaskTried(task=name, available=True, test=record))
        if first is None:
            first = Choice(spec, tried, (base, none))
        if test.qualifies:
            return Choice(spec, tried, (base, none))
    if first is None:
        raise GeomlensError(
            "none of the report's concept tasks is on this machine "
            f"({', '.join(REPORT_TASKS)}); give one with --task."
        )
    return Choice(first.spec, tried, first.scored)
