"""The small GPT-2-style decoder of the addition study, and its ``ModelView``.

The model is ``transformers.GPT2LMHeadModel`` built from a config: learned absolute
positions, pre-LayerNorm blocks, tied embeddings, no dropout. The view comes from the
same gpt2 family mapping that loads GPT-2 checkpoints, so every analysis sees it exactly
as it sees a pretrained model.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from geomlens.analyses.arithmetic.data import PAD, VOCAB, CharTokenizer
from geomlens.models.families import family_for
from geomlens.models.loading import quiet_transformers
from geomlens.models.view import ModelView


@dataclass(frozen=True)
class ModelShape:
    """Size of the decoder.

    Attributes:
        n_layers: blocks; n_heads: heads per block; d_model: width (a multiple of n_heads).
        n_positions: rows of the learned position table (the longest sequence).
    """

    n_layers: int
    n_heads: int
    d_model: int
    n_positions: int


def build_model(shape: ModelShape, seed: int, attention: str = "sdpa") -> Any:
    """A freshly initialised ``GPT2LMHeadModel`` (initialisation drawn from ``seed``).

    The global torch random state is left as it was.
    """
    quiet_transformers()
    from transformers import AutoModelForCausalLM, GPT2Config

    config = GPT2Config(
        vocab_size=len(VOCAB),
        n_positions=shape.n_positions,
        n_embd=shape.d_model,
        n_layer=shape.n_layers,
        n_head=shape.n_heads,
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
        bos_token_id=None,
        eos_token_id=None,
        pad_token_id=PAD,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return AutoModelForCausalLM.from_config(config, attn_implementation=attention)


def model_view(model: Any, name: str = "arithmetic", source: str = "") -> ModelView:
    """The ``ModelView`` of an in-memory model, through its family mapping."""
    return family_for(model.config).build(model, CharTokenizer(), name, source)
