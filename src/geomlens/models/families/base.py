"""What every family mapping provides, and the check that refuses unhandled options."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from geomlens.models.view import ModelView

# A config option's check: returns None when handled, else what the mapping supports.
OptionCheck = Callable[[Any], str | None]


def one_of(*allowed: Any) -> OptionCheck:
    """Accept only the listed values of an option."""

    def check(value: Any) -> str | None:
        return None if value in allowed else "handled: " + ", ".join(repr(a) for a in allowed)

    return check


def falsy(value: Any) -> str | None:
    """Accept an option only when it is off (None, False, 0, empty)."""
    return None if not value else "handled: off"


@dataclass(frozen=True)
class Family:
    """One model family: which configs it takes and how its modules map onto the view.

    Attributes:
        name: the family name shown to users.
        model_types: Hugging Face ``config.model_type`` values it handles.
        options: config attribute -> check; every option that fails is listed in one error.
        auto_class: "causal-lm", "seq2seq-lm" or "base" (which Auto class loads it).
        build: (model, tokenizer, name, source) -> ModelView.
    """

    name: str
    model_types: tuple[str, ...]
    options: Mapping[str, OptionCheck]
    auto_class: str
    build: Callable[[Any, Any, str, str], ModelView]

    def unhandled(self, config: Any) -> list[str]:
        """Every config option this mapping does not handle, as readable strings."""
        problems = []
        for option, check in self.options.items():
            if not hasattr(config, option):
                continue
            value = getattr(config, option)
            why = check(value)
            if why is not None:
                problems.append(f"{option}={value!r} ({why})")
        return problems
