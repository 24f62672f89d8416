"""PEFT adapter layers inside a transformers model: which of them compute something that
the model's weights do not hold.

``get_peft_model`` replaces a targeted layer (a ``Linear``, an ``Embedding``) by a tuner
layer that keeps the original as ``base_layer`` and adds its adapters (``lora_A`` and
``lora_B`` for LoRA) beside it. Such a layer's ``weight`` is its base layer's. The forward
pass equals that weight's own in three states only: the adapters merged into it
(``merge_adapter()``: ``merged`` and not disabled), the adapters disabled and not merged
(``disable_adapter()``), or no active adapter in this layer. In any other state the
forward pass adds ``B A x`` that no weight a view reads holds, so every number read from the
weights (W_QK, the vocabulary readouts) would belong to another model than the hidden states.
"""

from __future__ import annotations

from typing import Any

ADAPTER_MARKS = ("lora_A", "lora_B", "lora_embedding_A", "lora_embedding_B", "base_layer")
"""Names of the submodules PEFT injects into a model's layers."""


def computes_beside_weight(layer: Any) -> bool:
    """Whether the tuner ``layer``'s forward pass adds what its ``weight`` does not hold
    (see the module docstring); a layer without PEFT's state attributes that carries an
    adapter submodule counts as one that does."""
    if not (hasattr(layer, "merged") and hasattr(layer, "disable_adapters")):
        return True
    if layer.disable_adapters:
        return bool(layer.merged)  # PEFT unmerges a merged layer on its next forward
    active = list(getattr(layer, "active_adapters", []) or [])
    if layer.merged:
        return not set(active) <= set(getattr(layer, "merged_adapters", active))
    holders = [getattr(layer, n, {}) for n in getattr(layer, "adapter_layer_names", ())]
    return any(a in holder for a in active for holder in holders)


def live_adapter_layers(model: Any) -> list[str]:
    """The names of the layers of ``model`` whose PEFT adapters add to the forward pass
    beside the weights (unmerged and active), in module order."""
    live = []
    for name, module in model.named_modules():
        children = {child for child, _ in module.named_children()}
        if children & set(ADAPTER_MARKS) and computes_beside_weight(module):
            live.append(name)
    return live


def prompt_learning(peft_model: Any) -> bool:
    """Whether a ``PeftModel``'s active adapter is prompt learning (prompt, prefix or
    p-tuning): virtual tokens or key/value prefixes that its base model never holds."""
    config = getattr(peft_model, "active_peft_config", None)
    return bool(getattr(config, "is_prompt_learning", False))
