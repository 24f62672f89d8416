"""One small mapping per model family; an unknown architecture is an error, never a guess."""

from __future__ import annotations

from typing import Any

from geomlens.errors import GeomlensError
from geomlens.models.families.base import Family
from geomlens.models.families.bert import BERT, ROBERTA
from geomlens.models.families.bloom import BLOOM
from geomlens.models.families.codegen import CODEGEN
from geomlens.models.families.cohere import COHERE
from geomlens.models.families.falcon import FALCON
from geomlens.models.families.gemma import GEMMA
from geomlens.models.families.gemma2 import GEMMA2
from geomlens.models.families.gemma3 import GEMMA3
from geomlens.models.families.gpt2 import GPT2
from geomlens.models.families.gpt_bigcode import GPT_BIGCODE
from geomlens.models.families.gpt_neo import GPT_NEO
from geomlens.models.families.gpt_neox import GPT_NEOX
from geomlens.models.families.gptj import GPTJ
from geomlens.models.families.granite import GRANITE, GRANITEMOE
from geomlens.models.families.helium import HELIUM
from geomlens.models.families.llama import LLAMA
from geomlens.models.families.mistral import MISTRAL
from geomlens.models.families.mixtral import MIXTRAL
from geomlens.models.families.nemotron import NEMOTRON
from geomlens.models.families.olmo import OLMO
from geomlens.models.families.olmo2 import OLMO2
from geomlens.models.families.olmo3 import OLMO3
from geomlens.models.families.opt import OPT
from geomlens.models.families.phi import PHI
from geomlens.models.families.phi3 import PHI3
from geomlens.models.families.qwen2 import QWEN2
from geomlens.models.families.qwen3 import QWEN3
from geomlens.models.families.qwen_moe import QWEN2_MOE, QWEN3_MOE
from geomlens.models.families.smollm3 import SMOLLM3
from geomlens.models.families.stablelm import STABLELM
from geomlens.models.families.starcoder2 import STARCODER2
from geomlens.models.families.t5 import T5
from geomlens.models.families.xglm import XGLM

FAMILIES: tuple[Family, ...] = (
    LLAMA,
    BERT,
    GPT2,
    T5,
    GEMMA3,
    ROBERTA,
    GPT_NEO,
    GPTJ,
    GPT_NEOX,
    FALCON,
    PHI,
    OPT,
    BLOOM,
    MISTRAL,
    MIXTRAL,
    QWEN2,
    QWEN3,
    GEMMA,
    GEMMA2,
    OLMO2,
    PHI3,
    STARCODER2,
    STABLELM,
    GRANITE,
    GRANITEMOE,
    COHERE,
    OLMO,
    OLMO3,
    QWEN2_MOE,
    QWEN3_MOE,
    SMOLLM3,
    NEMOTRON,
    HELIUM,
    GPT_BIGCODE,
    CODEGEN,
    XGLM,
)


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
