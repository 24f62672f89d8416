"""What the commands share on the command line: the capture options, their parsers, the
configs the options (or the Python API's keyword arguments of the same names) make, the
default run folder, and printing a finished run's summary."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from geomlens.capture.capture import CaptureConfig
from geomlens.engines import EngineConfig
from geomlens.errors import seconds_option
from geomlens.report.figure_level import FIGURE_LEVELS

MAX_LAYERS = 1_000_000
"""The widest --layers range read (bounds memory before any model is known)."""


def parse_layers(text: str) -> tuple[int, ...] | None:
    """ "all", or a list like "0,4,8" or "0-6" (ranges inclusive)."""
    if text == "all":
        return None
    layers: list[int] = []
    try:
        for part in text.split(","):
            if "-" in part:
                lo, hi = part.split("-")
                if int(hi) - int(lo) >= MAX_LAYERS:
                    raise argparse.ArgumentTypeError(
                        f"--layers range {part} spans more than {MAX_LAYERS} layers; "
                        "no model has that many."
                    )
                layers.extend(range(int(lo), int(hi) + 1))
            else:
                layers.append(int(part))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--layers takes 'all', a list like 0,4,8 or a range like 0-6 (got {text!r})"
        ) from None
    return tuple(layers)


def parse_limit(text: str) -> int | None:
    """ "all" or a positive number of items."""
    if text == "all":
        return None
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--limit takes a number or 'all' (got {text!r})"
        ) from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"--limit must be at least 1 (got {value})")
    return value


def add_capture_options(p: argparse.ArgumentParser) -> None:
    """The capture options every computing command accepts."""
    p.add_argument("--model", default="smollm2-135m", help="bundled name, folder, .gguf or HF id")
    p.add_argument("--corpus", default="bbc", help="'bbc', a folder of .txt, or a .jsonl file")
    p.add_argument("--contexts", type=int, default=128, help="C: number of windows")
    p.add_argument("--length", type=int, default=128, help="T: tokens per window")
    p.add_argument(
        "--layers", type=parse_layers, default=None, help="'all' (default), 0,4,8 or 0-6"
    )
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--device", default="cpu", help="cpu or cuda")
    p.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--offset", type=int, default=0, help="tokens of each document to skip")
    p.add_argument("--balance", action="store_true", help="balance windows across labels")
    p.add_argument("--save-activations", action="store_true", help="also write an activation store")
    p.add_argument("--out", default=None, help="run folder (default: runs/<command>-<model>)")
    p.add_argument(
        "--second-moment",
        action="store_true",
        help="also accumulate sum h h^T per layer (d x d; needed for spectral norms)",
    )
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument(
        "--figures",
        default="all",
        choices=FIGURE_LEVELS,
        help="figures drawn: all (default), interactive (no static PNGs), none (numbers only)",
    )
    p.add_argument(
        "--trust-remote-code",
        action="store_true",
        help="let a model folder run its own Python code (auto_map); off by default",
    )
    p.add_argument(
        "--checkpoint-every",
        type=seconds_option,
        default=30.0,
        metavar="SECONDS",
        help="save resumable progress at most this often (default 30)",
    )
    p.add_argument(
        "--engine",
        default="local",
        choices=["local", "ray"],
        help="where the capture runs: this process (default) or a Ray cluster",
    )
    p.add_argument(
        "--ray-address",
        default=None,
        metavar="ADDR",
        help="Ray cluster to join (default: RAY_ADDRESS, else a local Ray instance)",
    )
    p.add_argument(
        "--workers", type=int, default=None, metavar="N", help="Ray model workers (--engine ray)"
    )
    p.add_argument(
        "--threads",
        type=int,
        default=None,
        metavar="N",
        help="torch threads per Ray worker (default 1), or of this process with --engine local",
    )
    p.add_argument(
        "--activations-dir",
        default=None,
        metavar="DIR_OR_URL",
        help="where --save-activations writes shards: a folder or fsspec URL "
        "(default: DIR/activations)",
    )


def capture_options(args: argparse.Namespace, *own: str) -> dict[str, Any]:
    """The Python API's arguments that the capture options give (geomlens.api), and the
    command's ``own`` options (same names)."""
    return {
        **{name: getattr(args, name) for name in own},
        "model": args.model,
        "corpus": args.corpus,
        "contexts": args.contexts,
        "length": args.length,
        "layers": args.layers,
        "batch_size": args.batch_size,
        "device": args.device,
        "dtype": args.dtype,
        "seed": args.seed,
        "offset": args.offset,
        "balance": args.balance,
        "save_activations": args.save_activations,
        "second_moment": args.second_moment,
        "trust_remote_code": args.trust_remote_code,
        "checkpoint_every": args.checkpoint_every,
        "engine": args.engine,
        "ray_address": args.ray_address,
        "workers": args.workers,
        "threads": args.threads,
        "activations_dir": args.activations_dir,
        "out": args.out,
        "progress": not args.quiet,
        "figures": args.figures,
    }


CAPTURE_OPTIONS = (
    "model",
    "corpus",
    "contexts",
    "length",
    "layers",
    "batch_size",
    "device",
    "dtype",
    "seed",
    "offset",
    "balance",
    "save_activations",
    "second_moment",
    "trust_remote_code",
)
"""The arguments that make the capture config (the CLI's capture options)."""
ENGINE_OPTIONS = {
    "engine": "name",
    "ray_address": "ray_address",
    "workers": "workers",
    "threads": "threads",
    "activations_dir": "activations_dir",
}
"""Arguments that make the engine config, with the field each fills."""


def configs(arguments: Mapping[str, Any]) -> tuple[CaptureConfig, EngineConfig]:
    """The capture and engine configs of a function's (already checked) arguments, as the
    CLI makes them from its capture options."""
    capture = {k: arguments[k] for k in CAPTURE_OPTIONS}
    capture.update(model=str(capture["model"]), corpus=str(capture["corpus"]))
    if capture["layers"] is not None:
        capture["layers"] = tuple(capture["layers"])
    engine = {field: arguments[k] for k, field in ENGINE_OPTIONS.items()}
    if engine["activations_dir"] is not None:
        engine["activations_dir"] = str(engine["activations_dir"])
    return CaptureConfig(**capture), EngineConfig(**engine)


def capture_config(args: argparse.Namespace) -> CaptureConfig:
    """The capture config the capture options of ``args`` make."""
    return configs(capture_options(args))[0]


def engine_config(args: argparse.Namespace) -> EngineConfig:
    """The engine config the capture options of ``args`` make."""
    return configs(capture_options(args))[1]


def default_out(command: str, model: str) -> str:
    """The run folder a command writes when none is given: ``runs/<command>-<model>``."""
    safe = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in model.strip("/"))
    return f"runs/{command}-{safe}"


def folder_for(command: str, out: str | Path | None, model: str | Path) -> str | Path:
    """``out``, or the command's default run folder for ``model``."""
    return out if out is not None else default_out(command, str(model))


def finished(result: Any) -> int:
    """Print what a command's run says when it finishes (``Result.summary``)."""
    for line in result.summary():
        print(line)
    return 0
