"""Keyword arguments of the Python API checked against their type hints.

A wrong name or a value of the wrong type is one ``GeomlensError`` sentence naming the
function, the argument and what it takes, before anything loads. Values of the right type
that no run can use (``contexts=0``) are refused by the command's own checks, whose
sentences name the equivalent command-line flag (``--contexts``).
"""

from __future__ import annotations

import difflib
import functools
import inspect
import types
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal, ParamSpec, TypeVar, Union, get_args, get_origin, get_type_hints

from geomlens.errors import GeomlensError, api_boundary, clipped
from geomlens.models.held import HeldModel

P = ParamSpec("P")
R = TypeVar("R")


def accepts(value: Any, hint: Any) -> bool:
    """Whether ``value`` fits ``hint`` (the few kinds of hint the API uses)."""
    origin, args = get_origin(hint), get_args(hint)
    if hint is Any:
        return True
    if origin in (Union, types.UnionType):
        return any(accepts(value, a) for a in args)
    if hint is type(None):
        return value is None
    if origin is Literal:
        return any(type(value) is type(a) and value == a for a in args)
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if origin in (Sequence, tuple, list):
        return isinstance(value, (list, tuple)) and all(accepts(v, args[0]) for v in value)
    if isinstance(origin, type):  # a generic class such as os.PathLike[str]
        return isinstance(value, origin)
    return isinstance(hint, type) and isinstance(value, hint)


def describe(hint: Any) -> str:
    """What ``hint`` takes, in words."""
    origin, args = get_origin(hint), get_args(hint)
    if origin in (Union, types.UnionType):
        return " or ".join(describe(a) for a in args)
    if hint is type(None):
        return "None"
    if origin is Literal:
        return "one of " + ", ".join(repr(a) for a in args)
    if origin in (Sequence, tuple, list):
        return f"a list of {describe(args[0]).removeprefix('a ').removeprefix('an ')}s"
    words = {bool: "True or False", int: "an int", float: "a number", str: "a str", Path: "a path"}
    if hint is HeldModel:
        return "a transformers model"
    if hint in words:
        return words[hint]
    return f"a {getattr(hint, '__name__', str(hint))}"


def checked(func: Callable[P, R]) -> Callable[P, R]:
    """``func`` with its keyword arguments checked against its type hints on every call."""
    signature = inspect.signature(func)
    hints = get_type_hints(func)
    name = f"geomlens.{func.__name__}"

    @functools.wraps(func)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        if args:
            raise GeomlensError(
                f"{name}() takes keyword arguments only, like {name}(model=...); "
                f"got {len(args)} positional."
            )
        for key, value in kwargs.items():
            if key not in signature.parameters:
                close = difflib.get_close_matches(key, list(signature.parameters), n=1)
                hint = f"; did you mean {close[0]!r}?" if close else "."
                raise GeomlensError(f"{name}() has no argument {key!r}{hint}")
            if not accepts(value, hints[key]):
                raise GeomlensError(
                    f"{name}(): {key} takes {describe(hints[key])} (got {clipped(repr(value))})."
                )
        with api_boundary(name):  # GeomlensError subclasses only
            return func(*args, **kwargs)

    return wrapper


def resolved_hints(func: Callable[..., Any]) -> dict[str, Any]:
    """The type hints of ``func``, with a name imported for type checking only read as
    ``Any`` (so that argument is not checked)."""
    unknown: dict[str, Any] = {}
    while True:
        try:
            return get_type_hints(func, localns=unknown)
        except NameError as exc:
            if exc.name is None or exc.name in unknown:
                return {}
            unknown[exc.name] = Any


def bounded(func: Callable[P, R]) -> Callable[P, R]:
    """``func`` (positional or keyword arguments) behind the API's one error boundary: a
    missing or unknown argument, or one of the wrong type, is one ``GeomlensError``
    sentence; any other failure inside is a ``GeomlensError`` subclass too."""
    signature = inspect.signature(func)
    hints = resolved_hints(func)
    name = f"geomlens.{func.__name__}"

    @functools.wraps(func)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            bound = signature.bind(*args, **kwargs)
        except TypeError as exc:
            raise GeomlensError(f"{name}(): {exc}; see help({name}).") from None
        for key, value in bound.arguments.items():
            if key in hints and not accepts(value, hints[key]):
                raise GeomlensError(
                    f"{name}(): {key} takes {describe(hints[key])} (got {value!r:.80})."
                )
        with api_boundary(name):  # GeomlensError subclasses only
            return func(*args, **kwargs)

    return wrapper


def text_list(where: str, value: Any, what: str = "texts", distinct: int = 1) -> list[str]:
    """The caller's text or texts as a list of str, or one sentence in the caller's words.

    A str is one text; a list or tuple holds texts. Refused: bytes (decode them first),
    anything else that is not a str or a list of str (a number, None), a text that is
    empty or only whitespace, a text that is not valid Unicode (a lone surrogate, which no
    tokenizer or file can hold), and fewer than ``distinct`` different texts (a copy of a
    text adds nothing to compare).

    Args:
        where: the function, as the caller wrote it (``geomlens.activations()``), or ""
            (the sentence starts with the argument).
        what: the argument's name (``texts``, ``corpus``).
    """
    where = f"{where}: " if where else ""
    if isinstance(value, (bytes, bytearray, memoryview)):
        raise GeomlensError(
            f"{where}{what} takes a str or a list of str, not bytes; decode them first, "
            "e.g. data.decode('utf-8')."
        )
    if isinstance(value, str):
        items: list[Any] = [value]
    elif isinstance(value, (list, tuple)):
        items = list(value)
    else:
        raise GeomlensError(
            f"{where}{what} takes a str or a list of str (got {type(value).__name__} "
            f"{value!r:.60})."
        )
    if not items:
        raise GeomlensError(f"{where}{what} is an empty list; give at least one text.")
    for i, text in enumerate(items):
        if not isinstance(text, str):
            raise GeomlensError(
                f"{where}{what}[{i}] is {type(text).__name__} {text!r:.40}, not a str."
            )
        if not text.strip():
            raise GeomlensError(f"{where}{what}[{i}] is empty or only whitespace; give words.")
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise GeomlensError(
                f"{where}{what}[{i}] holds {text[exc.start]!r} at character {exc.start}, a "
                "lone surrogate that is not valid Unicode text; remove it (or decode the "
                "source with errors='replace')."
            ) from None
    found = len(set(items))
    if found < distinct:
        raise GeomlensError(
            f"{where}{what} holds {found} different text{'s' if found != 1 else ''} "
            f"({len(items)} given), but it needs at least {distinct} different ones: a copy "
            "of a text adds nothing to compare; give different texts."
        )
    return items
