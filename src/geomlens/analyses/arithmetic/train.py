"""Training with AdamW, checkpointed and resumable, for a step count or until a criterion.

Every step's batch is a function of (seed, step), so a run resumed from a checkpoint
(model, optimizer, scheduler, step, random state) continues exactly as if it had never
stopped. Ctrl-C or SIGTERM stops at the next step boundary after saving a checkpoint.

With a target accuracy, every ``check_every`` steps the model answers ``check_samples``
held-out problems of each training length (their own seed stream, decoded in float64);
training stops at the first check where every training length reaches the target, or at
``steps``. Training runs with torch's deterministic algorithms.

The control model sees randomised position ids while training, so every row of the
position table is trained: for each sequence of a batch of width L, either a sorted random
subset of L ids out of 0..n_positions-1 (``control_positions`` "subset"; randomised
positional encodings, Ruoss et al. 2023) or the contiguous ids k..k+L-1 from a random
offset k ("offset", which keeps the distance between tokens). It is evaluated and measured
with the usual ids 0, 1, 2, ... like the main model.
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors.torch import load_model, save_model
from tqdm.auto import tqdm

from geomlens.analyses.arithmetic.config import ArithmeticConfig
from geomlens.analyses.arithmetic.data import Dataset, Problems, TrainBatch, train_batch
from geomlens.analyses.arithmetic.evaluate import (
    CHECK_STREAM,
    accuracy_by_length,
    eval_problems,
    range_means,
)
from geomlens.analyses.arithmetic.model import build_model
from geomlens.capturing.interrupt import StopRequest, stop_at_batch_boundary
from geomlens.errors import GeomlensError

TRAIN_STREAM, POSITION_STREAM = 1, 2
"""Seed-sequence tags of the fresh training problems and of the random position ids."""

LOG_POINTS = 200
"""Points kept of the loss curve (mean loss over each stretch of steps)."""


@dataclass
class History:
    """What training records: the loss curve and an evaluation per checkpoint.

    Attributes:
        loss: [[step, mean loss over the steps since the previous point], ...].
        evals: [{"step", "accuracy_by_length", "accuracy_in_range",
            "accuracy_out_of_range"}, ...] one per checkpoint.
        checks: [[step, lowest held-out exact match over the training lengths], ...] one
            per criterion check (empty without a target accuracy).
        steps: optimizer steps taken when training ended (0 while it runs).
        stopped: why it ended: "target" (the criterion was met), "steps" (the step count,
            or the cap, was reached), "" while it runs.
        seconds: training time summed over sessions.
    """

    loss: list[list[float]] = field(default_factory=list)
    evals: list[dict[str, Any]] = field(default_factory=list)
    checks: list[list[float]] = field(default_factory=list)
    steps: int = 0
    stopped: str = ""
    seconds: float = 0.0

    def to_json(self) -> str:
        return json.dumps(
            {
                "loss": self.loss,
                "evals": self.evals,
                "checks": self.checks,
                "steps": self.steps,
                "stopped": self.stopped,
                "seconds": self.seconds,
            }
        )

    @classmethod
    def from_json(cls, text: str) -> History:
        data = json.loads(text)
        return cls(
            loss=data["loss"],
            evals=data["evals"],
            checks=data.get("checks", []),
            steps=data.get("steps", 0),
            stopped=data.get("stopped", ""),
            seconds=data["seconds"],
        )


@dataclass
class Trained:
    """A trained model and its history; ``resumed_from`` is the step a session resumed at."""

    model: Any
    history: History
    resumed_from: int | None = None


def lr_factor(step: int, warmup: int, total: int, schedule: str = "cosine") -> float:
    """Linear warm-up over ``warmup`` steps, then cosine decay to zero at ``total``
    (``schedule`` "cosine") or the peak rate from there on ("constant")."""
    if step < warmup:
        return (step + 1) / warmup
    if schedule == "constant":
        return 1.0
    progress = (step - warmup) / max(1, total - warmup)
    return 0.5 * (1.0 + math.cos(math.pi * min(1.0, progress)))


def make_optimizer(
    model: torch.nn.Module, config: ArithmeticConfig
) -> tuple[torch.optim.Optimizer, torch.optim.lr_scheduler.LambdaLR]:
    """AdamW (weight decay on matrices and embeddings, none on biases and norms) and its
    schedule."""
    decay: list[torch.nn.Parameter] = []
    no_decay: list[torch.nn.Parameter] = []
    for param in model.parameters():
        (decay if param.ndim >= 2 else no_decay).append(param)
    optimizer = torch.optim.AdamW(
        [
            {"params": decay, "weight_decay": config.weight_decay},
            {"params": no_decay, "weight_decay": 0.0},
        ],
        lr=config.lr,
        betas=(0.9, 0.98),
    )
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer,
        lambda step: lr_factor(step, config.warmup, config.steps, config.lr_schedule),
    )
    return optimizer, schedule


def random_position_ids(
    rng: np.random.Generator, batch: int, width: int, n_positions: int
) -> torch.Tensor:
    """[batch, width] sorted random subsets of 0..n_positions-1 (one per row)."""
    keys = rng.random((batch, n_positions))
    ids = np.sort(np.argsort(keys, axis=1)[:, :width], axis=1)
    return torch.from_numpy(ids.astype(np.int64))


def offset_position_ids(
    rng: np.random.Generator, batch: int, width: int, n_positions: int
) -> torch.Tensor:
    """[batch, width] contiguous ids k..k+width-1, k uniform in 0..n_positions-width per
    row: the window always fits the position table, and every row of it is reached."""
    if width > n_positions:
        raise ValueError(f"a window of {width} ids does not fit {n_positions} positions")
    starts = rng.integers(0, n_positions - width + 1, size=(batch, 1))
    return torch.from_numpy((starts + np.arange(width)).astype(np.int64))


POSITION_SCHEMES = {"subset": random_position_ids, "offset": offset_position_ids}
"""``ArithmeticConfig.control_positions`` -> the function drawing the control's training ids."""


class BatchSource:
    """The batch (and position ids) of any step, from the config and the seed alone."""

    def __init__(self, config: ArithmeticConfig, randomise_positions: bool) -> None:
        self.config = config
        self.randomise = randomise_positions
        self.dataset = (
            Dataset(
                config.seed,
                config.train_lengths,
                config.train_samples,
                reverse=config.reverse_output,
                carry=config.carry,
                unequal=config.unequal_operands,
            )
            if config.train_samples
            else None
        )

    def __call__(self, step: int) -> tuple[TrainBatch, torch.Tensor | None]:
        c = self.config
        if self.dataset is not None:
            batch = self.dataset.batch(step, c.batch_size)
        else:
            rng = np.random.default_rng([c.seed, TRAIN_STREAM, step])
            batch = train_batch(
                rng,
                c.train_lengths,
                c.batch_size,
                reverse=c.reverse_output,
                carry=c.carry,
                unequal=c.unequal_operands,
            )
        positions = None
        if self.randomise:
            rng = np.random.default_rng([c.seed, POSITION_STREAM, step])
            b, width = batch.tokens.shape
            draw = POSITION_SCHEMES[c.control_positions]
            positions = draw(rng, b, width, c.shape.n_positions)
        return batch, positions


def loss_on(
    model: Any, batch: TrainBatch, positions: torch.Tensor | None, device: torch.device
) -> torch.Tensor:
    """Mean cross-entropy of the answer tokens (padding and prompts carry no loss).

    Right padding needs no attention mask: causal attention never lets a real token see
    the padding after it.
    """
    tokens = torch.from_numpy(batch.tokens).to(device)
    targets = torch.from_numpy(batch.targets).to(device)
    kwargs: dict[str, Any] = {"input_ids": tokens, "use_cache": False}
    if positions is not None:
        kwargs["position_ids"] = positions.to(device)
    logits = model(**kwargs).logits
    return torch.nn.functional.cross_entropy(
        logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), ignore_index=-100
    )


# --------------------------------------------------------------------------- files


def _save_atomic(obj: Any, path: Path) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    torch.save(obj, tmp)
    os.replace(tmp, path)


def _rng_state() -> dict[str, Any]:
    state: dict[str, Any] = {"torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def _set_rng_state(state: dict[str, Any]) -> None:
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


class TrainFolder:
    """Where one model's training lives: ``checkpoint.pt`` while it runs, then
    ``model.safetensors`` and ``history.json`` when it is done."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)

    @property
    def checkpoint(self) -> Path:
        return self.path / "checkpoint.pt"

    @property
    def weights(self) -> Path:
        return self.path / "model.safetensors"

    @property
    def history(self) -> Path:
        return self.path / "history.json"

    def save_checkpoint(
        self,
        model: torch.nn.Module,
        optimizer: torch.optim.Optimizer,
        schedule: torch.optim.lr_scheduler.LRScheduler,
        step: int,
        history: History,
        running: torch.Tensor,
    ) -> None:
        """Save everything a resumed session needs (``running``: the loss summed since the
        last point of the curve)."""
        self.path.mkdir(parents=True, exist_ok=True)
        state = {
            "running": running.detach().cpu(),
            "model": model.state_dict(),
            "optimizer": optimizer.state_dict(),
            "schedule": schedule.state_dict(),
            "step": step,
            "rng": _rng_state(),
            "history": history.to_json(),
        }
        _save_atomic(state, self.checkpoint)

    def load_checkpoint(self) -> dict[str, Any] | None:
        """The saved state, on the CPU (loading it into the model and optimizer moves it)."""
        if not self.checkpoint.exists():
            return None
        return dict(torch.load(self.checkpoint, map_location="cpu", weights_only=True))

    def save_final(self, model: torch.nn.Module, history: History) -> None:
        """History first, weights last: the weights file marks training as finished."""
        self.path.mkdir(parents=True, exist_ok=True)
        (self.path / "history.json.tmp").write_text(history.to_json())
        os.replace(self.path / "history.json.tmp", self.history)
        tmp = self.path / "model.safetensors.tmp"
        save_model(model, str(tmp))
        os.replace(tmp, self.weights)
        self.checkpoint.unlink(missing_ok=True)

    def load_final(self, model: torch.nn.Module) -> History | None:
        if not self.weights.exists():
            return None
        load_model(model, str(self.weights))
        return History.from_json(self.history.read_text())


# --------------------------------------------------------------------------- training


StepHook = Callable[[int, StopRequest], None]


def evaluate_checkpoint(
    model: Any, config: ArithmeticConfig, problems: dict[int, Problems], step: int
) -> dict[str, Any]:
    """Accuracy per test length on the first ``checkpoint_eval_samples`` problems."""
    acc = accuracy_by_length(model, problems, limit=config.checkpoint_eval_samples)
    inside, outside = range_means(acc, config.train_lengths)
    return {
        "step": step,
        "accuracy_by_length": {str(n): a for n, a in acc.items()},
        "accuracy_in_range": inside,
        "accuracy_out_of_range": outside,
    }


def criterion_score(model: Any, config: ArithmeticConfig, held: dict[int, Problems]) -> float:
    """The lowest exact match over the training lengths on the held-out problems."""
    return min(accuracy_by_length(model, held).values())


def held_out_problems(config: ArithmeticConfig) -> dict[int, Problems]:
    """``check_samples`` problems per training length from the criterion's own stream."""
    return eval_problems(
        config.seed,
        config.train_lengths,
        config.check_samples,
        reverse=config.reverse_output,
        carry=config.carry,
        stream=CHECK_STREAM,
    )


@contextmanager
def deterministic_kernels(device: torch.device) -> Iterator[None]:
    """Torch's deterministic algorithms for a block (on CUDA a kernel without one warns
    instead of failing), restoring the previous setting after."""
    previous = torch.are_deterministic_algorithms_enabled()
    warn = torch.is_deterministic_algorithms_warn_only_enabled()
    torch.use_deterministic_algorithms(True, warn_only=device.type == "cuda")
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(previous, warn_only=warn)


def optimiser_step(
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    schedule: torch.optim.lr_scheduler.LRScheduler,
    batch: TrainBatch,
    positions: torch.Tensor | None,
    device: torch.device,
) -> torch.Tensor:
    """One AdamW step on a batch (gradients clipped to norm 1); returns the loss (detached)."""
    loss = loss_on(model, batch, positions, device)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    schedule.step()
    return loss.detach()


def resumed(
    saved: dict[str, Any] | None,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    schedule: torch.optim.lr_scheduler.LRScheduler,
    device: torch.device,
) -> tuple[History, int, torch.Tensor]:
    """(history, steps done, running loss sum) from a checkpoint, whose model, optimiser,
    schedule and random states are loaded in place; a fresh start when there is none."""
    if saved is None:
        return History(), 0, torch.zeros((), device=device)
    model.load_state_dict(saved["model"])
    optimizer.load_state_dict(saved["optimizer"])
    schedule.load_state_dict(saved["schedule"])
    _set_rng_state(saved["rng"])
    history = History.from_json(saved["history"])
    return history, int(saved["step"]), saved["running"].to(device)


def train(
    config: ArithmeticConfig,
    folder: Path,
    problems: dict[int, Problems],
    *,
    randomise_positions: bool = False,
    progress: bool = True,
    label: str = "model",
    on_step: StepHook | None = None,
) -> Trained:
    """Train one model until ``config.target_accuracy`` is met or for ``config.steps``,
    resuming from ``folder`` where it stopped.

    Args:
        config: the run's configuration (its ``seed`` is this model's).
        folder: this model's training folder (checkpoint, then final weights).
        problems: the evaluation problems (checkpoint evaluations use the first
            ``config.checkpoint_eval_samples`` of each length).
        randomise_positions: train on randomised position ids drawn as
            ``config.control_positions`` says (the control).
        progress: show a progress bar.
        label: the model's name in messages.
        on_step: called after every step with (steps done, stop request) (tests use it
            to interrupt).

    Returns:
        The trained model (on ``config.device``, in ``config.dtype``, in eval mode) and its
        history.

    Raises:
        GeomlensError: on SIGINT/SIGTERM, after saving a checkpoint.
    """
    device = torch.device(config.device)
    tf = TrainFolder(folder)
    model = build_model(config.shape, config.seed).to(device=device, dtype=config.torch_dtype)
    finished = tf.load_final(model)
    if finished is not None:
        return Trained(model.eval(), finished)
    with deterministic_kernels(device):
        optimizer, schedule = make_optimizer(model, config)
        saved = tf.load_checkpoint()
        history, start, running = resumed(saved, model, optimizer, schedule, device)
        _train_steps(
            config,
            tf,
            model,
            optimizer,
            schedule,
            (history, start, running),
            problems,
            BatchSource(config, randomise_positions),
            progress,
            label,
            on_step,
        )
    return Trained(model.eval(), history, resumed_from=start if saved is not None else None)


def _train_steps(
    config: ArithmeticConfig,
    tf: TrainFolder,
    model: Any,
    optimizer: torch.optim.Optimizer,
    schedule: torch.optim.lr_scheduler.LRScheduler,
    state: tuple[History, int, torch.Tensor],
    problems: dict[int, Problems],
    source: BatchSource,
    progress: bool,
    label: str,
    on_step: StepHook | None,
) -> None:
    """The training loop from ``state`` (history, steps done, running loss) to its end:
    checks, checkpoint evaluations, checkpoints, the final save."""
    history, start, running = state
    device = torch.device(config.device)
    held = held_out_problems(config) if config.target_accuracy is not None else {}
    log_every = max(1, config.steps // LOG_POINTS)
    model.train()
    bar = tqdm(
        total=config.steps,
        initial=start,
        desc=f"train {label}",
        unit="step",
        disable=not progress,
        dynamic_ncols=True,
    )
    t0 = time.perf_counter()
    with stop_at_batch_boundary() as stop:
        for step in range(start, config.steps):
            running += optimiser_step(model, optimizer, schedule, *source(step), device)
            done = step + 1
            bar.update(1)
            if done % log_every == 0:
                mean = float(running) / log_every
                history.loss.append([done, mean])
                running.zero_()
                bar.set_postfix(loss=f"{mean:.4f}")
            if on_step is not None:
                on_step(done, stop)
            reached = False
            if config.target_accuracy is not None and done % config.check_every == 0:
                score = criterion_score(model, config, held)
                history.checks.append([done, score])
                reached = score >= config.target_accuracy
            last = reached or done == config.steps
            if done % config.checkpoint_every == 0 or last:
                history.evals.append(evaluate_checkpoint(model, config, problems, done))
            if last:
                history.steps, history.stopped = done, "target" if reached else "steps"
                break
            if done % config.checkpoint_every == 0 or stop.requested:
                history.seconds += time.perf_counter() - t0
                t0 = time.perf_counter()
                tf.save_checkpoint(model, optimizer, schedule, done, history, running)
            if stop.requested:
                bar.close()
                raise GeomlensError(
                    f"interrupted ({stop.signal_name}) while training the {label} at step "
                    f"{done} of at most {config.steps}; progress is saved in {tf.path}: "
                    "rerun the same command to resume."
                )
    bar.close()
    history.seconds += time.perf_counter() - t0
    tf.save_final(model, history)
