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
    """runs/lifecycle.py is the one place a run folder is held, claimed, given its
    manifest, or has its stages recorded; the commands call it."""
    import re

    pattern = re.compile(
        r"\.hold\(\)|\.claim\(|\.write_manifest\(|package_versions\(\)|stages\.json\""
    )
    found = []
    for path in sorted((ROOT / "src" / "geomlens").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel in ("src/geomlens/runs/lifecycle.py", "src/geomlens/runfolder.py"):
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if pattern.search(line) and "lifecycle." not in line and "def " not in line:
                found.append(f"{rel}:{number}: {line.strip()}")
    assert found == [], "\n".join(found)


def test_every_hook_is_put_on_in_the_one_hook_module():
    """capturing/hooks.py is the one place a forward hook is registered on a model; the
    capture, its taps and the analyses use its recorders. The on-load check
    (models/check.py) and the hidden-state tier's reader of a model's own forward pass
    (models/hidden_tier.py) sit below capture in the import order and keep their own;
    capturing/edits.py is the one place a hook changes what a forward pass computes."""
    found = []
    below = ("models/check.py", "models/hidden_tier.py", "capturing/edits.py")
    for path in sorted((ROOT / "src" / "geomlens").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel == "src/geomlens/capturing/hooks.py" or rel in [f"src/geomlens/{b}" for b in below]:
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if "register_forward" in line:
                found.append(f"{rel}:{number}: {line.strip()}")
    assert found == [], "\n".join(found)


LAYERS = (
    ("api", "cli"),
    ("commands",),
    ("analyses",),
    ("pipeline",),
    ("reporting",),
    ("papers",),
    ("config",),
    ("engines",),
    ("runs",),
    ("capturing",),
    ("corpus", "models"),
    ("io", "stats"),
)
"""The packages from the top down (docs/layout.md): a package imports only those below
its row. ``io`` (files, JSON text, progress) and ``stats`` share the bottom row."""


def test_the_package_root_holds_only_the_entry_points_and_imports_flow_one_way():
    """cli/api -> commands -> analyses -> pipeline -> reporting -> papers -> config -> engines ->
    runs -> capturing -> corpus/models -> io/stats: no package imports one above it or
    beside it (but ``io`` and ``stats``)."""
    import re

    package = ROOT / "src" / "geomlens"
    root_modules = sorted(p.name for p in package.glob("*.py"))
    assert root_modules == ["__init__.py", "cli.py", "errors.py"]
    rows = [set(row) for row in LAYERS]
    packages = {p.parent.relative_to(package).parts[0] for p in package.glob("*/*.py")}
    assert packages | {"cli"} == set().union(*rows)  # every package has its place
    wrong = []
    for i, row in enumerate(rows):
        not_below = set().union(*rows[: i + 1])
        for lower in sorted(row - {"cli"}):
            higher = sorted(not_below - {lower} - ({"io", "stats"} & row))
            rx = re.compile(r"^\s*(from|import) geomlens\.(" + "|".join(higher) + r")\b", re.M)
            for path in sorted((package / lower).rglob("*.py")):
                wrong += [
                    f"{path.relative_to(ROOT)}: {m.group(0).strip()}"
                    for m in rx.finditer(path.read_text())
                ]
    assert wrong == [], "\n".join(wrong)


PRIVATE = ("step", "section", "figures", "claims", "command", "entry", "summary")
"""An analysis folder's modules that no other folder imports: another folder reads its
numbers through its ``schema`` and may call its pure computations."""


def test_an_analysis_folder_reaches_another_only_through_its_schema_or_computations():
    import re

    analyses = ROOT / "src" / "geomlens" / "analyses"
    rx = re.compile(r"geomlens\.analyses\.(\w+)\.(\w+)|from geomlens\.analyses\.(\w+) import (\w+)")
    folders = {p.name for p in analyses.iterdir() if (p / "__init__.py").exists()}
    wrong = []
    for path in sorted(analyses.glob("*/*.py")):
        mine = path.parent.name
        for m in rx.finditer(path.read_text()):
            folder, module = m.group(1) or m.group(3), m.group(2) or m.group(4)
            if folder in folders and folder not in (mine, "common") and module in PRIVATE:
                wrong.append(f"{path.relative_to(ROOT)} imports {folder}.{module}")
    assert wrong == [], "\n".join(wrong)


def module_imports() -> dict[str, set[str]]:
    """geomlens module -> the geomlens modules it imports, at its top or inside a function
    (imports under ``if TYPE_CHECKING:`` are for annotations only and left out)."""
    import ast

    package = ROOT / "src"
    modules = {}
    for path in (package / "geomlens").rglob("*.py"):
        name = ".".join(path.relative_to(package).with_suffix("").parts)
        modules[name.removesuffix(".__init__")] = path
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        here = name if path.name == "__init__.py" else name.rpartition(".")[0]
        tree = ast.parse(path.read_text())
        typing_only = {
            id(n)
            for node in ast.walk(tree)
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
            for n in ast.walk(node)
        }
        found: set[str] = set()
        for node in ast.walk(tree):
            if id(node) in typing_only:
                continue
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parent = here.split(".")[: len(here.split(".")) - node.level + 1]
                    base = ".".join([*parent, base] if base else parent)
                targets = [
                    f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base
                    for a in node.names
                ]
            else:
                continue
            for target in targets:
                while target and target not in modules:
                    target = target.rpartition(".")[0]
                # a module's own packages are imported before it: no dependency
                if target and not (name == target or name.startswith(target + ".")):
                    found.add(target)
        graph[name] = found
    from geomlens.analyses import FOLDERS  # the registry imports these by name

    graph["geomlens.analyses.registry"] |= {f"geomlens.analyses.{f}.entry" for f in FOLDERS}
    graph["geomlens.commands"] |= {f"geomlens.analyses.{f}" for f in FOLDERS}
    return graph


def test_no_module_imports_itself_through_others():
    """The module import graph has no cycle, counting imports inside functions (a lazy
    import that closes a cycle only hides it)."""
    graph = module_imports()
    cycles = []
    state: dict[str, int] = {}  # 1: on the path, 2: done

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycles.append(" -> ".join([*path[path.index(nxt) :], nxt]))
            elif nxt not in state:
                visit(nxt, [*path, nxt])
        state[node] = 2

    for start in sorted(graph):
        if start not in state:
            visit(start, [start])
    assert cycles == [], "\n".join(cycles)


def test_the_configuration_reaches_the_capture_in_few_stops(tmp_path, monkeypatch):
    """Following the run configuration from ``geomlens report`` to the capture loop: every
    geomlens function called with it (or with an object carrying it) is a stop; at most 30
    stops in at most 17 files (it took 72 in 29 before the pipeline was one module; each
    analysis's own check now lives in its folder, one file per analysis that checks)."""
    import geomlens.engines.local
    from geomlens import cli
    from geomlens.analyses.base import StageRequest
    from geomlens.capturing.capture import CaptureConfig
    from geomlens.config.run import CaptureRunConfig
    from geomlens.engines import CaptureJob
    from geomlens.pipeline.request import RunRequest

    class Reached(Exception):
        pass

    def reached(*args, **kwargs):
        raise Reached

    monkeypatch.setattr(geomlens.engines.local, "capture_windows", reached)
    carriers = (CaptureConfig, CaptureRunConfig, RunRequest, StageRequest, CaptureJob)
    source = str(ROOT / "src" / "geomlens")
    stops: list[tuple[str, str]] = []

    def carries(value) -> bool:
        return isinstance(value, carriers) or (
            isinstance(value, dict) and {"model", "contexts"} <= value.keys()
        )

    def profile(frame, event, arg) -> None:
        code = frame.f_code
        if event != "call" or not code.co_filename.startswith(source):
            return
        names = code.co_varnames[: code.co_argcount + code.co_kwonlyargcount]
        if any(carries(frame.f_locals.get(n)) for n in names):
            stops.append((code.co_filename, code.co_name))

    argv = ["report", "--model", "minilm-l6", "--contexts", "4", "--length", "16", "--quiet"]
    sys.setprofile(profile)
    try:
        cli.main([*argv, "--figures", "none", "--out", str(tmp_path / "run")])
    except Reached:
        pass
    finally:
        sys.setprofile(None)
    local = [i for i, (f, _) in enumerate(stops) if f.endswith("engines/local.py")]
    assert local, stops  # the capture loop was reached; what follows it (the failure the
    stops = stops[: local[-1] + 1]  # stand-in raised, recorded in the folder) is not counted
    files = {f for f, _ in stops}
    listing = "\n".join(f"{Path(f).relative_to(source)}: {n}" for f, n in stops)
    assert len(stops) <= 30 and len(files) <= 17, listing


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
