"""GPT-Neo family: pre-LayerNorm blocks, learned positions, global and local attention.

GPT-Neo does not scale q . k by 1/sqrt(d_head) (scale 1). Layers alternate between global
attention and local attention over the last ``window_size`` keys, as listed in
the config's ``attention_layers``. The attention module is nested (``attn.attention``).
"""

from __future__ import annotations

from typing import Any

from geomlens.models.families.base import AttentionSettings, Dims, Family
from geomlens.models.families.common import dense_mlp, separate_heads

LAYER_TYPES = ("global", "local")


def known_layer_types(value: Any) -> str | None:
    """Accept only global and local attention layers."""
    unknown = [t for t in value or () if t not in LAYER_TYPES]
    return None if not unknown else "handled: " + ", ".join(repr(t) for t in LAYER_TYPES)


def gpt_neo_settings(config: Any, dims: Dims, index: int, attention: Any) -> AttentionSettings:
    """Unscaled scores; local layers see keys with i - j < window_size."""
    local = attention.attention_type == "local"
    return AttentionSettings(scale=1.0, window=config.window_size if local else None)


GPT_NEO = Family(
    name="gpt_neo",
    model_types=("gpt_neo",),
    features=("unscaled scores", "local attention"),
    auto_class="causal-lm",
    handles=frozenset({"attention_layers", "attention_types", "window_size"}),
    options={"attention_layers": known_layer_types},
    heads=separate_heads(o="out_proj"),
    mlp_view=dense_mlp("c_fc", "c_proj"),
    base=("transformer",),
    embed="wte",
    pos_embed="wpe",
    layers="h",
    final_norm="ln_f",
    attention="attn.attention",
    sites=("v_proj", "out_proj"),
    norm_attn="ln_1",
    norm_mlp="ln_2",
    norm_kind="layernorm",
    position="learned",
    settings=gpt_neo_settings,
)
