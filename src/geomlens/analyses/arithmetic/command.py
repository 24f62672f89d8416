"""``geomlens arithmetic``: train, evaluate by operand length, measure the geometry.

One model (and control) per seed. One run folder: ``manifest.json``, ``metrics.json``
(section "arithmetic": per seed, and the spread over seeds), ``seed-<s>/model/`` and
``seed-<s>/control/`` (weights, training history, a checkpoint while training runs) and
``figures/``. A rerun with the same config resumes an interrupted training from its last
checkpoint, and reuses finished models and a finished run as they are.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from geomlens.analyses.arithmetic import figures as figs
from geomlens.analyses.arithmetic.config import ArithmeticConfig, make_config
from geomlens.analyses.arithmetic.data import Problems, make_problems
from geomlens.analyses.arithmetic.evaluate import accuracy_by_length, eval_problems, range_means
from geomlens.analyses.arithmetic.geometry import GEOMETRY_STREAM, Geometry, grid_length, measure
from geomlens.analyses.arithmetic.model import model_view
from geomlens.analyses.arithmetic.schema import ArithmeticMetrics, Control, Criterion, SeedRun
from geomlens.analyses.arithmetic.seeds import seed_spread, side_means
from geomlens.analyses.arithmetic.train import StepHook, Trained, train
from geomlens.engines.threads import torch_threads
from geomlens.reporting.figures import save_all
from geomlens.runs import lifecycle
from geomlens.runs.runfolder import Run
from geomlens.stats.rounding import rounded

CONTROL_POSITION_IDS = {
    "subset": "sorted random subset of 0..n_positions-1 per training sequence",
    "offset": "contiguous ids k..k+L-1 per training sequence of width L, "
    "k uniform in 0..n_positions-L",
}
"""How the control's training ids were drawn, in words, by ``control_positions``."""


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
    """The numbers of one trained model: how training ended, final accuracy, history,
    geometry."""
    acc = accuracy_by_length(trained.model, problems)
    inside, outside = range_means(acc, config.train_lengths)
    shorter, longer = side_means(acc, config.train_digits)
    history = trained.history
    return {
        "seed": config.seed,
        "steps": history.steps,
        "stopped": history.stopped,
        "train_seconds": history.seconds,
        "accuracy_by_length": {str(n): a for n, a in acc.items()},
        "accuracy_in_range": inside,
        "accuracy_out_of_range": outside,
        "accuracy_shorter": shorter,
        "accuracy_longer": longer,
        "checks": history.checks,
        "checkpoints": history.evals,
        "loss_curve": history.loss,
        "geometry": [g.to_dict() for g in geometry],
    }


def figures(
    config: ArithmeticConfig,
    sections: dict[str, dict[str, Any]],
    geometry: dict[str, list[Geometry]],
) -> list[tuple[Any, str]]:
    """Every figure of the study, with its file name.

    Args:
        config: the run's configuration.
        sections: curve name ("seed 0", "seed 0 control", ...) -> that model's section.
        geometry: the same names -> the model's geometry per measured length.
    """
    curves = {
        name: {int(n): a for n, a in s["accuracy_by_length"].items()}
        for name, s in sections.items()
    }
    histories = {
        name: {"loss": s["loss_curve"], "evals": s["checkpoints"]} for name, s in sections.items()
    }
    names = list(geometry)
    first = geometry[names[0]]
    rows = [
        (
            f"{name}, {geometry[name][0].operand_length} digits",
            geometry[name][0].stats,
            geometry[name][0].trained_positions,
        )
        for name in names
    ]
    rows += [
        (f"{names[0]}, {g.operand_length} digits", g.stats, g.trained_positions) for g in first[1:]
    ]
    main = first[0]
    shares = [[float(h[0]) for h in a.share] for a in main.attention]
    return [
        (figs.accuracy_figure(curves, config.train_digits), "arithmetic_accuracy.png"),
        (figs.training_figure(histories), "arithmetic_training.png"),
        (figs.gram_grid(rows), "arithmetic_gram.png"),
        (
            figs.pos_pos_figure(main.pos_pos, shares, f"{names[0]}, {main.operand_length} digits"),
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
    full_config = {**config.to_dict(), "command": "arithmetic"}
    with lifecycle.run_folder(out, "arithmetic", full_config) as run:
        if run.state == "complete":
            return run.reuse()
        return _run_locked(config, run, progress, on_step)


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
    config: ArithmeticConfig, run: lifecycle.RunInFolder, progress: bool, on_step: StepHook | None
) -> Run:
    folder = run.folder
    run.begin(
        model={
            "family": "gpt2",
            "n_layers": config.layers,
            "n_heads": config.heads,
            "d_model": config.d_model,
            "n_positions": config.shape.n_positions,
        },
        device=config.device,
    )
    kinds = ["model", "control"] if config.control else ["model"]
    runs: dict[str, list[dict[str, Any]]] = {kind: [] for kind in kinds}
    sections: dict[str, dict[str, Any]] = {}
    geometry: dict[str, list[Geometry]] = {}
    seconds: dict[str, float] = {}
    with torch_threads(config.threads):
        for seed in config.seed_list:
            one = replace(config, seed=seed)
            problems = eval_problems(
                seed,
                one.test_lengths,
                one.eval_samples,
                reverse=one.reverse_output,
                carry=one.carry,
            )
            for kind in kinds:
                name = f"seed {seed}" + (" control" if kind == "control" else "")
                trained = train(
                    one,
                    folder.path / f"seed-{seed}" / kind,
                    problems,
                    randomise_positions=kind == "control",
                    progress=progress,
                    label=f"{kind} (seed {seed})",
                    on_step=on_step,
                )
                seconds[f"train_seconds_{kind}_seed_{seed}"] = trained.history.seconds
                geometry[name] = model_geometry(one, trained, kind, folder.path)
                sections[name] = model_section(one, trained, problems, geometry[name])
                runs[kind].append(sections[name])
    figure_list = figures(config, sections, geometry)
    save_all([(fig, folder.path / "figures" / name) for fig, name in figure_list])
    metrics = ArithmeticMetrics(
        train_range=list(config.train_digits),
        test_range=list(config.test_digits),
        reverse_output=config.reverse_output,
        carry=config.carry,
        unequal_operands=config.unequal_operands,
        seeds=config.seed_list,
        criterion=Criterion.from_dict(criterion(config)),
        dtype=config.dtype,
        threads=config.threads,
        eval_samples=config.eval_samples,
        skip_first=False,
        runs=[SeedRun.from_dict(r) for r in runs["model"]],
        spread=seed_spread(runs["model"]),
        control=(
            Control(
                position_ids=CONTROL_POSITION_IDS[config.control_positions],
                runs=[SeedRun.from_dict(r) for r in runs["control"]],
                spread=seed_spread(runs["control"]),
            )
            if config.control
            else None
        ),
    )
    folder.merge_metrics("arithmetic", rounded(metrics.to_dict()))
    return run.complete(seconds)


def criterion(config: ArithmeticConfig) -> dict[str, Any]:
    """How training ends: the target on held-out problems and how it is checked, or the
    fixed step count."""
    return {
        "target_accuracy": config.target_accuracy,
        "check_every": config.check_every if config.target_accuracy is not None else None,
        "check_samples": config.check_samples if config.target_accuracy is not None else None,
        "max_steps": config.steps,
        "lr_schedule": config.lr_schedule,
    }


def _cell(value: float | None, digits: int = 3) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


def _range(stats: dict[str, Any], digits: int = 3) -> str:
    """'median [min, max]' of a spread."""
    if not stats["n"]:
        return "n/a"
    return f"{stats['median']:.{digits}f} [{stats['min']:.{digits}f}, {stats['max']:.{digits}f}]"


def stopping_line(m: ArithmeticMetrics) -> str:
    """How training ended, in words."""
    c = m.criterion
    lo, hi = m.train_range
    if c.target_accuracy is None:
        return f"  trained on {lo}-{hi} digits for {c.max_steps} steps"
    return (
        f"  trained on {lo}-{hi} digits until held-out exact match >= {c.target_accuracy}"
        f" at every training length ({c.check_samples} problems each, checked every"
        f" {c.check_every} steps, at most {c.max_steps} steps)"
    )


def seed_lines(name: str, runs: list[SeedRun], spread: dict[str, Any]) -> list[str]:
    """One row per seed and the spread, for the model or the control."""
    geo_len = runs[0].geometry[0]["operand_length"]
    lines = [
        f"  {name}: seed steps stopped in_range shorter longer | pos_smoothness / "
        f"pos_low_freq per layer at {geo_len} digits"
    ]
    for r in runs:
        layers = r.geometry[0]["layers"]
        smooth = " ".join(f"{row['pos_smoothness']:.2f}" for row in layers)
        low = " ".join(f"{row['pos_low_freq']:.3f}" for row in layers)
        lines.append(
            f"  {r.seed:4d} {r.steps:5d} {r.stopped:>7s} "
            f"{_cell(r.accuracy_in_range)} {_cell(r.accuracy_shorter)} "
            f"{_cell(r.accuracy_longer)} | {smooth} / {low}"
        )
    lines.append(
        f"  spread over {spread['seeds']} seeds, median [min, max]: criterion met by "
        f"{spread['criterion_met']}; steps {_range(spread['steps'], 0)}; in range "
        f"{_range(spread['accuracy_in_range'])}; shorter {_range(spread['accuracy_shorter'])};"
        f" longer {_range(spread['accuracy_longer'])}"
    )
    for row in spread["geometry"][0]["layers"]:
        lines.append(
            f"    layer {row['layer']}: pos_smoothness {_range(row['pos_smoothness'], 2)}, "
            f"pos_low_freq {_range(row['pos_low_freq'])}, share_pos "
            f"{_range(row['share_pos'])}"
        )
    longest = spread["geometry"][-1]
    if longest["layers"] and longest["layers"][0]["untrained_cos_across"]["n"]:
        lines.append(
            f"    at {longest['operand_length']} digits, mean cosine among untrained position"
            " ids / between untrained and trained ones:"
        )
        for row in longest["layers"]:
            lines.append(
                f"    layer {row['layer']}: {_range(row['untrained_cos_within'], 2)} / "
                f"{_range(row['untrained_cos_across'], 2)}"
            )
    return lines


def summary_lines(run: Run) -> list[str]:
    """A few lines for the terminal: how training ended, accuracy and geometry per seed,
    and their spread."""
    m = ArithmeticMetrics.of(run.metrics)
    if m is None:
        return ["  no addition study in this run"]
    lines = [stopping_line(m)]
    lines += seed_lines("model", m.runs, m.spread)
    if m.control is not None:
        lines += seed_lines("control", m.control.runs, m.control.spread)
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
    header = f"addition study written to {run.path} (metrics.json, figures/, seed-*/)"
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
    "lr_schedule",
    "target_accuracy",
    "check_every",
    "check_samples",
    "dtype",
    "train_samples",
    "checkpoint_every",
    "eval_samples",
    "geometry_contexts",
    "control",
    "control_positions",
    "device",
    "threads",
    "seed",
    "seeds",
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
    p.add_argument(
        "--steps",
        type=int,
        default=None,
        metavar="N",
        help="optimizer steps; with --target-accuracy the most a model may take",
    )
    p.add_argument("--batch-size", type=int, default=None, metavar="B")
    p.add_argument("--lr", type=float, default=None, help="peak AdamW learning rate")
    add_stopping_arguments(p)
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
    p.add_argument(
        "--control-positions",
        default=None,
        metavar="subset|offset",
        help="the control's training ids per sequence: a sorted random subset of the "
        "position ids, or a contiguous window at a random offset (default: subset)",
    )
    p.add_argument("--device", default=None, help="cpu (default) or cuda")
    p.add_argument("--threads", type=int, default=None, metavar="N", help="torch CPU threads")
    p.add_argument("--seed", type=int, default=None, help="the first seed")
    p.add_argument(
        "--seeds",
        type=int,
        default=None,
        metavar="N",
        help="models trained, seeds --seed .. --seed + N - 1 (quick: 5, full: 1)",
    )
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.add_argument("--out", default=None, help="run folder (default: runs/arithmetic-<preset>)")


def add_stopping_arguments(p: argparse.ArgumentParser) -> None:
    """How training runs and ends: schedule, criterion, precision."""
    p.add_argument(
        "--lr-schedule",
        default=None,
        choices=["cosine", "constant"],
        help="after warm-up: cosine decay to 0 at --steps, or constant (quick: constant)",
    )
    p.add_argument(
        "--target-accuracy",
        type=float,
        default=None,
        metavar="A",
        help="stop once held-out exact match reaches A at every training length "
        "(quick: 0.99; full: none, train for --steps)",
    )
    p.add_argument(
        "--check-every", type=int, default=None, metavar="STEPS", help="steps between checks"
    )
    p.add_argument(
        "--check-samples",
        type=int,
        default=None,
        metavar="N",
        help="held-out problems per training length at each check",
    )
    p.add_argument(
        "--dtype",
        default=None,
        choices=["float32", "float64"],
        help="weights and arithmetic (quick: float64, full: float32)",
    )


def main(args: argparse.Namespace) -> int:
    study = make_config(args.preset, **{name: getattr(args, name) for name in STUDY_OPTIONS})
    done = run(ArithmeticRunConfig(study, out=args.out, progress=not args.quiet))
    for line in summary(done):
        print(line)
    return 0
