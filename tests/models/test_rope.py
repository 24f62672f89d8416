"""Rope scaling of every type transformers implements, against Hugging Face's own rotary.

For each rope type in transformers' rope table (and "default"), a tiny Llama is built with
that type; the view's rotation of queries and keys must equal Hugging Face's
``apply_rotary_pos_emb`` with the cos/sin its own rotary module returns, at a length inside
the original context and one beyond it (LongRoPE switches to its long factors there;
dynamic NTK is refused there, in one sentence). The relative-offset rotation the W_QK
basis uses must carry the same frequencies and attention scaling, and the attention
probabilities rebuilt from the view must equal Hugging Face's eager attention weights.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
import transformers
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

from geomlens.errors import GeomlensError
from geomlens.models import ModelView
from geomlens.models.families import family_for
from geomlens.models.families.rope import rope_types

ORIGINAL = 8
"""The original context of the scaled configs: inputs longer than this are "long"."""

PARAMETERS: dict[str, dict[str, Any]] = {
    "default": {},
    "linear": {"factor": 4.0},
    "dynamic": {"factor": 2.0},
    "yarn": {"factor": 4.0, "original_max_position_embeddings": ORIGINAL},
    "longrope": {
        "short_factor": [1.0, 1.1, 1.3, 1.6, 2.0, 2.5, 3.0, 3.5],
        "long_factor": [1.0, 2.0, 3.0, 5.0, 8.0, 12.0, 16.0, 20.0],
        "original_max_position_embeddings": ORIGINAL,
    },
    "llama3": {
        "factor": 8.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": ORIGINAL,
    },
    "proportional": {"partial_rotary_factor": 0.5},
}


def test_every_rope_type_transformers_implements_is_covered() -> None:
    assert set(rope_types()) == {"default", *ROPE_INIT_FUNCTIONS}
    assert set(PARAMETERS) == set(rope_types())


_VIEWS: dict[str, ModelView] = {}


def tiny_llama(kind: str) -> ModelView:
    """A tiny random Llama with rope type ``kind``, seen through its family (cached)."""
    if kind not in _VIEWS:
        config = transformers.LlamaConfig(
            vocab_size=64,
            hidden_size=64,
            intermediate_size=64,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            max_position_embeddings=32,
            rope_parameters={"rope_type": kind, "rope_theta": 10000.0, **PARAMETERS[kind]},
        )
        torch.manual_seed(0)
        model = transformers.AutoModelForCausalLM.from_config(config, attn_implementation="eager")
        model.eval().requires_grad_(False)
        _VIEWS[kind] = family_for(config).build(model, None, f"tiny-{kind}", "memory")
    return _VIEWS[kind]


def hf_rotated(view: ModelView, q: torch.Tensor) -> torch.Tensor:
    """``q`` [B, H, T, dh] rotated by Hugging Face's own rotary module at positions 0..T-1."""
    T = q.shape[-2]
    rotary = view.base.rotary_emb  # type: ignore[union-attr]
    with torch.inference_mode():
        cos, sin = rotary(q, torch.arange(T)[None])
        return apply_rotary_pos_emb(q, q, cos, sin)[0]


@pytest.mark.parametrize("kind", list(PARAMETERS))
@pytest.mark.parametrize("length", [ORIGINAL - 2, ORIGINAL + 5])
def test_rotation_equals_hfs_at_each_length(kind: str, length: int) -> None:
    view = tiny_llama(kind)
    rotary = view.blocks[0].attn.rotary
    assert rotary is not None and rotary.rope_type == kind
    q = torch.randn(1, 4, length, view.d_head, generator=torch.Generator().manual_seed(1))
    torch.testing.assert_close(rotary.apply(q), hf_rotated(view, q), atol=1e-6, rtol=1e-5)


def test_longrope_switches_to_the_long_factors_beyond_the_original_context() -> None:
    rotary = tiny_llama("longrope").blocks[0].attn.rotary
    assert rotary is not None
    short, long = rotary.at(ORIGINAL), rotary.at(ORIGINAL + 1)
    factors = torch.tensor(PARAMETERS["longrope"]["short_factor"])
    ratio = short.inv_freq / long.inv_freq
    expected = torch.tensor(PARAMETERS["longrope"]["long_factor"]) / factors
    torch.testing.assert_close(ratio, expected)
    assert short.attention_scaling == long.attention_scaling > 1.0


def test_dynamic_beyond_the_original_context_is_refused_in_one_sentence() -> None:
    view = tiny_llama("dynamic")
    rotary = view.blocks[0].attn.rotary
    assert rotary is not None
    rotary.at(view.n_ctx or 0)  # within the context: the initial frequencies
    with pytest.raises(GeomlensError, match="dynamic rope scaling") as info:
        rotary.at((view.n_ctx or 0) + 1)
    assert str(info.value).count(". ") == 0


@pytest.mark.parametrize("kind", ["yarn", "longrope", "llama3"])
def test_offset_rotation_carries_the_same_frequencies_and_scaling(kind: str) -> None:
    """rope(q, i) . rope(k, j) = q R(i - j) k^T, with R from ``Rotary.rotation``."""
    view = tiny_llama(kind)
    rotary = view.blocks[0].attn.rotary
    assert rotary is not None
    g = torch.Generator().manual_seed(2)
    length = ORIGINAL + 4
    q = torch.randn(view.d_head, generator=g, dtype=torch.float64)
    k = torch.randn(view.d_head, generator=g, dtype=torch.float64)
    seq = torch.zeros(length, view.d_head, dtype=torch.float64)
    seq[length - 1], seq[2] = q, k
    rotated = rotary.apply(seq)
    dot = rotated[length - 1] @ rotated[2]
    R = rotary.rotation(view.d_head, length - 3, length)
    assert float(dot) == pytest.approx(float(q @ R @ k), rel=1e-5)


@pytest.mark.parametrize("kind", ["linear", "yarn", "longrope", "llama3", "proportional"])
def test_attention_probabilities_equal_hfs_beyond_the_original_context(kind: str) -> None:
    view = tiny_llama(kind)
    ids = torch.randint(0, 64, (2, ORIGINAL + 5), generator=torch.Generator().manual_seed(3))
    with torch.inference_mode():
        out = view.model(input_ids=ids, output_hidden_states=True, output_attentions=True)
        for block in view.blocks:
            x = block.norm_attn(out.hidden_states[block.index])
            torch.testing.assert_close(
                block.attn.probabilities(x), out.attentions[block.index], atol=2e-6, rtol=1e-4
            )


def test_a_rope_type_transformers_does_not_implement_is_refused() -> None:
    config = transformers.LlamaConfig(rope_parameters={"rope_type": "mrope", "rope_theta": 1e4})
    with pytest.raises(GeomlensError, match="rope_parameters"):
        family_for(config)
