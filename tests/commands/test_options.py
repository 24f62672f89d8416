"""The capture options are declared once (commands/options.py's ``CaptureArguments``): the
flags, the Python API's signatures and defaults, and the configs all come from it."""

from __future__ import annotations

import dataclasses
import inspect
import re
from pathlib import Path
from typing import get_type_hints

import pytest

import geomlens.api.commands as api
from geomlens.capturing.capture import CaptureConfig
from geomlens.cli import build_parser, command_module
from geomlens.config.options import (
    AUTO_MAX_CONTEXTS,
    DEFAULTS,
    OPTIONS,
    CaptureArguments,
    capture_options,
    configs,
    flag_of,
    options_table,
)
from geomlens.engines import EngineConfig

SRC = Path(__file__).resolve().parents[2] / "src"
CAPTURING = ("capture", "decompose", "sphere", "walk", "report")

FLAGS = [
    "--model",
    "--corpus",
    "--text-column",
    "--label-column",
    "--contexts",
    "--max-contexts",
    "--budget",
    "--length",
    "--layers",
    "--batch-size",
    "--device",
    "--dtype",
    "--seed",
    "--offset",
    "--balance",
    "--save-activations",
    "--out",
    "--second-moment",
    "--quiet",
    "--figures",
    "--trust-remote-code",
    "--revision",
    "--device-map",
    "--max-memory",
    "--offload-folder",
    "--checkpoint-every",
    "--engine",
    "--ray-address",
    "--workers",
    "--threads",
    "--activations-dir",
]
"""The capture options' flags, in the order of ``--help`` (as they were written out by hand,
and ``--max-contexts``, ``--budget`` of ``--contexts auto``)."""


def test_the_default_of_contexts_is_written_once_in_src():
    """128 attached to ``contexts`` (``contexts: int = 128``, ``"contexts": 128``,
    ``--contexts ... default=128``) appears in one place: the config it fills."""
    pattern = re.compile(r"\bcontexts\b[^\n]{0,60}?[=:]\s*128\b")
    found = [
        f"{path.relative_to(SRC)}:{number}"
        for path in sorted(SRC.rglob("*.py"))
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if pattern.search(line)
    ]
    assert found == ["geomlens/capturing/capture.py:" + str(_line_of("contexts: int = 128"))]


def _line_of(text: str) -> int:
    lines = (SRC / "geomlens" / "capturing" / "capture.py").read_text().splitlines()
    return next(i for i, line in enumerate(lines, 1) if line.strip() == text)


def test_the_flags_are_the_declared_options_in_order():
    assert [flag_of(name) for name in OPTIONS] == FLAGS
    parser = build_parser(["capture"])
    sub = next(a for a in parser._actions if a.dest == "command").choices["capture"]
    shown = [a.option_strings[0] for a in sub._actions if a.option_strings[0] != "-h"]
    assert shown == FLAGS


@pytest.mark.parametrize("command", CAPTURING)
def test_cli_api_and_config_defaults_are_one(command):
    """For every option: the CLI's parsed default == the API signature's default == the
    default of the config field it fills (CaptureConfig, EngineConfig, or the run config)."""
    args = build_parser([command]).parse_args([command])
    cli = capture_options(args)
    signature = inspect.signature(getattr(api, command)).parameters
    run_config = command_module(command)
    config_class = next(
        c
        for c in vars(run_config).values()
        if isinstance(c, type) and hasattr(c, "of") and getattr(c, "command", None) == command
    )
    own = {n: p.default for n, p in signature.items() if n not in OPTIONS and n != "view"}
    made = config_class.of(api.with_options(own))
    capture_default, engine_default = CaptureConfig(), EngineConfig()
    for name, option in OPTIONS.items():
        declared = getattr(DEFAULTS, name)
        assert cli[name] == declared, name
        assert signature[name].default == declared, name
        if option.fills == "capture":
            assert getattr(capture_default, option.field or name) == declared, name
        elif option.fills == "engine":
            assert getattr(engine_default, option.field or name) == declared, name
        elif name != "out":  # out: the command's default folder
            assert getattr(made, name) == declared, name
    assert made.capture == capture_default and made.engine == engine_default
    assert str(made.out) == f"runs/{command}-{DEFAULTS.model}"
    assert configs(cli) == (capture_default, engine_default)


def test_the_typed_dict_names_the_declared_options_and_types():
    """``api.CaptureOptions`` (what a type checker reads for ``**options``) is a type-only
    copy of the declaration: the same names, in the same order, with the same types."""
    declared = get_type_hints(CaptureArguments)
    typed = get_type_hints(api.CaptureOptions)
    assert list(typed) == list(declared)
    assert typed == declared
    assert {f.name: f.default for f in dataclasses.fields(DEFAULTS)} == api.CAPTURE_DEFAULTS


def test_an_option_filling_a_config_fills_a_field_it_has():
    capture = {f.name for f in dataclasses.fields(CaptureConfig)}
    engine = {f.name for f in dataclasses.fields(EngineConfig)}
    filled = {"capture": capture, "engine": engine}
    for name, option in OPTIONS.items():
        if option.fills != "run":
            assert (option.field or name) in filled[option.fills], name
    assert capture == {n for n, o in OPTIONS.items() if o.fills == "capture"}


def test_contexts_auto_is_the_first_look_and_a_budget_in_the_run_config():
    """``--contexts auto --budget 5``: the capture config starts at the default contexts,
    the run config keeps "auto" and the budget, the run's identity says both, and the
    request carries the rule the decomposition registers."""
    from geomlens.analyses import registry
    from geomlens.analyses.decomposition import sequential
    from geomlens.analyses.decomposition.command import DecomposeConfig
    from geomlens.pipeline.request import AutoContexts

    argv = ["decompose", "--contexts", "auto", "--budget", "5", "--max-contexts", "512"]
    made = DecomposeConfig.of(capture_options(build_parser(argv).parse_args(argv), "skip_first"))
    assert made.auto_contexts and made.budget == 5.0 and made.max_contexts == 512
    assert made.capture.contexts == CaptureConfig().contexts
    plain = ["decompose", "--contexts", "64"]
    fixed = DecomposeConfig.of(capture_options(build_parser(plain).parse_args(plain), "skip_first"))
    assert not fixed.auto_contexts and fixed.capture.contexts == 64
    request = registry.run_request("decompose", made.capture, "out", auto=AutoContexts(5.0))
    assert request.auto is not None and request.auto.rule is sequential.RULE
    identity = request.identity()
    assert identity["contexts"] == "auto" and identity["budget"] == 5.0
    assert identity["max_contexts"] == AUTO_MAX_CONTEXTS
    assert registry.run_request("decompose", fixed.capture, "out").identity()["contexts"] == 64


@pytest.mark.parametrize(
    "argv",
    [
        ["--contexts", "many"],
        ["--budget", "0"],
        ["--budget", "nan"],
        ["--max-contexts", "1"],
        ["--max-contexts", "many"],
    ],
)
def test_contexts_and_budget_refuse_what_they_cannot_read(argv):
    from geomlens.cli import UsageError

    with pytest.raises(UsageError, match=argv[0]):
        build_parser(["capture"]).parse_args(["capture", *argv])


def test_the_api_refuses_a_budget_of_no_minutes_before_loading(tmp_path):
    from geomlens.errors import GeomlensError

    with pytest.raises(GeomlensError, match="--budget takes a positive number of minutes"):
        api.capture(contexts="auto", budget=0.0, out=str(tmp_path / "run"))
    assert not (tmp_path / "run").exists()


def test_a_budget_with_fixed_contexts_is_refused_in_one_sentence(tmp_path, capsys):
    """--budget bounds only --contexts auto: with a fixed number it would be ignored, so the
    command line (exit 2) and the API refuse it before anything loads."""
    from geomlens.cli import main
    from geomlens.errors import GeomlensError

    out = tmp_path / "run"
    code = main(["decompose", "--contexts", "64", "--budget", "5", "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert "--budget bounds only --contexts auto" in err
    with pytest.raises(GeomlensError, match="--budget bounds only --contexts auto"):
        api.capture(contexts=8, budget=5.0, out=str(out))
    assert not out.exists()


def test_max_contexts_with_fixed_contexts_is_refused_in_one_sentence(tmp_path):
    """--max-contexts bounds only --contexts auto: the API refuses it before anything loads."""
    from geomlens.errors import GeomlensError

    out = tmp_path / "run"
    with pytest.raises(GeomlensError, match="--max-contexts bounds only --contexts auto"):
        api.capture(contexts=8, max_contexts=64, out=str(out))
    assert not out.exists()


def test_help_shows_the_defaults_of_contexts_and_length(capsys):
    """--help names the default of --contexts and --length (CaptureConfig's, written once)."""
    from geomlens.cli import main

    with pytest.raises(SystemExit):
        main(["decompose", "--help"])
    shown = " ".join(capsys.readouterr().out.split())
    default = CaptureConfig()
    assert f"C: number of windows (default {default.contexts})" in shown
    assert f"T: tokens per window (default {default.length})" in shown
    assert "%(default)s" not in options_table(CaptureArguments)
