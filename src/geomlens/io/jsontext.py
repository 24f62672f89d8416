"""JSON read from the user's files: every way it can be unusable becomes one short reason.

``json.loads`` fails in several ways besides a syntax error: a structure nested past the
interpreter's recursion limit raises ``RecursionError``, an integer of more than 4,300
digits raises ``ValueError``, ``NaN``, ``Infinity`` or ``1e999`` are silently read as
non-finite floats, and a key given twice in one object silently keeps its last value (a
gold answer changed by a second ``"label"``). ``loads`` turns each into ``JSONTextError``
with a reason that fits in the caller's sentence; ``bad_text`` finds text that cannot be
written as UTF-8 (a lone surrogate such as ``"\\ud800"``, which JSON escapes can spell).
"""

from __future__ import annotations

import json
import math
from typing import Any


class JSONTextError(ValueError):
    """JSON that cannot be used; ``reason`` is a short phrase (no full stop)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise JSONTextError(f"the number {text[:20]} is too large to be finite")
    return value


def _constant(name: str) -> float:
    raise JSONTextError(f"{name}, which is not a number JSON allows")


METADATA_KEYS_READ = ("examples", "name")
"""The keys geomlens reads in the top-level object of a BIG-bench ``task.json``: the only
ones whose repetition there is refused (published tasks repeat metadata keys)."""


def loads(text: str) -> Any:
    """``json.loads`` with finite numbers and each key once per object.

    A key given twice is refused in every object but the top level of a BIG-bench task
    (an object holding a list of ``examples``), where only ``METADATA_KEYS_READ`` count.

    Raises:
        JSONTextError: for invalid JSON, nesting too deep to read, an integer with too many
            digits, a non-finite number, or a key given twice in one object.
    """
    repeated: list[tuple[dict[str, Any], str]] = []

    def pairs_hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        obj = dict(pairs)
        if len(obj) < len(pairs):
            seen: set[str] = set()
            for key, _ in pairs:
                if key in seen:
                    repeated.append((obj, key))
                    break
                seen.add(key)
        return obj

    try:
        value = json.loads(
            text, parse_float=_finite, parse_constant=_constant, object_pairs_hook=pairs_hook
        )
        task = isinstance(value, dict) and isinstance(value.get("examples"), list)
        for obj, key in repeated:
            if obj is value and task and key not in METADATA_KEYS_READ:
                continue
            raise JSONTextError(
                f"the key {key[:40]!r} appears twice in one object, so which value holds "
                "is not clear"
            )
        return value
    except JSONTextError:
        raise
    except json.JSONDecodeError as exc:
        raise JSONTextError(exc.msg) from None
    except RecursionError:
        raise JSONTextError("it is nested too deeply to read") from None
    except ValueError:  # int() of more digits than Python converts (sys.get_int_max_str_digits)
        raise JSONTextError("it holds an integer with too many digits") from None


def non_finite(value: Any, where: str = "") -> str | None:
    """The path of the first NaN or infinite number in ``value`` (nested dicts and lists,
    like ``decomposition.layers[3].share_pos``), or None when every number is finite."""
    if isinstance(value, float):
        return None if math.isfinite(value) else (where or "the value")
    if isinstance(value, dict):
        for key, item in value.items():
            found = non_finite(item, f"{where}.{key}" if where else str(key))
            if found is not None:
                return found
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            found = non_finite(item, f"{where}[{i}]")
            if found is not None:
                return found
    return None


def bad_text(value: str) -> str | None:
    """None when ``value`` is valid Unicode text, else a phrase naming the first lone
    surrogate (a half of a UTF-16 pair, which no UTF-8 file or tokenizer can hold)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        return f"a lone surrogate \\u{ord(value[exc.start]):04x} at character {exc.start}"
    return None
