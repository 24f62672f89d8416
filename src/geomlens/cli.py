"""The ``geomlens`` command: each command's arguments and ``main`` live in its module in
``geomlens.commands``; this assembles them, dispatches, and turns errors into sentences."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from types import ModuleType
from typing import NoReturn

from geomlens.commands import (
    arithmetic,
    capture,
    compare,
    concepts,
    data,
    decompose,
    models,
    report,
    sphere,
    walk,
)
from geomlens.commands.options import capture_config, engine_config  # noqa: F401 (tests use)
from geomlens.errors import GeomlensError, one_line, os_error_sentence


class UsageError(GeomlensError):
    """A command line argparse refuses (unknown option, a value of the wrong type)."""


class Parser(argparse.ArgumentParser):
    """An argument parser whose errors are one sentence, reported like every other error."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message} (see `{self.prog} --help`).")


COMMANDS: dict[str, ModuleType] = {
    "models": models,
    "capture": capture,
    "decompose": decompose,
    "walk": walk,
    "sphere": sphere,
    "arithmetic": arithmetic,
    "concepts": concepts,
    "data": data,
    "report": report,
    "compare": compare,
}
"""``geomlens <name>`` -> its module in ``geomlens.commands``: ``HELP`` (one line),
``add_arguments(parser)`` and ``main(args) -> exit code``. A new command is one line here."""


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="geomlens", description="Measure the geometry of pretrained transformer models."
    )
    parser.add_argument(
        "--debug",
        action="store_true",
        help="show the traceback of an internal error (accepted anywhere on the line)",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    for name, module in COMMANDS.items():
        module.add_arguments(sub.add_parser(name, help=module.HELP))
    return parser


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
        args = build_parser().parse_args([a for a in args_list if a != "--debug"])
        return int(COMMANDS[args.command].main(args))
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
