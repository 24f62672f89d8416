"""The public API's ``>>>`` examples run and print what they show.

The examples sit in the docstrings of ``geomlens`` (``load_model``, ``activations``) and
``geomlens.api`` (each command's function and its ``Result``, on MiniLM with four windows
of 16 tokens and no static figures; ``concepts`` on SmolLM2 with a two-item task). They
write their run folders under ``runs/`` of the working folder, so they run in a temporary
one.
"""

from __future__ import annotations

import doctest
import importlib
import io

import pytest

MODULES = ("geomlens", "geomlens.api")
"""The modules whose docstrings hold the examples."""

COMMANDS = ("capture", "decompose", "sphere", "walk", "concepts", "report")

PURE_MODULES = (
    "geomlens.stats.rounding",
    "geomlens.stats.intervals",
    "geomlens.stats.finite",
    "geomlens.analyses.common.spectra",
    "geomlens.reporting.glossary",
)
"""Modules whose examples show a pure function on small numbers (no model, no files)."""


def examples(name: str) -> list[doctest.DocTest]:
    """The docstrings of module ``name`` (and of what it defines) that hold examples."""
    module = importlib.import_module(name)
    found = doctest.DocTestFinder().find(module, name)
    return [test for test in found if test.examples]


@pytest.mark.parametrize("name", MODULES)
def test_examples_run(name, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    tests = examples(name)
    assert tests, f"{name} has no examples"
    flags = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
    report = io.StringIO()
    runner = doctest.DocTestRunner(optionflags=flags)
    for test in tests:
        runner.run(test, out=report.write)
    results = runner.summarize(verbose=False)
    assert results.failed == 0, report.getvalue()
    assert results.attempted >= 4
    # the run folders go under runs/; a file an example makes (the concepts task) goes to
    # a temporary folder, not the reader's working folder
    assert sorted(p.name for p in tmp_path.iterdir()) in ([], ["runs"])


def test_every_entry_function_has_an_example():
    """Each command's function, ``load_model`` and ``activations`` is called in an example
    (and so checked by ``test_examples_run``)."""
    source = "\n".join(e.source for name in MODULES for t in examples(name) for e in t.examples)
    for function in (*COMMANDS, "load_model", "activations"):
        assert f"geomlens.{function}(" in source, function
    assert "result.layers()" in source and "result.figures" in source  # a Result read


@pytest.mark.parametrize("name", PURE_MODULES)
def test_pure_examples(name, tmp_path, monkeypatch):
    """Each pure module's examples print what they show and write nothing."""
    monkeypatch.chdir(tmp_path)
    module = importlib.import_module(name)
    failed, attempted = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert attempted >= 1 and failed == 0, name
    assert list(tmp_path.iterdir()) == []
