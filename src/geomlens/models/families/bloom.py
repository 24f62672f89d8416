"""BLOOM family: pre-LayerNorm blocks, ALiBi position bias, fused per-head QKV.

The embedding is normalised (``word_embeddings_layernorm``) before block 0. Scores are
``q . k / sqrt(d_head) + m_h (j - i)``; Hugging Face adds ``m_h j``, which differs by a
constant per query row, so the softmax is the same. Slopes ``m_h`` come from Hugging Face's
own ``build_alibi_tensor``. The MLP's GELU is the tanh approximation ("gelu_new").
"""

from __future__ import annotations

from typing import Any

import torch

from geomlens.models.families.base import AttentionSettings, Dims, Family, falsy
from geomlens.models.families.common import dense_mlp, fused_heads


def alibi_slopes(n_heads: int) -> torch.Tensor:
    """[H] slopes: Hugging Face's ALiBi tensor at position 1 of a two-token mask (BLOOM's
    modelling code is imported here, when a BLOOM model is read, not with the family table)."""
    from transformers.models.bloom.modeling_bloom import build_alibi_tensor

    return build_alibi_tensor(torch.ones(1, 2), n_heads, torch.float32)[:, 0, 1]


def alibi_settings(config: Any, dims: Dims, index: int, attention: Any) -> AttentionSettings:
    slopes = alibi_slopes(dims.n_heads)

    def bias(length: int) -> torch.Tensor:
        pos = torch.arange(length, dtype=torch.float32)
        return slopes[:, None, None] * (pos[None, :] - pos[:, None])[None]

    return AttentionSettings(bias_fn=bias)


def not_tp_exact(config: Any) -> list[str]:
    """Megatron's sliced output projections (``slow_but_exact`` with ``pretraining_tp > 1``)."""
    if getattr(config, "slow_but_exact", False) and getattr(config, "pretraining_tp", 1) > 1:
        return [f"slow_but_exact=True with pretraining_tp={config.pretraining_tp} (handled: off)"]
    return []


BLOOM = Family(
    name="bloom",
    model_types=("bloom",),
    features=("fused QKV", "embedding norm"),
    auto_class="causal-lm",
    handles=frozenset({"pretraining_tp", "slow_but_exact"}),
    options={"apply_residual_connection_post_layernorm": falsy},
    heads=fused_heads("query_key_value", "dense", "per-head"),
    mlp_view=dense_mlp("dense_h_to_4h", "dense_4h_to_h", activation="gelu_new"),
    base=("transformer",),
    embed="word_embeddings",
    embedding_norm="word_embeddings_layernorm",
    layers="h",
    final_norm="ln_f",
    attention="self_attention",
    sites=("query_key_value", "dense"),
    norm_kind="layernorm",
    position="alibi",
    settings=alibi_settings,
    checks=not_tp_exact,
)
