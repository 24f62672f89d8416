"""One small mapping per model family; an unknown architecture is an error, never a guess."""

from __future__ import annotations

from typing import Any

from geomlens.errors import GeomlensError
from geomlens.models.families.base import Family
from geomlens.models.families.bert import BERT
from geomlens.models.families.gemma3 import GEMMA3
from geomlens.models.families.gpt2 import GPT2
from geomlens.models.families.llama import LLAMA
from geomlens.models.families.t5 import T5

FAMILIES: tuple[Family, ...] = (LLAMA, BERT, GPT2, T5, GEMMA3)


def family_for(config: Any) -> Family:
    """The family that handles ``config``, after checking every option it does not handle."""
    model_type = getattr(config, "model_type", None)
    for family in FAMILIES:
        if model_type in family.model_types:
            problems = family.unhandled(config)
            if problems:
                raise GeomlensError(
                    f"the {family.name} mapping does not handle these config options: "
                    + "; ".join(problems)
                    + ". Use a model without them, or extend the family mapping."
                )
            return family
    known = ", ".join(t for f in FAMILIES for t in f.model_types)
    raise GeomlensError(
        f"model type {model_type!r} is not supported (supported: {known}); "
        "use a model of a supported family."
    )
