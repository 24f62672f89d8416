"""A typed metrics.json block: a frozen dataclass whose fields are the block's keys.

Each analysis's schema module declares its blocks as subclasses of ``Block``; its step builds
one and writes what ``Block.to_dict`` gives, and its readers take ``Block.read(metrics, key)``
and use attributes instead of string keys. The conversion follows the field annotations: a field
typed as a ``Block`` (or a list or str-keyed dict of them) is read as one, anything else is
kept as JSON gives it, so numbers pass through untouched.

- A key of the file that the class does not declare is kept in ``extra`` and written back,
  so ``Block.from_dict(d).to_dict() == d`` for every block, older and newer.
- A field with the default None that is None is left out when written (a key added later
  reads as None from an older file); ``nullable()`` marks a field written even when null.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from typing import Any, Self, Union, get_args, get_origin

from geomlens.errors import GeomlensError

_NULL = "null"


def nullable() -> Any:
    """A field that defaults to None and is written as null when None."""
    return dataclasses.field(default=None, metadata={_NULL: True})


@dataclasses.dataclass(frozen=True, kw_only=True)
class Block:
    """A metrics.json block (or a row of one) read into typed fields."""

    extra: dict[str, Any] = dataclasses.field(default_factory=dict, repr=False, compare=False)
    """Keys of the file this class does not declare, written back as they were."""

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Self:
        """The block of a metrics.json dict; one sentence when a required key is missing."""
        if not isinstance(data, dict):
            raise GeomlensError(
                f"metrics.json holds {type(data).__name__} where a {cls.__name__} record "
                "belongs; the run folder is damaged: run the command again."
            )
        values: dict[str, Any] = {}
        for name, (hint, required) in _fields(cls).items():
            if name in data:
                values[name] = _read(hint, data[name])
            elif required:
                raise GeomlensError(
                    f"metrics.json has a {cls.__name__} record without {name!r}; the run "
                    "folder is damaged or from an unknown version: run the command again."
                )
        names = _fields(cls)
        extra = {k: v for k, v in data.items() if k not in names}
        # a null the file holds where None means "absent" is kept, so it is written back
        extra |= {k: None for k in values if values[k] is None and not _nullable(cls, k)}
        return cls(**values, extra=extra)

    @classmethod
    def read(cls, metrics: dict[str, Any], key: str) -> Self | None:
        """The ``key`` block of a whole metrics.json (None when the run has none)."""
        found = metrics.get(key)
        return None if found is None else cls.from_dict(found)

    def to_dict(self) -> dict[str, Any]:
        """The block as metrics.json holds it (JSON types; its keys as ever)."""
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            if f.name == "extra":
                continue
            value = getattr(self, f.name)
            if value is None and f.default is None and not f.metadata.get(_NULL):
                continue
            out[f.name] = _write(value)
        return out | self.extra


_FIELDS: dict[type, dict[str, tuple[Any, bool]]] = {}


def _nullable(cls: type, name: str) -> bool:
    found = {f.name: f for f in dataclasses.fields(cls)}[name]
    return bool(found.metadata.get(_NULL)) or found.default is not None


def _fields(cls: type) -> dict[str, tuple[Any, bool]]:
    """Each field but ``extra``: (its resolved annotation, whether the file must hold it)."""
    if cls not in _FIELDS:
        _FIELDS[cls] = _declared(cls)
    return _FIELDS[cls]


def _declared(cls: type) -> dict[str, tuple[Any, bool]]:
    hints = typing.get_type_hints(cls)
    return {
        f.name: (
            hints[f.name],
            f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING,
        )
        for f in dataclasses.fields(cls)
        if f.name != "extra"
    }


def _read(hint: Any, value: Any) -> Any:
    """``value`` read as ``hint`` says: Blocks (alone, in lists, in dicts) built, else kept."""
    if value is None:
        return None
    origin = get_origin(hint)
    if origin in (Union, types.UnionType):
        inner = [a for a in get_args(hint) if a is not type(None)]
        return _read(inner[0], value) if len(inner) == 1 else value
    if isinstance(hint, type) and issubclass(hint, Block):
        return hint.from_dict(value)
    if origin is list and isinstance(value, list):
        (item,) = get_args(hint) or (Any,)
        return [_read(item, v) for v in value]
    if origin is dict and isinstance(value, dict):
        _, item = get_args(hint) or (str, Any)
        return {k: _read(item, v) for k, v in value.items()}
    return value


def _write(value: Any) -> Any:
    if isinstance(value, Block):
        return value.to_dict()
    if isinstance(value, list):
        return [_write(v) for v in value]
    if isinstance(value, dict):
        return {k: _write(v) for k, v in value.items()}
    return value
