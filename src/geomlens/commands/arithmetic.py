"""``geomlens arithmetic``: train, evaluate by operand length, measure the geometry.

One run folder: ``manifest.json``, ``metrics.json`` (section "arithmetic"), ``model/`` and
``control/`` (weights, training history, a checkpoint while training runs) and
``figures/``. A rerun with the same config resumes an interrupted training from its last
checkpoint and reuses a finished run as it is.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from geomlens.arithmetic.config import ArithmeticConfig, make_config
from geomlens.arithmetic.data import Problems, make_problems
from geomlens.arithmetic.evaluate import accuracy_by_length, eval_problems, range_means
from geomlens.arithmetic.geometry import GEOMETRY_STREAM, Geometry, grid_length, measure
from geomlens.arithmetic.model import model_view
from geomlens.arithmetic.train import StepHook, Trained, train
from geomlens.commands import lifecycle
from geomlens.engines.threads import torch_threads
from geomlens.io.runfolder import Run, RunFolder
from geomlens.report import arithmetic_figures as figs
from geomlens.report.figures import save_all
from geomlens.stats.rounding import rounded

CONTROL_POSITIONS = "sorted random subset of 0..n_positions-1 per training sequence"


def geometry_lengths(config: ArithmeticConfig) -> list[int]:
    """The longest training length, and the longest test length when it is longer."""
    lengths = [config.train_digits[1]]
    if config.test_digits[1] > config.train_digits[1]:
        lengths.append(config.test_digits[1])
    return lengths


def geometry_problems(config: ArithmeticConfig, n: int) -> Problems:
    rng = np.random.default_rng([config.seed, GEOMETRY_STREAM, n])
    return make_problems(
        rng, n, config.geometry_contexts, reverse=config.reverse_output, carry=config.carry
    )


def model_section(
    config: ArithmeticConfig,
    trained: Trained,
    problems: dict[int, Problems],
    geometry: list[Geometry],
) -> dict[str, Any]:
    """The numbers of one trained model: final accuracy, history, geometry."""
    acc = accuracy_by_length(trained.model, problems)
    inside, outside = range_means(acc, config.train_lengths)
    return {
        "accuracy_by_length": {str(n): a for n, a in acc.items()},
        "accuracy_in_range": inside,
        "accuracy_out_of_range": outside,
        "checkpoints": trained.history.evals,
        "loss_curve": trained.history.loss,
        "geometry": [g.to_dict() for g in geometry],
    }


def figures(
    config: ArithmeticConfig,
    sections: dict[str, dict[str, Any]],
    geometry: dict[str, list[Geometry]],
) -> list[tuple[Any, str]]:
    """Every figure of the study, with its file name."""
    curves = {
        name: {int(n): a for n, a in s["accuracy_by_length"].items()}
        for name, s in sections.items()
    }
    histories = {
        name: {"loss": s["loss_curve"], "evals": s["checkpoints"]} for name, s in sections.items()
    }
    rows = [
        (f"{name}, {g.operand_length} digits", g.stats, g.trained_positions)
        for name, geos in geometry.items()
        for g in geos
    ]
    main = geometry["model"][0]
    shares = [[float(h[0]) for h in a.share] for a in main.attention]
    return [
        (figs.accuracy_figure(curves, config.train_digits), "arithmetic_accuracy.png"),
        (figs.training_figure(histories), "arithmetic_training.png"),
        (figs.gram_grid(rows), "arithmetic_gram.png"),
        (
            figs.pos_pos_figure(main.pos_pos, shares, f"model, {main.operand_length} digits"),
            "arithmetic_pos_pos.png",
        ),
    ]


def run_arithmetic(
    config: ArithmeticConfig,
    out: str | Path,
    *,
    progress: bool = True,
    on_step: StepHook | None = None,
) -> Run:
    """Train the model (and the control), evaluate it per operand length, measure its
    positional geometry, and write everything to the run folder ``out``.

    Args:
        config: a validated configuration (``make_config``).
        out: the run folder.
        progress: show progress bars.
        on_step: called after every training step with (steps done, stop request).
    """
    config.validate()
    with lifecycle.held(out) as folder:
        return _run_locked(config, folder, progress, on_step)


def model_geometry(
    config: ArithmeticConfig, trained: Trained, name: str, folder: Path
) -> list[Geometry]:
    """The positional geometry of one trained model at every geometry length. The control
    was trained on random position ids over all its positions; the model on the grid of its
    longest training problems."""
    view = model_view(trained.model, name=f"arithmetic-{name}", source=str(folder))
    trained_positions = (
        config.shape.n_positions if name == "control" else grid_length(config.train_digits[1])
    )
    return [
        measure(
            view,
            geometry_problems(config, n),
            trained_positions=trained_positions,
            attention_contexts=config.attention_contexts,
            seed=config.seed,
        )
        for n in geometry_lengths(config)
    ]


def _run_locked(
    config: ArithmeticConfig, folder: RunFolder, progress: bool, on_step: StepHook | None
) -> Run:
    full_config = {**config.to_dict(), "command": "arithmetic"}
    state, _ = lifecycle.claim(folder, full_config)
    if state == "complete":
        return lifecycle.reuse(folder)
    started = time.time()
    manifest = lifecycle.begin(
        folder,
        "arithmetic",
        full_config,
        model={
            "family": "gpt2",
            "n_layers": config.layers,
            "n_heads": config.heads,
            "d_model": config.d_model,
            "n_positions": config.shape.n_positions,
        },
        device=config.device,
    )
    with torch_threads(config.threads):
        problems = eval_problems(
            config.seed,
            config.test_lengths,
            config.eval_samples,
            reverse=config.reverse_output,
            carry=config.carry,
        )
        names = ["model", "control"] if config.control else ["model"]
        sections: dict[str, dict[str, Any]] = {}
        geometry: dict[str, list[Geometry]] = {}
        seconds: dict[str, float] = {}
        for name in names:
            trained = train(
                config,
                folder.path / name,
                problems,
                randomise_positions=name == "control",
                progress=progress,
                label=name,
                on_step=on_step,
            )
            seconds[name] = trained.history.seconds
            geometry[name] = model_geometry(config, trained, name, folder.path)
            sections[name] = model_section(config, trained, problems, geometry[name])
    figure_list = figures(config, sections, geometry)
    save_all([(fig, folder.path / "figures" / name) for fig, name in figure_list])
    main = sections["model"]
    metrics = {
        "train_range": list(config.train_digits),
        "test_range": list(config.test_digits),
        "reverse_output": config.reverse_output,
        "carry": config.carry,
        "unequal_operands": config.unequal_operands,
        "seed": config.seed,
        "eval_samples": config.eval_samples,
        "skip_first": False,
        **main,
        "control": (
            {"position_ids": CONTROL_POSITIONS, **sections["control"]}
            if "control" in sections
            else None
        ),
    }
    folder.merge_metrics("arithmetic", rounded(metrics))
    train_seconds = {f"train_seconds_{k}": v for k, v in seconds.items()}
    return lifecycle.complete(folder, manifest, started, train_seconds)


def summary_lines(run: Run) -> list[str]:
    """A few lines for the terminal: accuracy per length, and smoothness per layer."""
    m = run.metrics["arithmetic"]
    lo, hi = m["train_range"]
    lines = [f"  exact match by operand length (trained on {lo}-{hi} digits):"]
    for name, section in (("model", m), ("control", m.get("control"))):
        if section is None:
            continue
        cells = ", ".join(
            f"{n}:{a:.3f}"
            for n, a in sorted(section["accuracy_by_length"].items(), key=lambda x: int(x[0]))
        )
        inside, outside = section["accuracy_in_range"], section["accuracy_out_of_range"]
        out_text = "n/a" if outside is None else f"{outside:.3f}"
        lines.append(f"  {name}: {cells}")
        lines.append(f"  {name}: in range {inside:.3f}, out of range {out_text}")
    g = m["geometry"][0]
    lines.append(
        f"  positional geometry at {g['operand_length']} digits (T={g['n_positions']}): "
        "layer share_pos pos_rank pos_low_freq pos_smoothness"
    )
    for row in g["layers"]:
        lines.append(
            f"  {row['layer']:5d} {row['share_pos']:9.3f} {row['pos_rank']:8d}"
            f" {row['pos_low_freq']:12.3f} {row['pos_smoothness']:14.3f}"
        )
    return lines


@dataclass(frozen=True)
class ArithmeticRunConfig:
    """What ``geomlens arithmetic`` runs.

    Attributes:
        study: the addition study (``make_config``: a preset and its overrides).
        out: the run folder (None: ``runs/arithmetic-<preset>``).
        progress: show progress bars.
    """

    study: ArithmeticConfig
    out: str | Path | None = None
    progress: bool = True


def run(config: ArithmeticRunConfig) -> Run:
    """``geomlens arithmetic``: its run folder, read back (a ``Run``: the Python API has no
    ``Result`` for the addition study)."""
    out = config.out or f"runs/arithmetic-{config.study.preset}"
    return run_arithmetic(config.study, out, progress=config.progress)


def summary(run: Run) -> list[str]:
    """The lines ``geomlens arithmetic`` prints when it finishes."""
    header = f"addition study written to {run.path} (metrics.json, figures/, model/)"
    return [header, *summary_lines(run)]


HELP = "addition study: length generalisation and positional geometry"

STUDY_OPTIONS = (
    "train_digits",
    "test_digits",
    "reverse_output",
    "carry",
    "unequal_operands",
    "layers",
    "heads",
    "d_model",
    "steps",
    "batch_size",
    "lr",
    "train_samples",
    "checkpoint_every",
    "eval_samples",
    "geometry_contexts",
    "control",
    "device",
    "threads",
    "seed",
)
"""The options that override the preset's values (``make_config``), by field name."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Every option defaults to its preset's value."""
    p = parser
    p.add_argument("--preset", default=None, choices=["quick", "full"], help="default: full")
    p.add_argument("--train-digits", default=None, metavar="LO-HI", help="full: 5-10")
    p.add_argument("--test-digits", default=None, metavar="LO-HI", help="full: 1-15")
    p.add_argument(
        "--reverse-output",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="write answers least significant digit first (default: on)",
    )
    p.add_argument(
        "--carry",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="--no-carry draws only sums without any carry (default: carries allowed)",
    )
    p.add_argument(
        "--unequal-operands",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="train on pairs of an n-digit and an m-digit operand, m uniform in 1..n, "
        "zero-padded (default: on, as the original study; evaluation keeps equal lengths)",
    )
    p.add_argument("--layers", type=int, default=None, metavar="L")
    p.add_argument("--heads", type=int, default=None, metavar="H")
    p.add_argument("--d-model", type=int, default=None, metavar="D")
    p.add_argument("--steps", type=int, default=None, metavar="N")
    p.add_argument("--batch-size", type=int, default=None, metavar="B")
    p.add_argument("--lr", type=float, default=None, help="peak AdamW learning rate")
    p.add_argument(
        "--train-samples",
        type=int,
        default=None,
        metavar="N",
        help="fixed training set size (0: fresh problems every step)",
    )
    p.add_argument("--checkpoint-every", type=int, default=None, metavar="STEPS")
    p.add_argument("--eval-samples", type=int, default=None, metavar="N", help="per length")
    p.add_argument("--geometry-contexts", type=int, default=None, metavar="C")
    p.add_argument(
        "--control",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="also train a control on randomised position ids (full: on, quick: off)",
    )
    p.add_argument("--device", default=None, help="cpu (default) or cuda")
    p.add_argument("--threads", type=int, default=None, metavar="N", help="torch CPU threads")
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.add_argument("--out", default=None, help="run folder (default: runs/arithmetic-<preset>)")


def main(args: argparse.Namespace) -> int:
    study = make_config(args.preset, **{name: getattr(args, name) for name in STUDY_OPTIONS})
    done = run(ArithmeticRunConfig(study, out=args.out, progress=not args.quiet))
    for line in summary(done):
        print(line)
    return 0
