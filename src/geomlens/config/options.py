"""What the commands share on the command line: the capture options, declared once, and
what is made from that declaration: the command-line flags, the Python API's defaults and
signatures (``geomlens.api.commands``), the configs the options (or the API's keyword
arguments of the same names) make; also the default run folder, and printing a finished
run's summary.

An option is one line of ``CaptureArguments``: its name (the API's keyword argument, and
``--name-with-dashes`` on the command line), its type, and an ``Option`` saying which
config it fills, its help and how its text is read. An option that fills ``CaptureConfig``
or ``EngineConfig`` takes that config's default (written once, there); one that only the
run reads (``out``, ``progress``, ...) writes its default in its line.

A command's own options are declared the same way, as fields of its config made by
``command_option`` (``ReportConfig.limit``, ...): ``add_options`` makes their flags,
``read_options`` reads them back, and ``options_table`` writes the docs' table of any
declaration.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeVar, get_args

from geomlens.capturing.capture import CaptureConfig
from geomlens.config.figure_level import FIGURE_LEVELS, FigureLevel
from geomlens.corpus.dataset_rows import Dataset
from geomlens.engines import ENGINES, EngineConfig
from geomlens.errors import GeomlensError, seconds_option
from geomlens.models.held import HeldModel
from geomlens.models.placement import DEVICE_MAPS, parse_device_map, parse_max_memory

MAX_LAYERS = 1_000_000
"""The widest --layers range read (bounds memory before any model is known)."""

Dtype = Literal["float32", "bfloat16", "float16"]
"""The dtypes a model's weights and forward pass run in (float16 matmuls run on CPU too,
slower than float32)."""
Engine = Literal["local", "ray"]


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


AUTO = "auto"
"""``--contexts auto``: the capture grows in chunks until its claims are decided."""


def parse_contexts(text: str) -> int | str:
    """ "auto" or a number of windows (checked against 1 with the other limits)."""
    if text == AUTO:
        return AUTO
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--contexts takes a number of windows or 'auto' (got {text!r})"
        ) from None


def minutes_option(text: str) -> float:
    """A positive, finite number of minutes (``--budget``)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0 < value < math.inf:
        raise argparse.ArgumentTypeError(f"takes a positive number of minutes (got {text!r})")
    return value


AUTO_BUDGET = 60.0
"""``--budget``'s minutes when ``--contexts auto`` is given without it: a safety only. The
looks stop at a number of windows (``--max-contexts``), so the verdicts depend on the data
and the seed; the budget cuts a run short only on a machine far slower than the one the
schedule was sized on (1,024 windows in 5.2 min on 2 quiet cores), and the run says so."""

AUTO_MAX_CONTEXTS = 2048
"""``--max-contexts`` when ``--contexts auto`` is given without it: the last of the five
doubling looks 128 to 2,048 that the error spending was calibrated on (Bonferroni over
the five looks; ``tests/analyses/test_sequential.py`` plants the truth at a threshold)."""


def parse_max_contexts(text: str) -> int:
    """A number of windows, 2 or more (``--max-contexts``)."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 2:
        raise argparse.ArgumentTypeError(f"takes a number of windows, 2 or more (got {text!r})")
    return value


def auto_budget(contexts: int | str, budget: float | None) -> float:
    """The budget of a run: ``budget`` (default ``AUTO_BUDGET``) with ``--contexts auto``;
    refused with a fixed number of contexts, which it would not bound."""
    if budget is not None and contexts != AUTO:
        raise GeomlensError(
            f"--budget bounds only --contexts auto, but --contexts is {contexts}; give "
            "--contexts auto or leave --budget out."
        )
    return AUTO_BUDGET if budget is None else budget


def auto_max_contexts(contexts: int | str, max_contexts: int | None) -> int:
    """The most windows ``--contexts auto`` captures: ``max_contexts`` (default
    ``AUTO_MAX_CONTEXTS``); refused with a fixed number of contexts, or below 2."""
    if max_contexts is not None and contexts != AUTO:
        raise GeomlensError(
            f"--max-contexts bounds only --contexts auto, but --contexts is {contexts}; give "
            "--contexts auto or leave --max-contexts out."
        )
    if max_contexts is not None and (not isinstance(max_contexts, int) or max_contexts < 2):
        raise GeomlensError(
            f"--max-contexts takes a number of windows, 2 or more (got {max_contexts!r})."
        )
    return AUTO_MAX_CONTEXTS if max_contexts is None else max_contexts


def first_look(contexts: int | str) -> int:
    """The windows a capture starts with: ``contexts``, or with "auto" the default number
    (``CaptureConfig``'s), its first look."""
    if contexts == AUTO:
        return int(CaptureConfig().contexts)
    return int(contexts)


@dataclass(frozen=True)
class Option:
    """What the declaration says of an option besides its name, type and default.

    Attributes:
        fills: the config it fills: "capture" (``CaptureConfig``), "engine"
            (``EngineConfig``) or "run" (the command's run config: folder, progress, ...).
        field: the config's field it fills, when not named as the option (engine's "name").
        help: its line in ``--help``.
        parse: reads its command-line text (argparse's ``type``); None keeps the text.
        choices: the values the command line accepts.
        metavar: the placeholder ``--help`` shows for its value.
        flag: its command-line flag, when not ``--<name with dashes>``; a boolean whose
            default is True is turned off by its flag (``--quiet``: ``progress`` False).
        convert: makes a given value the config's (a ``Path`` its text); None is kept.
        default: the default of a "run" or "command" option (the others take their
            config's).
        action: argparse's action, for an option given several times ("append").
        group: options of one group are mutually exclusive on the command line.
        doc: its words in the docs' table when ``--help`` shows none.
    """

    fills: Literal["capture", "engine", "run", "command"]
    field: str | None = None
    help: str | None = None
    parse: Callable[[str], Any] | None = None
    choices: tuple[str, ...] | None = None
    metavar: str | None = None
    flag: str | None = None
    convert: Callable[[Any], Any] | None = None
    default: Any = None
    action: str | None = None
    group: str | None = None
    doc: str | None = None


def capture_option(parse: Callable[[str], Any] | None = None, **more: Any) -> Any:
    """An option filling ``CaptureConfig``'s field of its name, whose default it takes."""
    return Option("capture", parse=parse, **more)


def engine_option(parse: Callable[[str], Any] | None = None, **more: Any) -> Any:
    """An option filling ``EngineConfig``'s field of its name (or ``field=``), whose
    default it takes."""
    return Option("engine", parse=parse, **more)


def run_option(default: Any, parse: Callable[[str], Any] | None = None, **more: Any) -> Any:
    """An option of the run itself (not of what is captured or where), with its default."""
    return Option("run", parse=parse, default=default, **more)


def command_option(default: Any, parse: Callable[[str], Any] | None = None, **more: Any) -> Any:
    """A command's own option, declared as a field of its config (``ReportConfig.limit``):
    the field's default is the option's, and its ``Option`` the field's metadata."""
    option = Option("command", parse=parse, default=default, **more)
    return dataclasses.field(default=default, metadata={"option": option})


CONFIGS: dict[str, Any] = {"capture": CaptureConfig, "engine": EngineConfig}
"""The configs an option may fill, by ``Option.fills``."""

T = TypeVar("T")


def declared(cls: type[T]) -> type[T]:
    """``cls``, whose attributes are ``Option``s, as a frozen dataclass: each option a field
    with the ``Option`` as its metadata and its default resolved (a "run" option's own, or
    the default of the config field it fills)."""
    for name in cls.__annotations__:
        option: Option = cls.__dict__[name]
        default = option.default
        if option.fills != "run":
            fields = {f.name: f for f in dataclasses.fields(CONFIGS[option.fills])}
            default = fields[option.field or name].default
        setattr(cls, name, dataclasses.field(default=default, metadata={"option": option}))
    return dataclass(frozen=True, kw_only=True)(cls)


@declared
class CaptureArguments:
    """The capture options every capturing command takes, in the order of ``--help``: the
    one declaration the flags, the API's signatures and defaults, and the split into
    configs are made from. ``CaptureArguments()`` holds the defaults.

    To add an option: one line here, and its use (a field of the config it fills)."""

    model: str | Path | HeldModel = capture_option(
        help="bundled name, folder, .gguf or HF id", convert=str
    )
    corpus: str | Path | Sequence[str] | Dataset = capture_option(
        help="'bbc', a folder of .txt, a .jsonl file, or a saved dataset's folder", convert=str
    )
    text_column: str = capture_option(
        metavar="NAME", help="the text's field of a .jsonl corpus, or column of a dataset"
    )
    label_column: str = capture_option(
        metavar="NAME", help="the label's field of a .jsonl corpus, or column of a dataset"
    )
    contexts: int | Literal["auto"] = capture_option(
        parse_contexts,
        help="C: number of windows (default %(default)s), or 'auto': more in chunks until the "
        "position claims are decided (see --max-contexts)",
        convert=first_look,
    )
    max_contexts: int | None = run_option(
        None,
        parse_max_contexts,
        metavar="N",
        help=f"only with --contexts auto: the most windows captured; the looks double from "
        f"the first up to N (default {AUTO_MAX_CONTEXTS}), so the verdicts depend on the "
        "data and the seed only",
    )
    budget: float | None = run_option(
        None,
        minutes_option,
        metavar="MINUTES",
        help=f"only with --contexts auto: a safety on the minutes of the chunks after the "
        f"first look (default {AUTO_BUDGET:g}); when it stops the looks before "
        "--max-contexts, the run says it was cut short",
    )
    length: int = capture_option(int, help="T: tokens per window (default %(default)s)")
    layers: Sequence[int] | None = capture_option(
        parse_layers, help="'all' (default), 0,4,8 or 0-6", convert=tuple
    )
    batch_size: int = capture_option(int, doc="windows per forward pass")
    device: str = capture_option(help="cpu or cuda")
    dtype: Dtype = capture_option(
        choices=get_args(Dtype), doc="the model's weights and forward pass"
    )
    seed: int = capture_option(int, doc="seeds the choice of windows")
    offset: int = capture_option(int, help="tokens of each document to skip")
    balance: bool = capture_option(help="balance windows across labels")
    save_activations: bool = capture_option(help="also write an activation store")
    out: str | Path | None = run_option(None, help="run folder (default: runs/<command>-<model>)")
    second_moment: bool = capture_option(
        help="also accumulate sum h h^T per layer (d x d; needed for spectral norms)"
    )
    progress: bool = run_option(True, flag="--quiet", help="no progress bar")
    figures: FigureLevel = run_option(
        "all",
        choices=FIGURE_LEVELS,
        help="figures drawn: all (default), interactive (no static PNGs), none (numbers only)",
    )
    trust_remote_code: bool = capture_option(
        help="let a model folder run its own Python code (auto_map); off by default"
    )
    revision: str | None = capture_option(
        metavar="REV", help="a hub id's branch, tag or commit (default: its main branch)"
    )
    device_map: str | Mapping[str, Any] | None = capture_option(
        parse_device_map,
        metavar="{" + ",".join(DEVICE_MAPS) + "}",
        help="spread the model over several devices or offload part of it (accelerate; "
        "a dict of module names to devices from Python); --device is then unused",
    )
    max_memory: Mapping[str, str] | None = capture_option(
        parse_max_memory,
        metavar="DEV=SIZE,...",
        help="with --device-map: the most each device holds, e.g. 0=20GiB,cpu=64GiB",
    )
    offload_folder: str | Path | None = capture_option(
        metavar="DIR",
        help="with --device-map: where modules placed on disk are kept",
        convert=str,
    )
    checkpoint_every: float = run_option(
        30.0,
        seconds_option,
        metavar="SECONDS",
        help="save resumable progress at most this often (default 30)",
    )
    engine: Engine = engine_option(
        field="name",
        choices=ENGINES,
        help="where the capture runs: this process (default) or a Ray cluster",
    )
    ray_address: str | None = engine_option(
        metavar="ADDR",
        help="Ray cluster to join (default: RAY_ADDRESS, else a local Ray instance)",
    )
    workers: int | None = engine_option(int, metavar="N", help="Ray model workers (--engine ray)")
    threads: int | None = engine_option(
        int,
        metavar="N",
        help="torch threads per Ray worker (default 1), or of this process with --engine local",
    )
    activations_dir: str | Path | None = engine_option(
        metavar="DIR_OR_URL",
        help="where --save-activations writes shards: a folder or fsspec URL "
        "(default: DIR/activations)",
        convert=str,
    )


OPTIONS: dict[str, Option] = {
    f.name: f.metadata["option"]
    for f in dataclasses.fields(CaptureArguments)  # type: ignore[arg-type]
}
"""Each capture option's ``Option``, by name, in the order of ``--help``."""

DEFAULTS = CaptureArguments()
"""The capture options' defaults (SmolLM2, BBC, 128 windows of 128 tokens, ...)."""

RUN_OPTIONS = tuple(name for name, option in OPTIONS.items() if option.fills == "run")
"""The options the run config itself keeps (``CaptureRunConfig``'s fields besides its
capture and engine configs)."""


def option_defaults() -> dict[str, Any]:
    """Each capture option's default, by name (the Python API's)."""
    return {name: getattr(DEFAULTS, name) for name in OPTIONS}


def declared_options(declaration: type) -> dict[str, tuple[Option, Any]]:
    """Each option a dataclass declares (a field whose metadata holds an ``Option``), by
    name, in its order, with its default."""
    return {
        f.name: (f.metadata["option"], f.default)
        for f in dataclasses.fields(declaration)
        if "option" in f.metadata
    }


def own_options(declaration: type) -> tuple[str, ...]:
    """The names of the options a command's config declares (its own, besides the capture
    options)."""
    return tuple(declared_options(declaration))


def option_flag(name: str, option: Option) -> str:
    """The command-line flag of option ``name``: its ``flag``, or ``--name-with-dashes``."""
    return option.flag or "--" + name.replace("_", "-")


def flag_of(name: str) -> str:
    """The command-line flag of capture option ``name``."""
    return option_flag(name, OPTIONS[name])


def add_options(p: argparse.ArgumentParser, declaration: type) -> None:
    """The flags of the options ``declaration`` declares, in its order: a boolean is a switch
    (one whose default is True is turned off by its flag); the options of one ``group`` are
    mutually exclusive."""
    groups: dict[str, Any] = {}
    for name, (option, default) in declared_options(declaration).items():
        given: dict[str, Any] = {"help": option.help}
        if isinstance(default, bool):
            given["action"] = "store_true"
        else:
            given.update(
                action=option.action,
                default=default,
                type=option.parse,
                choices=option.choices,
                metavar=option.metavar,
            )
        into: Any = p
        if option.group is not None:
            if option.group not in groups:
                groups[option.group] = p.add_mutually_exclusive_group()
            into = groups[option.group]
        into.add_argument(
            option_flag(name, option), **{k: v for k, v in given.items() if v is not None}
        )


def add_capture_options(p: argparse.ArgumentParser) -> None:
    """The capture options every computing command accepts (``CaptureArguments``)."""
    add_options(p, CaptureArguments)


def _value(args: argparse.Namespace, name: str, option: Option, default: Any) -> Any:
    """The value option ``name`` takes from parsed ``args`` (a turned-off switch inverted)."""
    value = getattr(args, option_flag(name, option)[2:].replace("-", "_"))
    return not value if default is True else value


def read_options(args: argparse.Namespace, declaration: type) -> dict[str, Any]:
    """The values of the options ``declaration`` declares, by name, from parsed ``args``."""
    return {
        name: _value(args, name, option, default)
        for name, (option, default) in declared_options(declaration).items()
    }


def cli_value(args: argparse.Namespace, name: str) -> Any:
    """The value capture option ``name`` takes from parsed ``args``."""
    return _value(args, name, OPTIONS[name], getattr(DEFAULTS, name))


def capture_options(args: argparse.Namespace, *own: str) -> dict[str, Any]:
    """The Python API's arguments that the capture options give (geomlens.api), and the
    command's ``own`` options (same names)."""
    return {
        **{name: getattr(args, name) for name in own},
        **{n: cli_value(args, n) for n in OPTIONS},
    }


def command_options(args: argparse.Namespace, declaration: type) -> dict[str, Any]:
    """The Python API's arguments of a capturing command: the capture options' and those
    its config ``declaration`` declares."""
    return {**read_options(args, declaration), **read_options(args, CaptureArguments)}


def _shown(value: Any) -> str:
    """A default as the docs' table writes it."""
    return "-" if value is None else f"`{value}`"


def options_table(declaration: type) -> str:
    """The Markdown table of the options ``declaration`` declares, in its order: flag (with
    its value's placeholder or choices), default, and what it sets (its help)."""
    lines = ["| option | default | what it sets |", "| --- | --- | --- |"]
    for name, (option, default) in declared_options(declaration).items():
        flag = option_flag(name, option)
        if isinstance(default, bool):
            shown, value = flag, "off"
        else:
            if option.choices is not None:
                placeholder = "{" + ",".join(option.choices) + "}"
            else:
                placeholder = option.metavar or flag[2:].replace("-", "_").upper()
            shown, value = f"{flag} {placeholder}", _shown(default)
        words = (option.help or option.doc or "").replace("%(default)s", str(default))
        for text, escaped in (("|", "\\|"), ("<", "&lt;"), (">", "&gt;")):
            words = words.replace(text, escaped)
        lines.append(f"| `{shown}` | {value} | {words} |")
    return "\n".join(lines) + "\n"


def configs(arguments: Mapping[str, Any]) -> tuple[CaptureConfig, EngineConfig]:
    """The capture and engine configs of a function's (already checked) arguments, as the
    CLI makes them from its capture options."""
    split: dict[str, dict[str, Any]] = {fills: {} for fills in CONFIGS}
    for name, option in OPTIONS.items():
        if option.fills in split:
            value = arguments[name]
            if value is not None and option.convert is not None:
                value = option.convert(value)
            split[option.fills][option.field or name] = value
    return CaptureConfig(**split["capture"]), EngineConfig(**split["engine"])


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
