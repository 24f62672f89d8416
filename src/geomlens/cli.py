"""The ``geomlens`` command: a router. Each command's arguments and ``main`` live in its
module (``geomlens.commands.COMMANDS``); this assembles them, dispatches, and turns errors
into sentences.

Only the module of the command on the line is imported, so ``geomlens --help`` loads neither
torch nor transformers."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from types import ModuleType
from typing import TYPE_CHECKING, NoReturn

from geomlens.commands import COMMANDS, HELP
from geomlens.errors import GeomlensError, one_line, os_error_sentence
from geomlens.io.library_warnings import plain_warnings

if TYPE_CHECKING:
    from geomlens.capturing.capture import CaptureConfig
    from geomlens.engines import EngineConfig


class UsageError(GeomlensError):
    """A command line argparse refuses (unknown option, a value of the wrong type)."""


class Parser(argparse.ArgumentParser):
    """An argument parser whose errors are one sentence, reported like every other error."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message} (see `{self.prog} --help`).")


def command_module(name: str) -> ModuleType:
    """The module of ``geomlens <name>``, imported now (it may load torch)."""
    return importlib.import_module(COMMANDS[name].module)


def chosen_command(argv: Sequence[str]) -> str | None:
    """The command a command line names: its first word that is not an option (the
    top-level options take no values), or None."""
    first = next((a for a in argv if not a.startswith("-")), None)
    return first if first in HELP else None


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The parser of ``geomlens``. With ``argv``, only the command it names gets its
    arguments (only that module is imported: ``geomlens --help`` imports none); without,
    every command gets them."""
    parser = Parser(
        prog="geomlens", description="Measure the geometry of pretrained transformer models."
    )
    parser.add_argument(
        "--debug",
        action="store_true",
        help="show the traceback of an internal error (accepted anywhere on the line)",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    chosen = chosen_command(argv) if argv is not None else None
    for name, line in HELP.items():
        command = sub.add_parser(name, help=line)
        if argv is None or name == chosen:
            command_module(name).add_arguments(command)
    return parser


def capture_config(args: argparse.Namespace) -> CaptureConfig:
    """The capture config the capture options of ``args`` make (see ``config.options``)."""
    from geomlens.config.options import capture_config as make

    return make(args)


def engine_config(args: argparse.Namespace) -> EngineConfig:
    """The engine config the capture options of ``args`` make (see ``config.options``)."""
    from geomlens.config.options import engine_config as make

    return make(args)


MAX_MESSAGE = 500
"""Longest message printed (characters); longer ones are cut with an ellipsis."""


def bounded(message: str, limit: int = MAX_MESSAGE) -> str:
    """``message`` on one line, at most ``limit`` characters."""
    text = one_line(message)
    return text if len(text) <= limit else text[: limit - 3].rstrip() + "..."


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: the one place where errors become sentences.

    User errors and failed file operations (a full disk, no permission, a read-only file
    system) print one sentence and exit 2: what a run finished before them stays in its
    folder, and rerunning resumes. Anything else is a bug in geomlens: one line naming
    it and exit 1, or its traceback with ``--debug``.
    """
    args_list = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in args_list
    try:
        argv = [a for a in args_list if a != "--debug"]
        args = build_parser(argv).parse_args(argv)
        if debug:  # the libraries' warnings as Python prints them, paths and all
            return int(command_module(args.command).main(args))
        with plain_warnings():
            return int(command_module(args.command).main(args))
    except GeomlensError as exc:
        print(f"geomlens: error: {bounded(str(exc))}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"geomlens: error: {bounded(os_error_sentence(exc))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("geomlens: interrupted.", file=sys.stderr)
        return 130
    except Exception as exc:
        if debug:
            raise
        what = bounded(f"{type(exc).__name__}: {exc}", MAX_MESSAGE - 100)
        print(
            f"geomlens: internal error: {what}; rerun with --debug for the traceback.",
            file=sys.stderr,
        )
        return 1


if __name__ == "__main__":
    sys.exit(main())
