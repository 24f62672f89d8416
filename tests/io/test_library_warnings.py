"""A library's warning reaches stderr as one plain line (the library's name and its
message) without the machine's paths; ``--debug`` keeps Python's own format."""

from __future__ import annotations

import types
import warnings

import pytest

import geomlens.cli as cli
from geomlens.io.library_warnings import library_of, show, without_paths

LIBRARY_FILE = "/home/someone/venv/lib/python3.11/site-packages/umap/umap_.py"


PRINTERS: list[object] = []
"""The warning printer in force when the command ran."""


@pytest.fixture
def warning_command(monkeypatch):
    """Every command is one that warns as umap does, from a file under site-packages,
    with a message that names a path of the machine."""
    PRINTERS.clear()

    def main(args):
        PRINTERS.append(warnings.showwarning)
        with warnings.catch_warnings():
            warnings.simplefilter("always")
            warnings.warn_explicit(
                "n_jobs value 1 overridden by setting random_state; cache at "
                "/home/someone/.cache/numba/umap_index.nbi",
                UserWarning,
                LIBRARY_FILE,
                1952,
            )
        return 0

    fake = types.SimpleNamespace(add_arguments=lambda parser: None, main=main)
    monkeypatch.setattr(cli, "command_module", lambda name: fake)


def test_a_library_warning_is_one_line_without_paths(warning_command, capsys):
    assert cli.main(["models"]) == 0
    err = capsys.readouterr().err
    assert err == (
        "geomlens: warning from umap: n_jobs value 1 overridden by setting random_state; "
        "cache at umap_index.nbi\n"
    )


def test_debug_keeps_pythons_format(warning_command, capsys):
    assert cli.main(["models", "--debug"]) == 0
    assert cli.main(["models"]) == 0
    assert PRINTERS[0] is not show and PRINTERS[1] is show
    assert warnings.showwarning is not show  # put back after the command


@pytest.mark.parametrize(
    ("filename", "library"),
    [
        (LIBRARY_FILE, "umap"),
        ("/usr/lib/python3/dist-packages/matplotlib/font_manager.py", "matplotlib"),
        ("C:\\Python311\\Lib\\site-packages\\sklearn\\base.py", "sklearn"),
        ("/tmp/script.py", "script"),
    ],
)
def test_the_library_is_named_from_its_file(filename, library):
    assert library_of(filename) == library


def test_paths_are_cut_to_their_last_part():
    said = without_paths("font cache in /root/.cache/matplotlib (C:\\Users\\me\\fonts\\a.ttf)")
    assert said == "font cache in matplotlib (a.ttf)"
