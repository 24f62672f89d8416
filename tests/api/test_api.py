"""The Python API (geomlens.decompose(...), ...): the same run folders as the CLI, results
with plotly figures and HTML, typed arguments, and the names shared with subpackages."""

from __future__ import annotations

import inspect
import sys
from pathlib import Path

import plotly.graph_objects as go
import pytest

import geomlens
import geomlens.api
from geomlens.cli import main
from geomlens.errors import GeomlensError
from geomlens.models import ModelView
from geomlens.models.loading import eager_attention

SMALL = ["--contexts", "4", "--length", "16", "--batch-size", "4", "--quiet"]
SMALL_API = dict(contexts=4, length=16, batch_size=4, progress=False)
TEXT = "Q: What is 2 plus 2?\nA: 4.\n\nQ: What colour is snow?\nA: White."


@pytest.fixture
def small_umap(monkeypatch):
    import geomlens.analyses.sphere.step as sphere_command

    monkeypatch.setattr(sphere_command, "UMAP_TOKENS", 300)
    monkeypatch.setattr(sphere_command, "IDENTITY_WINDOWS", 2)


def cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def check_result(result: geomlens.Result, command: str, folder: Path, names: set[str]) -> None:
    """Numbers, figures, summary and HTML of a result, against its folder."""
    assert result.command == command
    assert result.folder == folder
    assert result.metrics == geomlens.open_run(folder).metrics
    assert names <= set(result.figures), sorted(result.figures)
    assert all(isinstance(f, go.Figure) for f in result.figures.values())
    page = result._repr_html_()
    assert page.count("plotly-graph-div") == len(result.figures)
    assert page.count("* plotly.js v") <= 1  # plotly.js inlined once per session at most
    assert 'src="https://cdn.plot.ly' not in page  # nothing loaded from the network
    assert str(folder) in page
    assert str(folder) in result.summary()[0]
    again = geomlens.open_result(folder)
    assert again.metrics == result.metrics and again.command == command


def check_cli_reuses(capsys, folder: Path, *argv: str) -> None:
    """The CLI with the same options finds the API's run in the folder and reuses it: the
    two build the same config (a different one would be refused, exit 2)."""
    before = (folder / "metrics.json").read_bytes()
    code, _, err = cli(capsys, *argv, "--out", str(folder))
    assert code == 0, err
    assert "already holds this run; reusing it" in err
    assert (folder / "metrics.json").read_bytes() == before


def test_capture_and_decompose_equal_the_cli(minilm: ModelView, tmp_path, capsys):
    """Fresh runs through the API and through the CLI write the same metrics.json, and
    the API's summary is what the CLI prints."""
    for command, names in (("capture", {"shares"}), ("decompose", {"shares", "spiral"})):
        api_dir, cli_dir = tmp_path / f"api-{command}", tmp_path / f"cli-{command}"
        run = getattr(geomlens, command)
        result = run(model="minilm-l6", **SMALL_API, layers=[0, 1, 2], out=api_dir, view=minilm)
        argv = [command, "--model", "minilm-l6", *SMALL, "--layers", "0-2", "--out", str(cli_dir)]
        code, out, err = cli(capsys, *argv)
        assert code == 0, err
        assert (api_dir / "metrics.json").read_bytes() == (cli_dir / "metrics.json").read_bytes()
        check_result(result, command, api_dir, names)
        lines = [line.replace(str(api_dir), str(cli_dir)) for line in result.summary()]
        if command == "capture":  # the CLI's run timed its capture too: compare the first line
            lines, out = lines[:1], out.splitlines()[0] + "\n"
        assert "\n".join(lines) + "\n" == out
    assert set(result.figures) >= {"ranks", "geometry", "spectra", "attention_parts"}
    assert "unsupported" in result.metrics["induction"]  # an encoder: no induction heads
    assert result.metrics["decomposition"]["skip_first"] is False


def test_sphere(minilm: ModelView, small_umap, tmp_path, capsys):
    folder = tmp_path / "sphere"
    result = geomlens.sphere(
        model="minilm-l6", **SMALL_API, probe_layers=[0], out=folder, view=minilm
    )
    check_result(result, "sphere", folder, {"trajectory"})
    assert "sphere_radius" in result.images
    check_cli_reuses(
        capsys, folder, "sphere", "--model", "minilm-l6", *SMALL, "--probe-layers", "0"
    )


def test_walk(minilm: ModelView, tmp_path, capsys):
    folder = tmp_path / "walk"
    with eager_attention(minilm):
        result = geomlens.walk(
            model="minilm-l6", **SMALL_API, layers=[0, 1], text=TEXT, out=folder, view=minilm
        )
    check_result(result, "walk", folder, {"similarity_layers", "similarity_cos"})
    assert result.summary()[1].startswith("  text:")
    argv = ["walk", "--model", "minilm-l6", *SMALL, "--layers", "0,1", "--text", TEXT]
    check_cli_reuses(capsys, folder, *argv)


def test_concepts(smollm2: ModelView, tmp_path, capsys):
    folder = tmp_path / "concepts"
    result = geomlens.concepts(
        task="step_inference",
        limit=2,
        schemes=["sanity"],
        out=folder,
        view=smollm2,
        progress=False,
    )
    check_result(result, "concepts", folder, {"schemes"})
    check_cli_reuses(
        capsys,
        folder,
        "concepts",
        "--task",
        "step_inference",
        "--limit",
        "2",
        "--scheme",
        "sanity",
        "--quiet",
    )


def test_report(minilm: ModelView, small_umap, tmp_path, capsys):
    """Interactive figures only: the result's figures are plotly's (static PNGs of the
    report are checked by the report tests)."""
    folder = tmp_path / "report"
    result = geomlens.report(
        model="minilm-l6", **SMALL_API, figures="interactive", out=folder, view=minilm
    )
    names = {"shares", "spiral", "attention_parts", "trajectory", "similarity_cos"}
    check_result(result, "report", folder, names)
    assert (folder / "report.html").exists()
    argv = ["report", "--model", "minilm-l6", *SMALL, "--figures", "interactive"]
    check_cli_reuses(capsys, folder, *argv)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (
            lambda: geomlens.decompose(contexts="16"),
            r"decompose\(\): contexts takes an int",
        ),
        (lambda: geomlens.decompose(contexts=True), r"contexts takes an int.* \(got True\)"),
        (lambda: geomlens.capture(contxts=4), r"no argument 'contxts'; did you mean 'contexts'"),
        (lambda: geomlens.sphere(layers=[0, "a"]), r"layers takes a list of ints or None"),
        (lambda: geomlens.walk(engine="spark"), r"engine takes one of 'local', 'ray'"),
        (lambda: geomlens.report(dtype="float64"), r"dtype takes one of 'float32', 'bfloat16'"),
        (lambda: geomlens.concepts(progress="yes"), r"progress takes True or False"),
        (lambda: geomlens.api.decompose("smollm2-135m"), r"keyword arguments only"),
        (lambda: geomlens.walk(text="a", text_file="b"), r"text or text_file, not both"),
        (lambda: geomlens.concepts(limit=0), r"--limit must be at least 1"),
        (lambda: geomlens.decompose(contexts=0), r"--contexts must be at least 1"),
        (lambda: geomlens.report(limit=0), r"--limit must be at least 1"),
    ],
)
def test_bad_arguments_are_one_sentence(call, message, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # nothing may be written, but not into the checkout either
    with pytest.raises(GeomlensError, match=message):
        call()
    assert not (tmp_path / "runs").exists()


def test_api_names_are_functions_and_no_package_shares_one():
    """geomlens.capture, concepts and report are the API functions even after the
    subpackages behind them are imported (they are named capturing, concept_space and
    reporting, so nothing replaces the functions)."""
    import geomlens.analyses.concepts.command
    import geomlens.analyses.concepts.tasks
    import geomlens.capturing.capture
    import geomlens.commands.report
    import geomlens.reporting.page

    for name in geomlens.api.COMMANDS:
        assert getattr(geomlens, name) is getattr(geomlens.api, name)
        assert inspect.isfunction(getattr(geomlens, name))
        assert f"geomlens.{name}" not in sys.modules
    assert geomlens.reporting.page.write_report is not None
    assert geomlens.capturing.CaptureConfig().contexts == 128


def test_an_api_name_resolves_in_a_fresh_interpreter():
    """Before anything imported the API, its name imports the function."""
    import subprocess

    code = (
        "import geomlens, geomlens.api; c = geomlens.concepts; "
        "assert c is geomlens.api.concepts and 'geomlens.concepts' not in __import__('sys').modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
