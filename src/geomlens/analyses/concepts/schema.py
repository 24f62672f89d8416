"""The "concepts" block of metrics.json, as the concepts step writes it and its section and
summary read it (``ConceptsMetrics.of(metrics)``). Accuracies are shares of items (unitless,
in [0, 1]); a scheme's normalised numbers are its accuracy over the baseline's."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Self

from geomlens.analyses.common.block import Block

HEADLINE = "normalised_vs_acc"
"""The scheme number a run ranks by when its block names none (older runs)."""


@dataclass(frozen=True, kw_only=True)
class TaskRecord(Block):
    name: str
    format: str | None = None
    """"bigbench", "hellaswag", ..."""
    fingerprint: str | None = None
    """sha256 of the task's items."""


@dataclass(frozen=True, kw_only=True)
class NoContext(Block):
    """The baseline's scorings with the context left out (the no-context control)."""

    acc: float | None = None
    acc_norm: float | None = None
    acc_bytes: float | None = None
    acc_ci: list[float] | None = None
    """[low, high], 95% (likewise ``acc_norm_ci``, ``acc_bytes_ci``)."""
    acc_norm_ci: list[float] | None = None
    acc_bytes_ci: list[float] | None = None


@dataclass(frozen=True, kw_only=True)
class ContextTestRecord(Block):
    """The baseline against its no-context control over the same items (``gain.context_test``):
    only a task where the baseline is above the control can decide a concept claim."""

    n: int
    baseline_only: int
    """Items the baseline answers right and the control wrong."""
    no_context_only: int
    """Items the control answers right and the baseline wrong."""
    p: float
    """Exact two-sided McNemar p-value."""
    alpha: float
    qualifies: bool
    """The baseline is above the control and p < alpha."""
    method: str | None = None


@dataclass(frozen=True, kw_only=True)
class TaskTried(Block):
    """One task of the report's ordered preference list, as the report's default chose."""

    task: str
    """Its name."""
    available: bool
    """Whether this machine holds it (the data folder, or a file packaged with geomlens)."""
    test: ContextTestRecord | None = None
    """Its context test on the report's items (absent when not available or not reached)."""


@dataclass(frozen=True, kw_only=True)
class Baseline(Block):
    """The model's own next-token readout on the task (lm-eval's three scorings)."""

    n: int | None = None
    """Items scored."""
    acc: float | None
    """By summed log-likelihood of each choice."""
    acc_norm: float | None = None
    """By log-likelihood per character."""
    acc_bytes: float | None = None
    """By log-likelihood per UTF-8 byte."""
    chance: float
    """Expected accuracy of a uniform guess."""
    acc_ci: list[float] | None = None
    """[low, high], 95% (likewise ``acc_norm_ci``, ``acc_bytes_ci``)."""
    acc_norm_ci: list[float] | None = None
    acc_bytes_ci: list[float] | None = None
    no_context: NoContext | None = None
    """The same scorings with the context left out."""
    context_test: ContextTestRecord | None = None
    """acc against the no-context control's acc, paired over items (absent in older runs)."""


@dataclass(frozen=True, kw_only=True)
class SchemeResult(Block):
    """One concept scheme's scores (the keys vary with the scheme: read with ``value``)."""

    key: str | None = None
    """The scheme's short hash (its folder under concepts/)."""
    acc: float | None = None
    normalised_vs_acc: float | None = None
    """acc over the baseline's acc."""
    normalised_vs_acc_norm: float | None = None
    """acc over the baseline's acc_norm."""
    loglik_max_abs_diff_vs_baseline: float | None = None
    """Largest |log-likelihood - the baseline's| over choices (a pyramidal scheme's; nats)."""
    retained_gain: float | None = None
    """(acc - no-context acc) / (baseline acc - no-context acc): the share of what the
    context adds that the scheme keeps (``gain.retained_gain``; its interval in
    ``retained_gain_ci``, an end None when unbounded)."""
    degenerate: str | None = None
    """Why the concept stage flagged the scheme as degenerate (absent: it did not)."""

    def value(self, name: str) -> Any:
        """The number ``name`` (a declared field, or one the scheme alone writes)."""
        return getattr(self, name) if name in self.__dataclass_fields__ else self.extra.get(name)

    def interval(self, name: str) -> tuple[float | None, float | None]:
        """The 95% interval [low, high] of the number ``name`` ((None, None) if none)."""
        low, high = self.extra.get(f"{name}_ci") or (None, None)
        return low, high


@dataclass(frozen=True, kw_only=True)
class ConceptsMetrics(Block):
    """The "concepts" block: Singh's concept-space tests on one task."""

    unsupported: str | None = None
    """Why nothing was measured (then every other field is None)."""
    task: TaskRecord | None = None
    shots: int | None = None
    seed: int | None = None
    baseline: Baseline | None = None
    headline: str | None = None
    """The scheme number the ranking and the claims read (e.g. "normalised_vs_acc")."""
    headline_means: str | None = None
    acc_norm_means: str | None = None
    acc_bytes_means: str | None = None
    schemes: dict[str, SchemeResult] | None = None
    """By scheme label."""
    ranking: list[str] | None = None
    """Scheme labels, best first."""
    model_kind: str | None = None
    """"encoder-decoder" (absent for decoder-only models)."""
    task_choice: list[TaskTried] | None = None
    """The report's default task: the preference list in order, each with its context test,
    up to the first that qualified (absent when a task was given)."""
    feed: str | None = None

    @classmethod
    def of(cls, metrics: dict[str, Any]) -> Self | None:
        """The run's concepts block (None when it has none)."""
        found = metrics.get("concepts")
        return cls.from_dict(found) if found else None

    @property
    def headline_key(self) -> str:
        return self.headline or HEADLINE

    def ranked(self) -> list[tuple[str, SchemeResult]]:
        """(label, scores) of each scheme, best first."""
        schemes = self.schemes or {}
        return [(name, schemes[name]) for name in self.ranking or []]
