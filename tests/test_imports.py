"""Start-up stays light: ``import geomlens``, ``geomlens --help`` and ``geomlens models``
import neither torch nor transformers (nor numpy), and only a few dozen modules of their own.

Counted in a fresh interpreter, because this test process has imported everything already.
Times are measured in benchmarks/startup.py, not asserted here.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

HEAVY = ("torch", "transformers", "numpy", "scipy", "safetensors", "plotly", "matplotlib")

MAX_NEW_MODULES = 150
"""Modules a light entry point may add to a bare interpreter's (about 80 today; numpy alone
adds 140, torch over a thousand)."""


def imported_after(code: str) -> list[str]:
    """The modules a fresh interpreter holds after running ``code`` that it did not at start."""
    script = (
        "import sys, json, contextlib, io\n"
        "before = set(sys.modules)\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        + "".join(f"    {line}\n" for line in code.splitlines())
        + "print(json.dumps(sorted(set(sys.modules) - before)))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=120
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


ENTRY_POINTS = {
    "import geomlens": "import geomlens",
    "geomlens --help": (
        "from geomlens.cli import main\ntry:\n    main(['--help'])\nexcept SystemExit:\n    pass"
    ),
    "geomlens models": "from geomlens.cli import main\nmain(['models'])",
    "geomlens.GeomlensError": "import geomlens\ngeomlens.GeomlensError",
}


@pytest.mark.parametrize("entry", list(ENTRY_POINTS))
def test_entry_point_imports_no_heavy_module(entry: str) -> None:
    modules = imported_after(ENTRY_POINTS[entry])
    heavy = sorted({m.split(".")[0] for m in modules} & set(HEAVY))
    assert not heavy, f"{entry} imports {heavy}"
    assert len(modules) <= MAX_NEW_MODULES, f"{entry} imports {len(modules)} modules"


DRAWING = ("matplotlib", "plotly", "scipy")
"""Imported only where a figure is drawn or a statistic needs them, so a command refused
before its model loads does not pay for them."""

COMMANDS_REFUSING_EARLY = ("walk", "report", "sphere", "decompose")
"""Commands that refuse a text or a size the model cannot take before loading it."""


def test_command_modules_import_no_drawing_library() -> None:
    """Importing the four command modules (in one fresh interpreter: each costs torch's
    import) loads no drawing library; a refusal before loading pays for none of them."""
    from geomlens.commands import COMMANDS

    names = [COMMANDS[c].module for c in COMMANDS_REFUSING_EARLY]
    modules = imported_after("".join(f"import {name}\n" for name in names))
    assert set(names) <= set(modules)
    drawing = sorted({m.split(".")[0] for m in modules} & set(DRAWING))
    assert not drawing, f"importing {', '.join(COMMANDS_REFUSING_EARLY)} imports {drawing}"


def test_lazy_names_resolve_to_the_functions() -> None:
    """Each lazily imported public name is the object of the module it names."""
    import importlib

    import geomlens
    from geomlens import LAZY

    for name, module in LAZY.items():
        assert getattr(geomlens, name) is getattr(importlib.import_module(module), name)
    for name in geomlens.__all__:
        assert getattr(geomlens, name) is not None


def test_help_lines_match_the_command_modules() -> None:
    """``geomlens --help`` lists each command's own one-line help."""
    import importlib

    from geomlens.commands import COMMANDS, HELP

    for name, line in HELP.items():
        assert line == importlib.import_module(COMMANDS[name].module).HELP
