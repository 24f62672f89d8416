"""The project's own quality gates run with the tests: lint, formatting, types."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run(*cmd: str) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)


def test_ruff_check_and_format():
    lint = run(sys.executable, "-m", "ruff", "check", "src", "tests", "benchmarks")
    assert lint.returncode == 0, lint.stdout + lint.stderr
    fmt = run(sys.executable, "-m", "ruff", "format", "--check", "src", "tests", "benchmarks")
    assert fmt.returncode == 0, fmt.stdout + fmt.stderr


def test_mypy_on_src():
    result = run(sys.executable, "-m", "mypy")
    assert result.returncode == 0, result.stdout + result.stderr
