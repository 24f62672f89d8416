"""One small mapping per model family; an unknown architecture is an error, never a guess."""

from __future__ import annotations

from typing import Any

from geomlens.errors import GeomlensError
from geomlens.models.families.albert import ALBERT
from geomlens.models.families.bart import BART, MBART
from geomlens.models.families.base import Family
from geomlens.models.families.bert import (
    BERT,
    CAMEMBERT,
    DATA2VEC_TEXT,
    ELECTRA,
    ROBERTA,
    XLM_ROBERTA,
)
from geomlens.models.families.bloom import BLOOM
from geomlens.models.families.codegen import CODEGEN
from geomlens.models.families.cohere import COHERE
from geomlens.models.families.cohere2 import COHERE2
from geomlens.models.families.common import activation_of
from geomlens.models.families.distilbert import DISTILBERT
from geomlens.models.families.exaone4 import EXAONE4
from geomlens.models.families.falcon import FALCON
from geomlens.models.families.gemma import GEMMA
from geomlens.models.families.gemma2 import GEMMA2
from geomlens.models.families.gemma3 import GEMMA3
from geomlens.models.families.glm import GLM, GLM4
from geomlens.models.families.glm4_moe import GLM4_MOE
from geomlens.models.families.gpt2 import GPT2
from geomlens.models.families.gpt_bigcode import GPT_BIGCODE
from geomlens.models.families.gpt_neo import GPT_NEO
from geomlens.models.families.gpt_neox import GPT_NEOX
from geomlens.models.families.gpt_oss import GPT_OSS
from geomlens.models.families.gptj import GPTJ
from geomlens.models.families.granite import GRANITE, GRANITEMOE
from geomlens.models.families.helium import HELIUM
from geomlens.models.families.llama import LLAMA
from geomlens.models.families.llama4 import LLAMA4
from geomlens.models.families.mistral import MISTRAL
from geomlens.models.families.mixtral import MIXTRAL
from geomlens.models.families.modernbert import MODERNBERT
from geomlens.models.families.mpnet import MPNET
from geomlens.models.families.mpt import MPT
from geomlens.models.families.nemotron import NEMOTRON
from geomlens.models.families.olmo import OLMO
from geomlens.models.families.olmo2 import OLMO2
from geomlens.models.families.olmo3 import OLMO3
from geomlens.models.families.opt import OPT
from geomlens.models.families.phi import PHI
from geomlens.models.families.phi3 import PHI3
from geomlens.models.families.qwen2 import QWEN2
from geomlens.models.families.qwen3 import QWEN3
from geomlens.models.families.qwen_moe import OLMOE, QWEN2_MOE, QWEN3_MOE
from geomlens.models.families.smollm3 import SMOLLM3
from geomlens.models.families.stablelm import STABLELM
from geomlens.models.families.starcoder2 import STARCODER2
from geomlens.models.families.t5 import MT5, T5
from geomlens.models.families.wrappers import TEXT_WRAPPERS, through_text
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
    OLMOE,
    GLM,
    GLM4,
    DISTILBERT,
    ELECTRA,
    XLM_ROBERTA,
    CAMEMBERT,
    DATA2VEC_TEXT,
    ALBERT,
    MODERNBERT,
    BART,
    MBART,
    MT5,
    COHERE2,
    EXAONE4,
    MPT,
    GLM4_MOE,
    MPNET,
    GPT_OSS,
    LLAMA4,
)


REFUSED: dict[str, str] = {
    **dict.fromkeys(
        ("deepseek_v2", "deepseek_v3", "deepseek_v32", "minicpm3"),
        "its multi-head latent attention builds keys and values from a low-rank latent plus a "
        "separately rotated part, so its scores are not the bilinear query-key products of "
        "per-head projections that geomlens reads",
    ),
    **dict.fromkeys(
        ("deberta", "deberta-v2", "sew-d"),
        "its disentangled attention adds content-to-position and position-to-content scores "
        "from relative position embeddings, so its scores are not the bilinear query-key "
        "products of per-head projections that geomlens reads",
    ),
    "diffllama": "its differential attention subtracts two softmax maps, so a head's weights are "
    "not one softmax of query-key products",
    **dict.fromkeys(
        ("mamba", "mamba2", "falcon_mamba", "rwkv", "xlstm"),
        "it is a state-space or recurrent model, with no attention for geomlens to read",
    ),
    **dict.fromkeys(
        (
            "jamba",
            "zamba",
            "zamba2",
            "bamba",
            "falcon_h1",
            "nemotron_h",
            "granitemoehybrid",
            "lfm2",
            "lfm2_moe",
            "qwen3_next",
            "recurrent_gemma",
            "olmo_hybrid",
            "kimi_linear",
            "bailing_hybrid",
        ),
        "it is a hybrid whose blocks mix attention with state-space, recurrent or linear "
        "attention layers, which geomlens does not read",
    ),
}
"""Model types refused with the reason: attention that is not a bilinear form of per-head
projections, or no (softmax) attention in every block."""


class UndeclaredType(GeomlensError):
    """A model type no family declares; the loader may still load it through a declared
    layout that passes the on-load check (``layouts_for``)."""


def family_for(config: Any) -> Family:
    """The family that handles ``config``, after checking every option it does not handle.

    Raises:
        GeomlensError: for an option the family does not handle, or a refused model type.
        UndeclaredType: for a model type no family declares.
    """
    model_type = getattr(config, "model_type", None)
    if model_type in TEXT_WRAPPERS:  # a multimodal wrapper, read through its language model
        return through_text(config, family_for(config.text_config))
    check_activation(config)
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
    if model_type in REFUSED:
        raise GeomlensError(
            f"model type {model_type!r} is not supported: {REFUSED[model_type]}; "
            "use a transformer of a supported family (geomlens models --families)."
        )
    raise UndeclaredType(
        f"model type {model_type!r} is not supported (supported: {', '.join(model_types())}); "
        "use a model of a supported family."
    )


def check_activation(config: Any) -> None:
    """Refuse an activation name Hugging Face's own table (ACT2FN) does not know: the model
    could not be built, nor its MLP read."""
    from transformers.activations import ACT2FN

    try:
        name = activation_of(config)
    except AttributeError:  # the family reads its activation elsewhere
        return
    if name not in ACT2FN:
        raise GeomlensError(
            f"the config's activation {name!r} is not one transformers implements "
            f"(e.g. {', '.join(sorted(ACT2FN)[:6])}, ...); fix the config's activation name."
        )


def model_types() -> list[str]:
    """Every declared model type, in table order."""
    return [t for f in FAMILIES for t in f.model_types]


def layouts_for(config: Any, auto_class: str) -> list[Family]:
    """The declared layouts an undeclared model type may load through: the families loaded
    by the same Auto class whose option checks accept its config, in table order (their
    module paths and the on-load check decide)."""
    out = []
    for family in FAMILIES:
        if family.auto_class != auto_class or family.builder is not None:
            continue
        try:
            if family.unhandled(config):
                continue
        except (AttributeError, KeyError, TypeError, ValueError):
            continue
        out.append(family)
    return out
