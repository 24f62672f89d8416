"""Shared fixtures: each real model is loaded once per test session."""

from __future__ import annotations

import pytest

from geomlens.models import ModelView, load_model


@pytest.fixture(scope="session")
def smollm2() -> ModelView:
    """SmolLM2-135M on real weights (sdpa attention)."""
    return load_model("smollm2-135m")


@pytest.fixture(scope="session")
def minilm() -> ModelView:
    """MiniLM-L6 on real weights."""
    return load_model("minilm-l6")


@pytest.fixture(scope="session")
def bbc():
    from geomlens.corpus import load_corpus

    return load_corpus("bbc")


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args):
    """pytest-playwright drives Debian's chromium (Playwright's own download is unavailable)."""
    return {**browser_type_launch_args, "executable_path": "/usr/bin/chromium"}
