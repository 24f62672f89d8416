"""OLMo 3 family: OLMo 2's blocks with sliding-window layers.

Like OLMo 2, the norms follow each sub-block (``post-sublayer``) and q/k RMSNorms span all
heads at once; layers listed as ``sliding_attention`` mask keys ``sliding_window`` or more
positions back and rotate with their layer type's rotary set.
"""

from __future__ import annotations

from typing import Any

from geomlens.models.families.base import AttentionSettings, Dims, with_options
from geomlens.models.families.common import qk_norms
from geomlens.models.families.gemma3 import known_layer_types, rope_layer_type
from geomlens.models.families.olmo2 import OLMO2

_norms = qk_norms(layout="joined")


def olmo3_settings(config: Any, dims: Dims, index: int, attention: Any) -> AttentionSettings:
    s = _norms(config, dims, index, attention)
    return AttentionSettings(qk_norm=s.qk_norm, window=attention.sliding_window)


OLMO3 = with_options(
    OLMO2,
    name="olmo3",
    model_types=("olmo3",),
    features=("GQA", "q/k norms over all heads", "sliding layers"),
    options={**OLMO2.options, "layer_types": known_layer_types},
    handles=OLMO2.handles | {"sliding_window"},
    settings=olmo3_settings,
    rope_layer=rope_layer_type,
)
