"""``geomlens concepts``: baseline, concept-space tests and sweeps written to one run folder
(its step: ``step.py`` beside it)."""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, get_args

from geomlens.analyses.concepts.step import ConceptsConfig, run_concepts
from geomlens.analyses.concepts.tasks import Task, load_task
from geomlens.analyses.result import Result, result_of
from geomlens.config.options import (
    OPTIONS,
    Dtype,
    add_options,
    command_option,
    finished,
    folder_for,
    parse_limit,
    read_options,
)
from geomlens.models.view import ModelView


@dataclass(frozen=True, kw_only=True)
class ConceptsArguments:
    """The options of ``geomlens concepts`` (the keyword arguments of ``geomlens.concepts``),
    in the order of ``--help``: the one declaration its flags and the docs' table are made
    from. Those it shares with the capture options keep their help."""

    model: str | Path = command_option("smollm2-135m", help=OPTIONS["model"].help)
    task: str | Path = command_option("timedial", help="task file, or a name in the data folder")
    data_dir: str | Path | None = command_option(
        None, help="where task names are looked up (default: $GEOMLENS_DATA)"
    )
    shots: int = command_option(0, int, metavar="K", help="solved examples per item")
    limit: int | None = command_option(
        50, parse_limit, metavar="N", help="first N items, or 'all' (50)"
    )
    schemes: Sequence[str] | None = command_option(
        None,
        flag="--scheme",
        action="append",
        metavar="S",
        help="a preset (sanity, standard, sentences_E, examples_mid, similarity_dot, "
        "similarity_mid) or key=value pairs; repeat for several (default: sanity, sentences_E, "
        "examples_mid, similarity_dot)",
    )
    sweep: str | Path | None = command_option(
        None, metavar="GRID", help="YAML or JSON grid of schemes"
    )
    seed: int = command_option(0, int, help="few-shot sampling and bootstrap seed")
    device: str = command_option("cpu", help=OPTIONS["device"].help)
    dtype: Dtype = command_option("float32", choices=get_args(Dtype))
    batch_tokens: int = command_option(2048, int, help="padded tokens per forward")
    feed: Literal["encoder", "decoder"] = command_option(
        "encoder",
        choices=("encoder", "decoder"),
        help="encoder-decoders: test 1's vectors are the encoder's input (encoder, default) "
        "or its output, through its final norm (decoder)",
    )
    progress: bool = command_option(True, flag="--quiet", help="no progress output")
    trust_remote_code: bool = command_option(False, help=OPTIONS["trust_remote_code"].help)
    out: str | Path | None = command_option(
        None, help="run folder (default: runs/concepts-<model>)"
    )


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
    """The options ``ConceptsArguments`` declares."""
    add_options(parser, ConceptsArguments)


def main(args: argparse.Namespace) -> int:
    return finished(run(ConceptsRunConfig.of(read_options(args, ConceptsArguments))))
