"""Docstrings name modules that exist.

A docstring's backticked reference to geomlens code (``geomlens.reporting.figures.save``,
``analyses.decomposition.planted``, ``reporting/section.py``) must resolve: to a module of
the package (absolute, or relative to the docstring's own package or one above it), then to
attributes of that module. After modules move (``report.figures``, ``commands.options``,
``concept_space``, ``reporting/stages`` all once existed), a docstring still naming the old
place fails here.

Which backticked names are references: dotted names written ``geomlens.…``, or whose first
part is one of the package's top-level modules or a former one (``FORMER``); paths ending in
``.py`` or starting with a top-level package. A dotted name whose first part is a parameter
of the documented function, a field of the documented class, or ``self`` is an attribute of
that object (``config.model``, ``stats.ctx``), not a module; other paths (``stats/taps.
safetensors`` in a run folder, ``src/utils/metrics.py`` in a paper's repository) are files
outside the package.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

import geomlens

SRC = Path(geomlens.__file__).resolve().parent
"""src/geomlens."""
ROOT = SRC.parents[1]
"""The repository (paths such as ``tests/...`` and ``benchmarks/...`` resolve under it)."""

TOP = sorted(
    p.stem
    for p in SRC.iterdir()
    if p.stem != "__init__" and (p.suffix == ".py" or (p / "__init__.py").is_file())
)
"""The package's top-level modules and subpackages (analyses, api, ..., stats)."""

FORMER = (
    "arithmetic",
    "capture",
    "concept_space",
    "concepts",
    "decompose",
    "extras",
    "files",
    "jsontext",
    "progress",
    "report",
    "report_command",
    "runfolder",
    "sphere",
    "walk",
)
"""Former top-level modules (git history): a name starting with one still counts as a
reference, and resolves only if it names a module now (``concepts.pyramidal`` inside
analyses/ does; ``report.figures`` does not)."""

REFERENCE = re.compile(r"``?(geomlens(?:\.\w+)+|[A-Za-z_]\w*(?:\.\w+)+|[\w.-]+(?:/[\w.-]+)+/?)")
"""A backticked dotted name or path (its closing backtick may follow ``()`` or ``[...]``)."""

NOT_MODULES = (".json", ".jsonl", ".md", ".html", ".csv", ".png", ".txt", ".yaml", ".pt")
NOT_MODULES += (".safetensors", ".gguf", ".bin", ".ipynb", ".js", ".svg", ".pdf", ".gz")
"""Endings of file names, never module references (``config.json``, ``report.html``)."""


@dataclass(frozen=True)
class Reference:
    """One backticked name in one docstring."""

    file: Path
    line: int
    package: str  # the docstring's package: geomlens.analyses.decomposition
    text: str
    scope: frozenset[str]  # parameters and fields of the documented object

    def __str__(self) -> str:
        return f"{self.file.relative_to(ROOT)}:{self.line}: `{self.text}`"


def scope_names(node: ast.AST) -> set[str]:
    """Names a docstring of ``node`` may use as objects: a function's parameters, a class's
    fields and its ``__init__`` parameters, ``self``."""
    names = {"self", "cls"}
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
        a = node.args
        names |= {x.arg for x in [*a.posonlyargs, *a.args, *a.kwonlyargs]}
        names |= {x.arg for x in (a.vararg, a.kwarg) if x is not None}
    if isinstance(node, ast.ClassDef):
        for stmt in node.body:
            if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
                names.add(stmt.target.id)
            if isinstance(stmt, ast.FunctionDef) and stmt.name == "__init__":
                names |= scope_names(stmt)
    return names


def docstrings(tree: ast.Module) -> Iterator[tuple[int, str, set[str]]]:
    """(line, text, scope) of every string statement: module, class and function docstrings
    and the docstrings of attributes (a string right after an assignment)."""

    def visit(node: ast.AST, scope: set[str]) -> Iterator[tuple[int, str, set[str]]]:
        body = getattr(node, "body", None)
        if not isinstance(body, list):
            return
        here = scope | scope_names(node)
        for stmt in body:
            if (
                isinstance(stmt, ast.Expr)
                and isinstance(stmt.value, ast.Constant)
                and isinstance(stmt.value.value, str)
            ):
                yield stmt.lineno, stmt.value.value, here
            elif isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                yield from visit(stmt, here)
            else:  # if/try/with blocks at module or class level
                for field in ("body", "orelse", "finalbody", "handlers"):
                    for inner in getattr(stmt, field, []) or []:
                        yield from visit(ast.Module(body=[inner], type_ignores=[]), here)

    yield from visit(tree, set())


def references() -> list[Reference]:
    """Every backticked reference to package code in the package's docstrings."""
    found = []
    for file in sorted(SRC.rglob("*.py")):
        module = ".".join(file.relative_to(SRC.parent).with_suffix("").parts)
        package = module.removesuffix(".__init__")
        if file.name != "__init__.py":
            package = package.rpartition(".")[0]
        tree = ast.parse(file.read_text(encoding="utf-8"))
        for line, text, scope in docstrings(tree):
            for match in REFERENCE.finditer(text):
                name = match.group(1).rstrip(".")
                if is_reference(name, scope, package):
                    found.append(Reference(file, line, package, name, frozenset(scope)))
    return found


def is_reference(name: str, scope: set[str], package: str = "geomlens") -> bool:
    """Whether a backticked name is meant as a reference to package code: see the module
    docstring; ``package`` is the docstring's, whose modules (and those of the packages
    above it) may be named relatively."""
    if name.endswith(NOT_MODULES):
        return False
    if "/" in name or name.endswith(".py"):
        parts = name.rstrip("/").split("/")
        if name.endswith(".py") or parts[0] in ("tests", "benchmarks", "src"):
            return True
        return parts[0] in TOP and all(p.isidentifier() for p in parts)
    first = name.split(".")[0]
    if first in scope:
        return False
    if first == "geomlens" or first in TOP or first in FORMER:
        return True
    # a module beside the docstring's (claims.position_claims), unless an installed package
    # has that name too (ray.init in engines/ray.py is the ray library's)
    return first in nearby(package) and importlib.util.find_spec(first) is None


def nearby(package: str) -> set[str]:
    """The modules and subpackages of ``package`` and of every package above it."""
    names: set[str] = set()
    while package:
        folder = SRC.parent.joinpath(*package.split("."))
        names |= {
            p.stem
            for p in folder.iterdir()
            if p.stem != "__init__" and (p.suffix == ".py" or (p / "__init__.py").is_file())
        }
        package = package.rpartition(".")[0]
    return names


def module_file(dotted: str) -> Path | None:
    """The file of module ``dotted`` (geomlens.x.y), or None when there is none."""
    path = SRC.parent.joinpath(*dotted.split("."))
    for candidate in (path.with_suffix(".py"), path / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def resolves_dotted(dotted: str) -> bool:
    """Whether ``dotted`` (starting with geomlens) is a module, or attributes of one."""
    parts = dotted.split(".")
    for k in range(len(parts), 0, -1):
        if module_file(".".join(parts[:k])) is None:
            continue
        obj: object = importlib.import_module(".".join(parts[:k]))
        for attr in parts[k:]:
            if not hasattr(obj, attr):
                return False
            obj = getattr(obj, attr)
        return True
    return False


def resolves(ref: Reference) -> bool:
    """Whether the reference names existing code (see the module docstring)."""
    if "/" in ref.text or ref.text.endswith(".py"):
        if ref.text.startswith(("src/", "tests/", "benchmarks/")):
            if not ref.text.startswith(("src/geomlens/", "tests/", "benchmarks/")):
                return True  # src/... of another repository (a paper's code)
            return (ROOT / ref.text).exists()
        path = ref.text.rstrip("/")
        base = SRC.parent.joinpath(*ref.package.split("."))
        bases = [base, *[b for b in base.parents if SRC in (b, *b.parents)]]
        return any((b / path).exists() or (b / path).with_suffix(".py").is_file() for b in bases)
    if ref.text.startswith("geomlens."):
        return resolves_dotted(ref.text)
    package = ref.package
    while package:  # relative to the docstring's package, then each one above it
        if resolves_dotted(f"{package}.{ref.text}"):
            return True
        package = package.rpartition(".")[0]
    return False


REFERENCES = references()


def test_docstrings_name_package_code():
    """Enough references are found for the check to mean something."""
    assert len(REFERENCES) > 50
    texts = {r.text for r in REFERENCES}
    assert {"geomlens.load_model", "analyses.decomposition.planted"} <= texts


def test_every_docstring_reference_resolves():
    broken = [str(r) for r in REFERENCES if not resolves(r)]
    assert not broken, "docstrings name code that does not exist:\n" + "\n".join(broken)


@pytest.mark.parametrize(
    ("text", "package", "ok"),
    [
        ("geomlens.reporting.figures.save", "geomlens", True),
        ("reporting.figures.save", "geomlens.analyses", True),
        ("decomposition.planted", "geomlens.analyses.sphere", True),
        ("report.figures", "geomlens.commands", False),
        ("commands.options", "geomlens", False),
        ("reporting/stages", "geomlens", False),
        ("reporting/section.py", "geomlens", True),
        ("geomlens.reporting.nothing_here", "geomlens", False),
    ],
)
def test_the_resolver_tells_old_names_from_current_ones(text, package, ok):
    ref = Reference(SRC / "__init__.py", 1, package, text, frozenset())
    assert is_reference(text, set(), package)
    assert resolves(ref) is ok


def test_attributes_of_parameters_and_files_are_not_references():
    assert not is_reference("config.model", {"config", "self"})
    assert not is_reference("config.json", set())
    assert not is_reference("view.unembed", set())
    assert is_reference("concept_space.tasks", set())
    assert is_reference("claims.position_claims", set(), "geomlens.analyses.decomposition")
    assert not is_reference("ray.init", set(), "geomlens.engines")
    assert not is_reference("model.safetensors", set())
