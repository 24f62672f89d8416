"""Everything that determines an addition study's result, with the two presets.

``full`` is the setting of Song & Zhong (2023, section 5): 8 layers, 8 heads, width 512,
a million reversed-output sums of 5-10 digits, a fixed number of steps. ``quick`` is sized
for two CPU cores: five seeds, each trained in float64 on one thread with deterministic
kernels until a held-out in-range criterion is met (a step count is only its cap), so its
result does not hang on how a CPU rounds. Options given explicitly override the preset's
values.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

import torch

from geomlens.analyses.arithmetic.data import sequence_length
from geomlens.analyses.arithmetic.model import ModelShape
from geomlens.errors import GeomlensError

MAX_DIGITS = 100
"""Longest operand accepted (the position table grows as 3n + 3)."""

LR_SCHEDULES = ("cosine", "constant")
DTYPES = ("float32", "float64")
CONTROL_POSITIONS = ("subset", "offset")
"""How the control's training position ids are drawn (``ArithmeticConfig.control_positions``)."""


@dataclass(frozen=True)
class ArithmeticConfig:
    """The full configuration of one run (the run folder compares it).

    Attributes:
        preset: the preset the values started from ("quick" or "full").
        train_digits, test_digits: inclusive operand-length ranges (lo, hi).
        reverse_output: answers written least significant digit first.
        carry: False draws only sums without any carry (column sums at most 9).
        unequal_operands: training problems pair an n-digit operand with one of m digits,
            m uniform in 1..n, zero-padded (as the original study draws them); evaluation
            and geometry problems keep both operands n digits long.
        layers, heads, d_model: decoder size.
        steps: optimizer steps (with ``target_accuracy``, the most steps a model may take);
            batch_size: problems per step.
        lr: peak AdamW learning rate (linear warm-up over ``warmup`` steps, then, with
            ``lr_schedule`` "cosine", cosine decay to zero at ``steps``, with "constant" the
            peak rate until training stops); weight_decay: AdamW weight decay.
        target_accuracy: stop training once the exact match on ``check_samples`` held-out
            problems of every training length reaches this, checked every ``check_every``
            steps (None: train for ``steps``).
        dtype: "float32" or "float64", the model's weights and arithmetic throughout.
        train_samples: size of the fixed training set drawn once from the seed, or 0 for
            fresh problems at every step.
        checkpoint_every: steps between checkpoints (each also evaluates
            ``checkpoint_eval_samples`` problems per test length).
        eval_samples: problems per operand length in the final evaluation.
        geometry_contexts: C, the prompts of one length whose hidden states are decomposed.
        attention_contexts: prompts whose attention logits are split into parts.
        control: also train a control model on randomised position ids.
        control_positions: how the control's ids are drawn for each training sequence of
            a batch of width L: "subset", a sorted random subset of L ids out of
            0..n_positions-1; "offset", the contiguous ids k..k+L-1 with k uniform in
            0..n_positions-L (relative positions kept). Either way every row of the
            position table is trained.
        device: "cpu" or "cuda"; threads: torch CPU threads (None: torch's default).
        seed: seeds data, initialisation and every analysis; seeds: how many models are
            trained, with seeds ``seed``, ``seed + 1``, ... (the spread is reported).
    """

    preset: str = "full"
    train_digits: tuple[int, int] = (5, 10)
    test_digits: tuple[int, int] = (1, 15)
    reverse_output: bool = True
    carry: bool = True
    unequal_operands: bool = True
    layers: int = 8
    heads: int = 8
    d_model: int = 512
    steps: int = 20000
    batch_size: int = 256
    lr: float = 3e-4
    weight_decay: float = 0.1
    warmup: int = 500
    lr_schedule: str = "cosine"
    target_accuracy: float | None = None
    check_every: int = 50
    check_samples: int = 200
    dtype: str = "float32"
    train_samples: int = 1_000_000
    checkpoint_every: int = 1000
    checkpoint_eval_samples: int = 200
    eval_samples: int = 1000
    geometry_contexts: int = 512
    attention_contexts: int = 32
    control: bool = True
    control_positions: str = "subset"
    device: str = "cpu"
    threads: int | None = None
    seed: int = 0
    seeds: int = 1

    @property
    def seed_list(self) -> list[int]:
        return list(range(self.seed, self.seed + self.seeds))

    @property
    def torch_dtype(self) -> torch.dtype:
        return torch.float64 if self.dtype == "float64" else torch.float32

    @property
    def train_lengths(self) -> range:
        return range(self.train_digits[0], self.train_digits[1] + 1)

    @property
    def test_lengths(self) -> range:
        return range(self.test_digits[0], self.test_digits[1] + 1)

    @property
    def shape(self) -> ModelShape:
        longest = max(self.train_digits[1], self.test_digits[1])
        return ModelShape(self.layers, self.heads, self.d_model, sequence_length(longest))

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["train_digits"] = list(self.train_digits)
        data["test_digits"] = list(self.test_digits)
        return data

    def validate(self) -> None:
        """Plain-sentence errors for values no run can use."""
        for name in ("train_digits", "test_digits"):
            lo, hi = getattr(self, name)
            flag = "--" + name.replace("_", "-")
            if not 1 <= lo <= hi:
                raise GeomlensError(
                    f"{flag} must be a range lo-hi with 1 <= lo <= hi (got {lo}-{hi})."
                )
            if hi > MAX_DIGITS:
                raise GeomlensError(f"{flag} goes up to {MAX_DIGITS} digits (got {hi}).")
        positive = {
            "steps": "--steps",
            "layers": "--layers",
            "heads": "--heads",
            "d_model": "--d-model",
            "batch_size": "--batch-size",
            "checkpoint_every": "--checkpoint-every",
            "eval_samples": "--eval-samples",
            "checkpoint_eval_samples": "checkpoint_eval_samples",
            "geometry_contexts": "--geometry-contexts",
            "attention_contexts": "attention_contexts",
            "check_every": "--check-every",
            "check_samples": "--check-samples",
            "seeds": "--seeds",
        }
        for attr, flag in positive.items():
            value = getattr(self, attr)
            if value < 1:
                raise GeomlensError(f"{flag} must be at least 1 (got {value}).")
        if self.d_model % self.heads:
            raise GeomlensError(
                f"--d-model {self.d_model} is not a multiple of --heads {self.heads}."
            )
        if not (math.isfinite(self.lr) and self.lr > 0):
            raise GeomlensError(f"--lr must be a positive finite number (got {self.lr}).")
        if not math.isfinite(self.weight_decay):
            raise GeomlensError(f"weight decay must be a finite number (got {self.weight_decay}).")
        if self.lr_schedule not in LR_SCHEDULES:
            raise GeomlensError(
                f"--lr-schedule must be one of {', '.join(LR_SCHEDULES)} "
                f"(got {self.lr_schedule!r})."
            )
        if self.target_accuracy is not None and not 0.0 <= self.target_accuracy <= 1.0:
            raise GeomlensError(
                f"--target-accuracy must be between 0 and 1 (got {self.target_accuracy})."
            )
        if self.control_positions not in CONTROL_POSITIONS:
            raise GeomlensError(
                f"--control-positions must be one of {', '.join(CONTROL_POSITIONS)} "
                f"(got {self.control_positions!r})."
            )
        if self.dtype not in DTYPES:
            raise GeomlensError(f"--dtype must be one of {', '.join(DTYPES)} (got {self.dtype!r}).")
        if self.warmup < 0 or self.weight_decay < 0:
            raise GeomlensError("warmup and weight decay cannot be negative.")
        if self.train_samples < 0:
            raise GeomlensError(
                f"--train-samples must be 0 (fresh problems) or more (got {self.train_samples})."
            )
        if 0 < self.train_samples < len(self.train_lengths):
            raise GeomlensError(
                f"--train-samples {self.train_samples} is fewer than the "
                f"{len(self.train_lengths)} training lengths."
            )
        if self.geometry_contexts < 2:
            raise GeomlensError("--geometry-contexts must be at least 2.")
        if self.threads is not None and self.threads < 1:
            raise GeomlensError(f"--threads must be at least 1 (got {self.threads}).")
        if self.device not in ("cpu", "cuda") and not self.device.startswith("cuda:"):
            raise GeomlensError(f"--device must be cpu or cuda (got {self.device!r}).")
        if self.device.startswith("cuda") and not torch.cuda.is_available():
            raise GeomlensError("--device cuda was asked for, but no CUDA device is available.")


PRESETS: dict[str, dict[str, Any]] = {
    "full": {},
    "quick": {
        "train_digits": (2, 3),
        "test_digits": (1, 8),
        "layers": 2,
        "heads": 4,
        "d_model": 64,
        "steps": 3000,
        "batch_size": 128,
        "lr": 2e-3,
        "warmup": 50,
        "lr_schedule": "constant",
        "target_accuracy": 0.99,
        "check_every": 50,
        "check_samples": 200,
        "dtype": "float64",
        "train_samples": 0,
        "checkpoint_every": 200,
        "checkpoint_eval_samples": 100,
        "eval_samples": 500,
        "geometry_contexts": 256,
        "attention_contexts": 16,
        "control": False,
        "threads": 1,
        "seeds": 5,
    },
}


def parse_digit_range(text: str | tuple[int, int], flag: str) -> tuple[int, int]:
    """ "5-10" (inclusive) or "7" (one length) to (lo, hi); bad text is a GeomlensError."""
    if isinstance(text, tuple):
        return text
    parts = str(text).strip().split("-")
    try:
        if len(parts) == 1:
            lo = hi = int(parts[0])
        elif len(parts) == 2:
            lo, hi = int(parts[0]), int(parts[1])
        else:
            raise ValueError
    except ValueError:
        raise GeomlensError(
            f"{flag} takes a range of operand lengths like 5-10, or one length like 7 "
            f"(got {text!r})."
        ) from None
    return lo, hi


def make_config(preset: str | None = None, **overrides: Any) -> ArithmeticConfig:
    """A validated config: the preset's values (default "full"), then every override that
    is not None. Digit ranges may be given as text ("5-10")."""
    name = preset or "full"
    if name not in PRESETS:
        raise GeomlensError(f"unknown preset {name!r}; use one of {', '.join(PRESETS)}.")
    values: dict[str, Any] = {"preset": name, **PRESETS[name]}
    fields = {f.name for f in dataclasses.fields(ArithmeticConfig)}
    for key, value in overrides.items():
        if key not in fields:
            raise TypeError(f"unknown arithmetic option {key!r}")
        if value is not None:
            values[key] = value
    for key in ("train_digits", "test_digits"):
        if key in values:
            values[key] = parse_digit_range(values[key], "--" + key.replace("_", "-"))
    config = ArithmeticConfig(**values)
    config.validate()
    return config
