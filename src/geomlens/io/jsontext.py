"""JSON read from the user's files: every way it can be unusable becomes one short reason.

``json.loads`` fails in several ways besides a syntax error: a structure nested past the
interpreter's recursion limit raises ``RecursionError``, an integer of more than 4,300
digits raises ``ValueError``, and ``NaN``, ``Infinity`` or ``1e999`` are silently read as
non-finite floats. ``loads`` turns each into ``JSONTextError`` with a reason that fits in
the caller's sentence; ``bad_text`` finds text that cannot be written as UTF-8 (a lone
surrogate such as ``"\\ud800"``, which JSON escapes can spell).
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


def loads(text: str) -> Any:
    """``json.loads`` with finite numbers only.

    Raises:
        JSONTextError: for invalid JSON, nesting too deep to read, an integer with too many
            digits, or a non-finite number.
    """
    try:
        return json.loads(text, parse_float=_finite, parse_constant=_constant)
    except JSONTextError:
        raise
    except json.JSONDecodeError as exc:
        raise JSONTextError(exc.msg) from None
    except RecursionError:
        raise JSONTextError("it is nested too deeply to read") from None
    except ValueError:  # int() of more digits than Python converts (sys.get_int_max_str_digits)
        raise JSONTextError("it holds an integer with too many digits") from None


def bad_text(value: str) -> str | None:
    """None when ``value`` is valid Unicode text, else a phrase naming the first lone
    surrogate (a half of a UTF-16 pair, which no UTF-8 file or tokenizer can hold)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        return f"a lone surrogate \\u{ord(value[exc.start]):04x} at character {exc.start}"
    return None
