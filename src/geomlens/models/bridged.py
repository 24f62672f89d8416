"""The transformers model inside TransformerLens's ``TransformerBridge``, as transformers
built it.

Booting a bridge (``TransformerBridge.boot_transformers``) keeps the Hugging Face model as
``original_model`` but replaces its modules in place by the bridge's components (the
decoder layers, attention, MLP, linear layers, embedding and head), each holding the module
it replaced as ``_original_component`` and adding its own hook points. Read as it is, that
model no longer returns what transformers' modules return (no attention weights, hidden
states through the bridge's hooks), so the on-load check cannot compare it.

``without_bridge`` rebuilds the module tree with every component replaced by the module it
holds: new module objects that share the very same parameters and buffers (no weight is
copied), so the view reads and runs transformers' own modules while the user's bridge stays
as it was.
"""

from __future__ import annotations

import copy
from collections import OrderedDict

from torch import nn

ORIGINAL = "_original_component"
"""Where a bridge component keeps the transformers module it replaced."""

HOOK_DICTS = (
    "_forward_hooks",
    "_forward_hooks_with_kwargs",
    "_forward_hooks_always_called",
    "_forward_pre_hooks",
    "_forward_pre_hooks_with_kwargs",
    "_backward_hooks",
    "_backward_pre_hooks",
)
"""A module's hook tables: fresh ones in each rebuilt module, so a hook the view adds never
lands on the user's model (and the bridge's own hooks do not run in the view)."""

HOOKED_MARK = "_output_capturing_hooks_installed"
"""transformers' mark that a model's output-recording hooks (hidden states, attention
weights) are installed; dropped in a rebuilt model, whose hook tables start empty, so
transformers installs them again on its first forward pass."""


def original_of(module: nn.Module) -> nn.Module:
    """The transformers module a bridge component stands for (itself when it is none)."""
    while isinstance(getattr(module, ORIGINAL, None), nn.Module):
        module = getattr(module, ORIGINAL)
    return module


def has_bridge_components(model: nn.Module) -> bool:
    """Whether any module of ``model`` is a bridge component."""
    return any(isinstance(getattr(m, ORIGINAL, None), nn.Module) for m in model.modules())


def without_bridge(model: nn.Module) -> nn.Module:
    """``model`` with every bridge component replaced by the transformers module it holds,
    its parameters and buffers shared (see the module docstring); ``model`` itself when it
    holds no bridge component."""
    if not has_bridge_components(model):
        return model
    made: dict[int, nn.Module] = {}  # a module met twice (an alias) is rebuilt once

    def rebuilt(module: nn.Module) -> nn.Module:
        module = original_of(module)
        if id(module) in made:
            return made[id(module)]
        fresh = copy.copy(module)  # a new object; its tensors are the same tensors
        made[id(module)] = fresh
        fresh._parameters = OrderedDict(module._parameters)
        fresh._buffers = OrderedDict(module._buffers)
        for table in HOOK_DICTS:
            if table in module.__dict__:
                setattr(fresh, table, OrderedDict())
        fresh.__dict__.pop(HOOKED_MARK, None)
        fresh._modules = OrderedDict(
            (name, None if child is None else rebuilt(child))
            for name, child in module._modules.items()
        )
        return fresh

    return rebuilt(model)
