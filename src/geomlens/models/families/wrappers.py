"""Multimodal wrappers read through their language model: Gemma 3 (``gemma3``, 4B and up)
and Mistral 3 (``mistral3``, Mistral Small 3.1).

A wrapper (``Gemma3ForConditionalGeneration``, ``Mistral3ForConditionalGeneration``) holds
a vision tower, a projector, a language model (``model.language_model``, of the type its
``text_config`` names) and ``lm_head``. On text alone (no pixels) its forward pass is the
language model's followed by ``lm_head``, with nothing between: the view is the text
config's family's view of that language model and head, with the wrapper as ``model``, so
the on-load check runs the wrapper's own forward pass. The wrapper's other options shape
the image path only, which text never enters.
"""

from __future__ import annotations

from dataclasses import replace
from functools import partial
from typing import Any

from torch import nn

from geomlens.errors import GeomlensError
from geomlens.models.families.base import GENERIC_OPTIONS, Family, differing_options, is_dropout
from geomlens.models.view import ModelView

TEXT_WRAPPERS: dict[str, frozenset[str]] = {
    "gemma3": frozenset(
        {
            "vision_config",
            "mm_tokens_per_image",
            "boi_token_index",
            "eoi_token_index",
            "image_token_index",
            "image_token_id",
        }
    ),
    "mistral3": frozenset(
        {
            "vision_config",
            "image_token_index",
            "image_token_id",
            "projector_hidden_act",
            "vision_feature_layer",
            "multimodal_projector_bias",
            "spatial_merge_size",
        }
    ),
}
"""Wrapper model type -> its options besides ``text_config`` (all on the image path)."""


class TextShell(nn.Module):
    """The wrapper's language model and head seen as a causal LM of the text config
    (``model``, ``lm_head``, ``config``), which the text family's paths expect; it holds
    the wrapper's own modules, nothing copied."""

    def __init__(self, language_model: nn.Module, lm_head: nn.Module, config: Any):
        super().__init__()
        self.model = language_model
        self.lm_head = lm_head
        self.config = config


def build_through_text(
    text: Family, model: Any, tokenizer: Any, name: str, source: str
) -> ModelView:
    """The ``text`` family's view of the wrapper's language model and ``lm_head``, whose
    ``model`` is the wrapper. Its logits are ``lm_head`` alone, as the wrapper computes them
    (Gemma 3's wrapper applies no final soft-capping, whatever the text config says)."""
    shell = TextShell(model.model.language_model, model.lm_head, model.config.text_config)
    view = text.build(shell, tokenizer, name, source)
    return replace(view, model=model, logit_softcap=None)


def through_text(config: Any, text: Family) -> Family:
    """The family of a wrapper config whose ``text_config`` the family ``text`` handles.

    Raises:
        GeomlensError: naming the wrapper's options that are not on the image path.
    """
    model_type = config.model_type
    handled = TEXT_WRAPPERS[model_type] | {"text_config"}
    problems = [
        k
        for k in differing_options(config)
        if not (k in handled or k in GENERIC_OPTIONS or is_dropout(k))
    ]
    if problems:
        raise GeomlensError(
            f"the {model_type} wrapper's options {', '.join(sorted(problems))} are not "
            "declared (geomlens reads its language model only); use a model without them."
        )
    return replace(
        text,
        model_types=(model_type,),
        auto_class="image-text-to-text",
        builder=partial(build_through_text, text),
    )
