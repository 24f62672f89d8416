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
    """mypy keeps its cache in the user's cache folder (as the models and tasks do), so a
    fresh clone on a machine that ran it before checks only what changed."""
    import platformdirs

    cache = Path(platformdirs.user_cache_dir("geomlens")) / "mypy"
    result = run(sys.executable, "-m", "mypy", "--cache-dir", str(cache))
    assert result.returncode == 0, result.stdout + result.stderr


def test_no_function_in_src_is_over_80_lines():
    """Long functions hide their steps; split them (issue: one shape for every command)."""
    import ast

    long = []
    for path in sorted((ROOT / "src" / "geomlens").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1
                if length > 80:
                    long.append(
                        f"{path.relative_to(ROOT)}:{node.lineno} {node.name} ({length} lines)"
                    )
    assert long == [], "\n".join(long)


def test_only_the_lifecycle_claims_folders_and_writes_manifests():
    """commands/lifecycle.py is the one place a run folder is held, claimed, given its
    manifest, or has its stages recorded; the commands call it."""
    import re

    pattern = re.compile(
        r"\.hold\(\)|\.claim\(|\.write_manifest\(|package_versions\(\)|stages\.json\""
    )
    found = []
    for path in sorted((ROOT / "src" / "geomlens").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel in ("src/geomlens/commands/lifecycle.py", "src/geomlens/runfolder.py"):
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if pattern.search(line) and "lifecycle." not in line and "def " not in line:
                found.append(f"{rel}:{number}: {line.strip()}")
    assert found == [], "\n".join(found)


def test_every_hook_is_put_on_in_the_one_hook_module():
    """capture/hooks.py is the one place a forward hook is registered on a model; the
    capture, its taps and the analyses use its recorders. The on-load check
    (models/check.py) sits below capture in the import order and keeps its own."""
    found = []
    for path in sorted((ROOT / "src" / "geomlens").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel in ("src/geomlens/capture/hooks.py", "src/geomlens/models/check.py"):
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if "register_forward" in line:
                found.append(f"{rel}:{number}: {line.strip()}")
    assert found == [], "\n".join(found)


def test_the_package_root_holds_only_the_entry_points_and_imports_flow_one_way():
    """commands -> report -> analyses -> stats/capture -> models/corpus: no package imports
    one above it (the API and the CLI sit on the commands)."""
    import re

    package = ROOT / "src" / "geomlens"
    root_modules = sorted(p.name for p in package.glob("*.py"))
    assert root_modules == ["__init__.py", "cli.py", "errors.py"]
    above = {
        "commands": ("api", "cli"),
        "report": ("commands", "api", "cli"),
        "concepts": ("commands", "api", "cli", "report"),
        "arithmetic": ("commands", "api", "cli", "report"),
        "engines": ("commands", "api", "cli", "report"),
        "analyses": ("commands", "api", "cli", "report", "engines"),
        "stats": ("commands", "api", "cli", "report", "engines", "analyses"),
        "capture": ("commands", "api", "cli", "report", "engines", "analyses"),
        "corpus": ("commands", "api", "cli", "report", "engines", "analyses", "capture"),
        "models": ("commands", "api", "cli", "report", "engines", "analyses", "capture"),
        # run folders hold statistics and activations: io may read capture/ and stats/
        "io": ("commands", "api", "cli", "report", "engines", "analyses"),
    }
    wrong = []
    for lower, higher in above.items():
        rx = re.compile(r"^\s*(from|import) geomlens\.(" + "|".join(higher) + r")\b", re.M)
        for path in sorted((package / lower).rglob("*.py")):
            wrong += [
                f"{path.relative_to(ROOT)}: {m.group(0).strip()}"
                for m in rx.finditer(path.read_text())
            ]
    assert wrong == [], "\n".join(wrong)


def test_the_python_version_is_said_once_and_met():
    """requires-python, ruff's target and mypy's version name the same Python (3.11: the
    API's keyword types use typing.Unpack), and the tests run on one that meets it."""
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert project["project"]["requires-python"] == ">=3.11"
    assert project["tool"]["ruff"]["target-version"] == "py311"
    assert project["tool"]["mypy"]["python_version"] == "3.11"
    assert sys.version_info >= (3, 11)


def test_loading_the_bundled_gguf_model_needs_no_optional_package():
    """transformers reads a GGUF file (the bundled SmolLM2) only with gguf and accelerate
    installed, though geomlens imports neither: both are plain dependencies."""
    import re
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    names = {re.split(r"[<>=\[ ]", d)[0] for d in project["project"]["dependencies"]}
    assert {"gguf", "accelerate", "transformers"} <= names
