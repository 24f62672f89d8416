"""Optional extras (umap-learn, wordfreq, pandas): a missing one leaves its piece out with
one sentence naming the package and the extra, and the rest of the run is unchanged."""

from __future__ import annotations

import pytest

import geomlens
from geomlens.errors import GeomlensError
from geomlens.io import extras


@pytest.fixture
def missing(monkeypatch):
    """Pretend the named extras are not installed."""
    gone: set[str] = set()
    real = extras.available
    monkeypatch.setattr(extras, "available", lambda module: module not in gone and real(module))
    extras.missing_note.cache_clear()
    yield gone
    extras.missing_note.cache_clear()


def test_missing_extra_is_one_sentence_once(missing, capsys):
    missing.add("umap")
    assert not extras.used("umap") and not extras.used("umap")
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        "geomlens: note: umap-learn is not installed, so the 3-D UMAP map of the logit-lens "
        "trajectory is left out; pip install umap-learn (or pip install 'geomlens[umap]')."
    ]
    assert extras.used("wordfreq")  # installed here (the test extra)


def test_layers_without_pandas_says_how_to_install(missing, tmp_path):
    missing.add("pandas")
    result = geomlens.Result(command="capture", folder=tmp_path, metrics={"capture": {}})
    with pytest.raises(GeomlensError, match=r"pip install 'geomlens\[pandas\]'"):
        result.layers()
