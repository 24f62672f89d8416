"""The commands: the table ``geomlens`` dispatches on, and the commands that are no single
analysis's (models, capture, data, report, compare).

``COMMANDS`` maps each command to its module and its one line for ``geomlens --help``; an
analysis's command is its folder's (``analyses/<folder>/command.py``, named by the folder's
``COMMAND``). Building the table imports no command module, so listing them loads neither
torch nor transformers (each module's own ``HELP`` is the same line, tested).
"""

from __future__ import annotations

import importlib
from typing import NamedTuple

from geomlens.analyses import FOLDERS


class Command(NamedTuple):
    """One ``geomlens <name>``: the module holding its ``add_arguments`` and ``main``, and
    its line in ``geomlens --help``."""

    module: str
    help: str


def own(name: str, help: str) -> Command:
    return Command(f"geomlens.commands.{name}", help)


def analysis_commands() -> dict[str, Command]:
    """The analyses' commands, in the order of ``analyses.FOLDERS``."""
    found = {}
    for folder in FOLDERS:
        declared = getattr(importlib.import_module(f"geomlens.analyses.{folder}"), "COMMAND", None)
        if declared is not None:
            name, line = declared
            found[name] = Command(f"geomlens.analyses.{folder}.command", line)
    return found


COMMANDS: dict[str, Command] = {
    "models": own("models", "list the bundled models (or the supported families)"),
    "capture": own("capture", "stream a corpus through a model into statistics"),
    **analysis_commands(),
    "data": own("data", "rebuild offline data folders"),
    "report": own("report", "every analysis on one capture, in one report.html"),
    "compare": own(
        "compare", "per-layer numbers and the papers' claims of several runs side by side"
    ),
}
"""``geomlens <name>`` -> its module and help line, in the order ``geomlens --help`` lists them."""

HELP = {name: command.help for name, command in COMMANDS.items()}
"""``geomlens <name>`` -> its one-line help."""
