"""Every option is declared once (``CaptureArguments``, and each command's config for its
own options): the flags, the Python API's defaults and the docs' options table are made from
that declaration, and no command writes a flag of its own by hand."""

from __future__ import annotations

import argparse
import inspect
import re
from pathlib import Path

import pytest

import geomlens.api.commands as api
from geomlens.cli import UsageError, build_parser, command_module
from geomlens.config.options import (
    CaptureArguments,
    command_options,
    declared_options,
    option_flag,
    options_table,
    read_options,
)

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src" / "geomlens"

DECLARED = {
    "capture": (CaptureArguments,),
    "decompose": (CaptureArguments, "DecomposeConfig"),
    "sphere": (CaptureArguments, "SphereConfig"),
    "walk": (CaptureArguments, "WalkConfig"),
    "report": (CaptureArguments, "ReportConfig"),
    "concepts": ("ConceptsArguments",),
}
"""The declarations each command's flags come from, in the order of ``--help`` (a name is a
class of the command's module)."""

BY_HAND = {"commands/models.py", "commands/data.py", "commands/compare.py"}
BY_HAND |= {"analyses/arithmetic/command.py"}
"""Commands whose flags are no capture or report options (listing models, fetching data,
comparing run folders, training the arithmetic models on presets)."""


def declarations(command: str) -> list[type]:
    module = command_module(command)
    return [getattr(module, d) if isinstance(d, str) else d for d in DECLARED[command]]


def parser_of(command: str) -> argparse.ArgumentParser:
    parser = build_parser([command])
    sub = next(a for a in parser._actions if a.dest == "command")
    return sub.choices[command]  # type: ignore[index, no-any-return]


@pytest.mark.parametrize("command", DECLARED)
def test_every_flag_comes_from_a_declaration(command):
    """The command's flags are its declarations' options, in order, each with the declared
    default, help, parse, choices and metavar (a switch off by default)."""
    expected = [
        (name, option, default)
        for declaration in declarations(command)
        for name, (option, default) in declared_options(declaration).items()
    ]
    actions = [a for a in parser_of(command)._actions if a.option_strings != ["-h", "--help"]]
    assert [a.option_strings for a in actions] == [
        [option_flag(name, option)] for name, option, _ in expected
    ]
    for action, (name, option, default) in zip(actions, expected, strict=True):
        assert action.help == option.help, name
        if isinstance(default, bool):
            assert isinstance(action, argparse._StoreTrueAction), name
            assert action.default is False, name
        else:
            assert action.default == default, name
            assert action.type is option.parse, name
            assert action.choices == option.choices, name
            assert action.metavar == option.metavar, name


@pytest.mark.parametrize("command", [c for c in DECLARED if c != "capture"])
def test_the_api_defaults_are_the_declared_ones(command):
    """``geomlens.<command>(...)``'s keyword defaults equal the declarations' (a declared
    default changed alone fails here)."""
    signature = inspect.signature(getattr(api, command)).parameters
    for declaration in declarations(command):
        for name, (_, default) in declared_options(declaration).items():
            assert signature[name].default == default, (command, name)


def test_the_parsed_options_are_the_api_arguments():
    """A command line read back through the declarations: own options, a repeated one, a
    switch that turns an option off, and a capture option."""
    argv = ["walk", "--generate", "3", "--text-file", "t.txt", "--contexts", "16", "--quiet"]
    args = build_parser(argv).parse_args(argv)
    got = command_options(args, command_module("walk").WalkConfig)
    assert (got["generate"], got["text_file"], got["text"]) == (3, "t.txt", None)
    assert (got["contexts"], got["progress"]) == (16, False)
    argv = ["concepts", "--scheme", "sanity", "--scheme", "k=v", "--quiet", "--limit", "all"]
    args = build_parser(argv).parse_args(argv)
    got = read_options(args, command_module("concepts").ConceptsArguments)
    assert got["schemes"] == ["sanity", "k=v"] and got["progress"] is False
    assert got["limit"] is None and got["model"] == "smollm2-135m"


@pytest.mark.parametrize("command", ["walk", "report"])
def test_text_and_text_file_stay_exclusive(command):
    argv = [command, "--text", "a", "--text-file", "b"]
    with pytest.raises(UsageError, match="not allowed with argument"):
        build_parser(argv).parse_args(argv)


def test_no_command_writes_its_flags_by_hand():
    """``add_argument`` appears only in the declaration's ``add_options`` and in the commands
    whose flags are no capture or report options."""
    modules = [SRC / "cli.py", *(SRC / "commands").glob("*.py")]
    modules += (SRC / "analyses").glob("*/command.py")
    found = {
        str(path.relative_to(SRC))
        for path in modules
        if re.search(r"\.add_argument\(", path.read_text(encoding="utf-8"))
    }
    assert found - {"cli.py"} == BY_HAND  # cli.py: the top-level --debug only
    assert re.findall(r'add_argument\(\s*"(--[\w-]+)"', (SRC / "cli.py").read_text()) == ["--debug"]


def test_the_docs_options_table_is_the_generated_one():
    """docs/capture.md's options table is ``options_table(CaptureArguments)``; to remake it,
    paste that between the two markers."""
    text = (ROOT / "docs" / "capture.md").read_text(encoding="utf-8")
    begin, end = "<!-- options table: begin -->\n", "<!-- options table: end -->"
    table = text[text.index(begin) + len(begin) : text.index(end)]
    assert table == options_table(CaptureArguments)
    assert "| `--contexts CONTEXTS` | `128` |" in table  # CaptureConfig's default
    assert "| `--quiet` | off | no progress bar |" in table


def test_a_declared_option_is_a_flag_and_a_table_row():
    """A toy declaration: its flags, the values read back and its docs row come from it."""
    from dataclasses import dataclass

    from geomlens.config.options import add_options, command_option

    @dataclass(frozen=True)
    class Toy:
        steps: int = command_option(7, int, metavar="N", help="steps | taken")
        fast: bool = command_option(False, help="go fast")
        progress: bool = command_option(True, flag="--quiet", help="say nothing")

    parser = argparse.ArgumentParser()
    add_options(parser, Toy)
    assert read_options(parser.parse_args([]), Toy) == {
        "steps": 7,
        "fast": False,
        "progress": True,
    }
    args = parser.parse_args(["--steps", "3", "--fast", "--quiet"])
    assert read_options(args, Toy) == {"steps": 3, "fast": True, "progress": False}
    assert options_table(Toy).splitlines()[2:] == [
        "| `--steps N` | `7` | steps \\| taken |",
        "| `--fast` | off | go fast |",
        "| `--quiet` | off | say nothing |",
    ]
