"""Mixture-of-experts families with Llama's attention: Qwen 2 MoE (Qwen1.5-MoE,
Qwen2-57B-A14B), Qwen 3 MoE and OLMoE.

Qwen 2 MoE is Qwen 2's attention (Q/K/V biases) with a mixture of experts whose router
keeps the top k softmax weights (renormalised with ``norm_topk_prob``) plus a shared
expert weighted by ``sigmoid(x W_shared_gate)``; layers in ``mlp_only_layers`` (or off
the ``decoder_sparse_step``) have a dense MLP. Qwen 3 MoE is Qwen 3's attention (per-head
q/k RMSNorms) with routed experts only.
"""

from __future__ import annotations

from typing import Any

from geomlens.models.families.base import ROTARY_OPTIONS, Family, falsy
from geomlens.models.families.common import gated_mlp, module_window, qk_norms, separate_heads
from geomlens.models.families.gemma3 import known_layer_types
from geomlens.models.families.moe import mixture
from geomlens.models.families.qwen3 import qwen3_settings


def topk_renormalised(config: Any, router: Any) -> bool:
    return bool(router.norm_topk_prob)


MOE_OPTIONS = frozenset(
    {
        "decoder_sparse_step",
        "max_window_layers",
        "mlp_only_layers",
        "moe_intermediate_size",
        "norm_topk_prob",
        "num_experts",
        "num_experts_per_tok",
        "sliding_window",
        "use_sliding_window",
    }
)
"""The config options both Qwen mixture-of-experts families handle: the experts, the router,
which layers are sparse, and the sliding window."""


QWEN2_MOE = Family(
    name="qwen2_moe",
    model_types=("qwen2_moe",),
    features=("GQA", "QKV biases", "MoE (router + shared expert)", "sliding layers"),
    auto_class="causal-lm",
    handles=MOE_OPTIONS | {"qkv_bias", "shared_expert_intermediate_size"},
    options={**ROTARY_OPTIONS, "layer_types": known_layer_types},
    heads=separate_heads(),
    mlp_view=mixture(
        renormalise=topk_renormalised,
        shared=("shared_expert", "shared_expert_gate"),
        dense=gated_mlp(),
    ),
    settings=module_window,
)

QWEN3_MOE = Family(
    name="qwen3_moe",
    model_types=("qwen3_moe",),
    features=("GQA", "per-head q/k norms", "MoE (router + experts)"),
    auto_class="causal-lm",
    handles=MOE_OPTIONS | {"attention_bias", "num_local_experts"},
    options={**ROTARY_OPTIONS, "layer_types": known_layer_types},
    heads=separate_heads(),
    mlp_view=mixture(renormalise=topk_renormalised, dense=gated_mlp()),
    extra_norms={"q_norm": "self_attn.q_norm", "k_norm": "self_attn.k_norm"},
    settings=qwen3_settings,
)

OLMOE = Family(
    name="olmoe",
    model_types=("olmoe",),
    features=("q/k norms over all heads", "MoE (router + experts)"),
    auto_class="causal-lm",
    handles=frozenset({"attention_bias", "norm_topk_prob", "num_experts", "num_experts_per_tok"}),
    options={**ROTARY_OPTIONS, "clip_qkv": falsy},
    heads=separate_heads(),
    mlp_view=mixture(renormalise=topk_renormalised),
    extra_norms={"q_norm": "self_attn.q_norm", "k_norm": "self_attn.k_norm"},
    settings=qk_norms(layout="joined"),
)
"""OLMoE: pre-norm Llama blocks with RMSNorms over all query (and all key) heads at once
and a mixture of experts (top-k softmax weights, renormalised with ``norm_topk_prob``)."""
