"""``geomlens concepts``: baseline, concept-space tests and sweeps written to one run folder
(its step: ``step.py`` beside it)."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from geomlens.analyses.concepts.step import ConceptsConfig, run_concepts
from geomlens.analyses.concepts.tasks import Task, load_task
from geomlens.analyses.result import Result, result_of
from geomlens.config.options import finished, folder_for, parse_limit
from geomlens.models.view import ModelView


def task_of(config: ConceptsConfig) -> Task:
    """The task a config names (for callers that want to inspect it first)."""
    return load_task(config.task, config.data_dir)


@dataclass(frozen=True)
class ConceptsRunConfig:
    """What ``geomlens concepts`` runs.

    Attributes:
        concepts: the tests (model, task, schemes, ...: the run's identity).
        out: the run folder.
        progress: show progress output.
    """

    concepts: ConceptsConfig
    out: str | Path
    progress: bool = True

    @classmethod
    def of(cls, arguments: Mapping[str, Any]) -> ConceptsRunConfig:
        """The config of ``geomlens.concepts(...)``'s keyword arguments (the command
        line's options under the same names)."""
        data_dir, sweep = arguments["data_dir"], arguments["sweep"]
        concepts = ConceptsConfig(
            model=str(arguments["model"]),
            task=str(arguments["task"]),
            shots=arguments["shots"],
            limit=arguments["limit"],
            schemes=tuple(arguments["schemes"] or ()),
            sweep=None if sweep is None else str(sweep),
            seed=arguments["seed"],
            data_dir=None if data_dir is None else str(data_dir),
            device=arguments["device"],
            dtype=arguments["dtype"],
            batch_tokens=arguments["batch_tokens"],
            feed=arguments["feed"],
            trust_remote_code=arguments["trust_remote_code"],
        )
        out = folder_for("concepts", arguments["out"], arguments["model"])
        return cls(concepts=concepts, out=out, progress=arguments["progress"])


def run(config: ConceptsRunConfig, *, view: ModelView | None = None) -> Result:
    """``geomlens concepts`` (and ``geomlens.concepts(...)``)."""
    done = run_concepts(config.concepts, config.out, view=view, progress=config.progress)
    return result_of("concepts", done)


HELP = "concept-space tests on a multiple-choice task (Singh 2023)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    p = parser
    p.add_argument("--model", default="smollm2-135m", help="bundled name, folder, .gguf or HF id")
    p.add_argument("--task", default="timedial", help="task file, or a name in the data folder")
    p.add_argument(
        "--data-dir", default=None, help="where task names are looked up (default: $GEOMLENS_DATA)"
    )
    p.add_argument("--shots", type=int, default=0, metavar="K", help="solved examples per item")
    p.add_argument(
        "--limit", type=parse_limit, default=50, metavar="N", help="first N items, or 'all' (50)"
    )
    p.add_argument(
        "--scheme",
        action="append",
        default=None,
        metavar="S",
        help="a preset (sanity, standard, sentences_E, examples_mid, similarity_dot, "
        "similarity_mid) or key=value pairs; repeat for several (default: sanity, sentences_E, "
        "examples_mid, similarity_dot)",
    )
    p.add_argument("--sweep", default=None, metavar="GRID", help="YAML or JSON grid of schemes")
    p.add_argument("--seed", type=int, default=0, help="few-shot sampling and bootstrap seed")
    p.add_argument("--device", default="cpu", help="cpu or cuda")
    p.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    p.add_argument("--batch-tokens", type=int, default=2048, help="padded tokens per forward")
    p.add_argument(
        "--feed",
        default="encoder",
        choices=["encoder", "decoder"],
        help="encoder-decoders: test 1's vectors are the encoder's input (encoder, default) "
        "or its output, through its final norm (decoder)",
    )
    p.add_argument("--quiet", action="store_true", help="no progress output")
    p.add_argument(
        "--trust-remote-code",
        action="store_true",
        help="let a model folder run its own Python code (auto_map); off by default",
    )
    p.add_argument("--out", default=None, help="run folder (default: runs/concepts-<model>)")


def main(args: argparse.Namespace) -> int:
    names = ["model", "task", "data_dir", "shots", "limit", "sweep", "seed", "device", "dtype"]
    names += ["batch_tokens", "feed", "trust_remote_code", "out"]
    arguments = {name: getattr(args, name) for name in names}
    arguments.update(schemes=args.scheme, progress=not args.quiet)
    return finished(run(ConceptsRunConfig.of(arguments)))
