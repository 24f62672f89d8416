"""EXAONE 4 family: OLMo 2's post-sublayer norms, per-head q/k RMSNorms, sliding-window
layers with rotary and global layers without positions (NoPE).

A block is ``h + N1(Attn h)``, then ``+ N2(MLP .)`` (``post_attention_layernorm``,
``post_feedforward_layernorm``). ``q_norm`` and ``k_norm`` normalise each head's query and
key (over d_head) before any rotation. With a ``sliding_window`` in the config, layers
listed as ``sliding_attention`` mask keys that window or more positions back and rotate,
and the full-attention layers do not rotate (EXAONE 4.0 32B); without one (EXAONE 4.0
1.2B) every layer is full attention and rotates.
"""

from __future__ import annotations

from typing import Any

from geomlens.models.families.base import AttentionSettings, Dims, with_options
from geomlens.models.families.common import qk_norms
from geomlens.models.families.gemma3 import known_layer_types
from geomlens.models.families.olmo2 import OLMO2

_norms = qk_norms(layout="heads")


def exaone4_settings(config: Any, dims: Dims, index: int, attention: Any) -> AttentionSettings:
    """The per-head q/k norms; the window on sliding layers; rotation as Hugging Face
    applies it (every layer without a configured window, else the sliding layers only)."""
    sliding = bool(attention.is_sliding)
    return AttentionSettings(
        qk_norm=_norms(config, dims, index, attention).qk_norm,
        window=attention.sliding_window if sliding else None,
        rope=attention.sliding_window is None or sliding,
    )


EXAONE4 = with_options(
    OLMO2,
    name="exaone4",
    model_types=("exaone4",),
    features=("GQA", "per-head q/k norms", "NoPE layers", "sliding layers"),
    handles=frozenset({"sliding_window", "sliding_window_pattern"}),
    options={**OLMO2.options, "layer_types": known_layer_types},
    settings=exaone4_settings,
)
