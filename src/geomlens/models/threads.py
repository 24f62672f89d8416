"""One model read from several threads: its hooked forward passes take turns, and a hook
sees only the forward passes of the thread that put it on.

A hook on a Hugging Face module fires on every forward pass of that module, whichever
thread runs it. Two threads reading one view would each record the other's hidden states
(or stop the other's pass early), and switching a model's attention implementation for
one pass changes it for every pass running at that moment. So the passes that hook or
switch hold the model's lock (``forward_lock``) from their first hook to their last, and
every hook geomlens puts on is wrapped by ``own_thread``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeVar
from weakref import WeakKeyDictionary

from torch import nn

Hook = TypeVar("Hook", bound=Callable[..., Any])

_LOCKS: WeakKeyDictionary[nn.Module, threading.RLock] = WeakKeyDictionary()
_MAKING = threading.Lock()


def forward_lock(module: nn.Module) -> threading.RLock:
    """The one re-entrant lock of ``module`` (the same for every view of that model)."""
    with _MAKING:
        lock = _LOCKS.get(module)
        if lock is None:
            lock = _LOCKS[module] = threading.RLock()
        return lock


def own_thread(hook: Hook) -> Hook:
    """``hook``, called only from the thread that wraps it (the one registering it); a
    forward pass in any other thread passes it by (returns None: nothing changed)."""
    owner = threading.get_ident()

    def hook_of_owner(*args: Any, **kwargs: Any) -> Any:
        if threading.get_ident() == owner:
            return hook(*args, **kwargs)
        return None

    return hook_of_owner  # type: ignore[return-value]
