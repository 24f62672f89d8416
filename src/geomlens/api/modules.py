"""``geomlens.report(...)`` and ``import geomlens.report`` at once.

Three of the API's names are also subpackages: ``capture/``, ``concepts/`` and ``report/``.
Python sets a submodule as an attribute of its package the first time it is imported, so
a plain function ``geomlens.report`` would be replaced by the package as soon as anything
imported ``geomlens.report`` (every command does), and while the function held the name,
``import geomlens.report as m`` or ``mock.patch("geomlens.report.page...")`` would find the
function, not the package.

So the name stays the package, and the package is made callable: its class becomes
``CommandModule``, a ``ModuleType`` whose ``__call__`` is the API function of the same
name (``inspect.signature`` shows that function's keyword arguments). Every import of the
package, every attribute of it and every patch of it behave as before. ``geomlens``
converts each of these packages when the import system sets it on ``geomlens``, and
imports one on first access to its name, so the order of imports does not matter. The
other API names (``decompose``, ``sphere``, ``walk``) are plain functions.
"""

from __future__ import annotations

import importlib
import inspect
import sys
import types
from typing import Any

CALLABLE = ("capture", "concepts", "report")
"""Subpackages of ``geomlens`` that are also API functions."""


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
    import system sets them on it, and the names of its ``__lazy__`` table (name -> module)
    are imported from their modules on first access."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name in CALLABLE and isinstance(value, types.ModuleType):
            make_callable(value)
        super().__setattr__(name, value)

    def __getattr__(self, name: str) -> Any:  # only for names not set yet
        if name in CALLABLE:
            return importlib.import_module(f"{self.__name__}.{name}")
        lazy = self.__dict__.get("__lazy__", {})
        if name in lazy:
            value = getattr(importlib.import_module(lazy[name]), name)
            super().__setattr__(name, value)
            return value
        raise AttributeError(f"module {self.__name__!r} has no attribute {name!r}")


def install(package_name: str, lazy: dict[str, str] | None = None) -> None:
    """Make the package ``package_name`` a ``Package`` whose names in ``lazy`` (name ->
    module) are imported on first access, and convert what it already holds."""
    package = sys.modules[package_name]
    package.__class__ = Package
    package.__dict__["__lazy__"] = dict(lazy or {})
    for name in CALLABLE:
        module = sys.modules.get(f"{package_name}.{name}")
        if module is not None:
            make_callable(module)
