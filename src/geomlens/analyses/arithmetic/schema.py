"""The "arithmetic" block of metrics.json, as ``geomlens arithmetic`` writes it and its
summary reads it (``ArithmeticMetrics.of(metrics)``). Accuracies are exact-match shares of
problems (unitless, in [0, 1]); lengths are operand digits, written as text keys."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Self

from geomlens.analyses.common.block import Block, nullable


@dataclass(frozen=True, kw_only=True)
class Criterion(Block):
    """How training ends: a target on held-out problems, or a fixed step count."""

    target_accuracy: float | None = nullable()
    """Exact match every training length must reach (null: train for ``max_steps``)."""
    check_every: int | None = nullable()
    """Steps between checks (null without a target)."""
    check_samples: int | None = nullable()
    """Problems per training length in each check (null without a target)."""
    max_steps: int
    lr_schedule: str | None = nullable()


@dataclass(frozen=True, kw_only=True)
class SeedRun(Block):
    """One trained model (or control) of one seed."""

    seed: int
    steps: int
    """Training steps taken."""
    stopped: str
    """Why training ended ("target" when the criterion was met)."""
    train_seconds: float | None = nullable()
    accuracy_by_length: dict[str, float | None]
    """Operand length (text) -> exact match on the evaluation problems."""
    accuracy_in_range: float | None = nullable()
    accuracy_out_of_range: float | None = nullable()
    accuracy_shorter: float | None = nullable()
    """Mean over lengths shorter than the training range (null: none tested)."""
    accuracy_longer: float | None = nullable()
    """Mean over lengths longer than the training range (null: none tested)."""
    checks: list[Any] | None = None
    """The held-out checks while training."""
    checkpoints: list[Any] | None = None
    loss_curve: list[Any] | None = None
    geometry: list[dict[str, Any]]
    """Per measured operand length: ``operand_length`` and ``layers`` (per layer the
    positional geometry's numbers, ``geometry.GEOMETRY_KEYS``)."""


@dataclass(frozen=True, kw_only=True)
class Control(Block):
    """The control models, trained on random position ids."""

    position_ids: str
    """How the control's training ids were drawn, in words."""
    runs: list[SeedRun]
    spread: dict[str, Any]
    """As ``ArithmeticMetrics.spread``."""


@dataclass(frozen=True, kw_only=True)
class ArithmeticMetrics(Block):
    """The "arithmetic" block: the addition study's models per seed and their spread."""

    train_range: list[int]
    """[shortest, longest] operand digits trained on."""
    test_range: list[int]
    reverse_output: bool
    carry: bool | None = nullable()
    """False: only sums without a carry."""
    unequal_operands: bool | None = nullable()
    seeds: list[int]
    criterion: Criterion
    dtype: str | None = nullable()
    threads: int | None = nullable()
    eval_samples: int | None = nullable()
    """Evaluation problems per operand length."""
    skip_first: bool | None = nullable()
    runs: list[SeedRun]
    """The models, one per seed."""
    spread: dict[str, Any]
    """The spread over seeds (``seeds.seed_spread``): each number's median, min and max."""
    control: Control | None = nullable()
    """The controls (null when none were trained)."""

    @classmethod
    def of(cls, metrics: dict[str, Any]) -> Self | None:
        """The run's arithmetic block (None when it has none)."""
        return cls.read(metrics, "arithmetic")
