"""Falcon family: parallel attention and MLP, fused QKV, rotary positions.

Three block shapes, chosen from the config (``variant``): the new decoder architecture
(Falcon-40B/180B) with grouped-query QKV (per KV group: its queries, one K, one V) and two
norms ``ln_attn``/``ln_mlp`` (one shared ``input_layernorm`` when
``num_ln_in_parallel_attn=1``); the original one (Falcon-7B) with a shared
``input_layernorm`` and multi-query QKV [all Q | one K | one V] (per-head [q, k, v] without
``multi_query``); and, with ``parallel_attn=False``, sequential pre-norm blocks. ALiBi
(Falcon-RW) is not mapped: Hugging Face's eager attention adds the bias twice.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from geomlens.models.families.base import Dims, Family, falsy, known_rope, standard_dims
from geomlens.models.families.common import dense_mlp, fused_heads


def falcon_dims(config: Any) -> Dims:
    if config.new_decoder_architecture:
        kv = config.num_kv_heads
    else:
        kv = 1 if config.multi_query else config.num_attention_heads
    return replace(standard_dims(config), n_kv_heads=kv)


def falcon_variant(config: Any) -> dict[str, Any]:
    """Fused QKV layout, norms and block layout of this config's architecture."""
    norms: tuple[str, str | None]
    if config.new_decoder_architecture:
        fused, layout = "grouped", "parallel"
        two = (config.num_ln_in_parallel_attn or 2) == 2
        norms = ("ln_attn", "ln_mlp") if two else ("input_layernorm", None)
    else:
        fused = "contiguous" if config.multi_query else "per-head"
        layout = "parallel" if config.parallel_attn else "pre"
        norms = ("input_layernorm", None if config.parallel_attn else "post_attention_layernorm")
    return dict(
        heads=fused_heads("query_key_value", "dense", fused),
        layout=layout,
        norm_attn=norms[0],
        norm_mlp=norms[1],
    )


def runnable(config: Any) -> list[str]:
    """Combinations Hugging Face's Falcon layer builds and runs consistently."""
    n_ln, new = config.num_ln_in_parallel_attn, config.new_decoder_architecture
    if new and not config.parallel_attn:
        return ["parallel_attn=False (handled: True with new_decoder_architecture)"]
    if n_ln not in ((None, 1, 2) if new else (None, 1)):
        return [f"num_ln_in_parallel_attn={n_ln!r} (handled: None, 1{', 2' if new else ''})"]
    kv, heads = config.num_kv_heads, config.num_attention_heads
    if not new and not config.multi_query and kv != heads:
        return [f"num_kv_heads={kv!r} (handled: {heads} = num_attention_heads, no multi_query)"]
    return []


FALCON = Family(
    name="falcon",
    model_types=("falcon",),
    features=("fused QKV", "multi-query", "GQA"),
    auto_class="causal-lm",
    handles=frozenset(
        {
            "bias",
            "multi_query",
            "new_decoder_architecture",
            "num_ln_in_parallel_attn",
            "parallel_attn",
        }
    ),
    options={"alibi": falsy, "rope_parameters": known_rope, "rope_scaling": known_rope},
    mlp_view=dense_mlp("dense_h_to_4h", "dense_4h_to_h"),
    base=("transformer",),
    embed="word_embeddings",
    layers="h",
    final_norm="ln_f",
    attention="self_attention",
    sites=("query_key_value", "dense"),
    norm_kind="layernorm",
    dims=falcon_dims,
    checks=runnable,
    variant=falcon_variant,
)
