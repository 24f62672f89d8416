"""``geomlens.decompose(...)`` and ``import geomlens.decompose`` at once.

Five of the API's names are also submodules of the package: ``geomlens/decompose.py``,
``sphere.py``, ``walk.py`` and the packages ``capture/``, ``concepts/`` and ``report/``.
Python sets a submodule as an attribute of its package the first time it is imported,
so a plain function ``geomlens.sphere`` would be replaced by the module as soon as
anything imports ``geomlens.sphere`` (the report does), and while the function held the
name, ``import geomlens.sphere as m``, ``monkeypatch.setattr(geomlens.sphere, ...)`` and
``mock.patch("geomlens.report.page...")`` would find the function, not the module.

So the name stays the module, and the module is made callable: its class becomes
``CommandModule``, a ``ModuleType`` whose ``__call__`` is the API function of the same
name (``inspect.signature`` shows that function's keyword arguments). Every import of
the module, every attribute of it and every patch of it behave as before. The package
converts each of these modules when the import system sets it on the package, and
imports one on first access to its name, so the order of imports does not matter.
Where no submodule of that name exists, the name is the plain function.
"""

from __future__ import annotations

import importlib
import inspect
import sys
import types
from typing import Any

CALLABLE = ("capture", "concepts", "decompose", "report", "sphere", "walk")
"""Submodules of ``geomlens`` that are also API functions."""


def api_function(name: str) -> Any:
    """The function ``geomlens.api.<name>``."""
    from geomlens import api

    return getattr(api, name)


class CommandModule(types.ModuleType):
    """A module of ``geomlens`` that, called, runs the API function of its name."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return api_function(self.__name__.rpartition(".")[2])(*args, **kwargs)

    @property
    def __signature__(self) -> inspect.Signature:
        return inspect.signature(api_function(self.__name__.rpartition(".")[2]))


def make_callable(module: types.ModuleType) -> None:
    """Give ``module`` (a plain module) the class ``CommandModule``."""
    if type(module) is types.ModuleType:
        module.__class__ = CommandModule


class Package(types.ModuleType):
    """The ``geomlens`` package: submodules named in ``CALLABLE`` become callable as the
    import system sets them on it."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name in CALLABLE and isinstance(value, types.ModuleType):
            make_callable(value)
        super().__setattr__(name, value)

    def __getattr__(self, name: str) -> Any:  # only for names not set yet
        if name in CALLABLE:
            try:
                return importlib.import_module(f"{self.__name__}.{name}")
            except ModuleNotFoundError as exc:
                if exc.name != f"{self.__name__}.{name}":
                    raise
                return api_function(name)  # no such submodule (any more): the plain function
        raise AttributeError(f"module {self.__name__!r} has no attribute {name!r}")


def install(package_name: str) -> None:
    """Make the package ``package_name`` a ``Package`` and convert what it already holds."""
    package = sys.modules[package_name]
    package.__class__ = Package
    for name in CALLABLE:
        module = sys.modules.get(f"{package_name}.{name}")
        if module is not None:
            make_callable(module)
