"""Phi-3 family (Phi-3, Phi-3.5, Phi-4 text): Llama blocks with fused projections.

``qkv_proj`` holds all of Q, then K, then V; ``gate_up_proj`` the gate rows, then the up
rows. Rotary (rotate-half) covers ``partial_rotary_factor`` of each head (Phi-4-mini:
0.75); ``sliding_window``, when set, masks every layer alike. LongRoPE scaling (the 128k
checkpoints) uses the short factors up to the original context and the long ones beyond,
as Hugging Face does.
"""

from __future__ import annotations

from typing import Any

from geomlens.models.families.base import ROTARY_OPTIONS, Family
from geomlens.models.families.common import activation_of, config_window, fused_heads
from geomlens.models.view import MlpView, linear_in_out


def phi3_mlp(mlp: Any, config: Any, layer: Any = None) -> MlpView:
    """``act(x W_gate) * (x W_in)`` from the fused ``gate_up_proj`` (gate first)."""
    fused = linear_in_out(mlp.gate_up_proj)  # [d, 2 * ff]
    ff = fused.shape[1] // 2
    return MlpView(
        W_in=fused[:, ff:],
        W_gate=fused[:, :ff],
        W_out=linear_in_out(mlp.down_proj),
        b_in=None,
        b_out=None,
        activation=activation_of(config),
        module=mlp,
    )


PHI3 = Family(
    name="phi3",
    model_types=("phi3",),
    features=("fused QKV", "fused gate/up", "partial rotary", "sliding window"),
    auto_class="causal-lm",
    handles=frozenset(
        {"original_max_position_embeddings", "partial_rotary_factor", "sliding_window"}
    ),
    options={
        **ROTARY_OPTIONS,
    },
    heads=fused_heads("qkv_proj", "o_proj", "contiguous"),
    mlp_view=phi3_mlp,
    sites=("qkv_proj", "o_proj"),
    settings=config_window,
)
