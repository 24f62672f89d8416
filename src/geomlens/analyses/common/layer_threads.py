"""The per-layer analyses of a finished capture, one thread per core.

Each layer's numbers (SVDs of a few hundred columns, k-means, half-sample draws) are
independent of the others' and seeded by themselves, and LAPACK lets go of the GIL while
it works: the layers run in as many threads as torch may use, each with a
single-threaded BLAS, and come back in the layers' order, so the numbers do not depend on
the number of threads.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

import torch
from threadpoolctl import threadpool_limits

Item = TypeVar("Item")
Result = TypeVar("Result")


def map_layers(fn: Callable[[Item], Result], items: Iterable[Item]) -> list[Result]:
    """``[fn(item) for item in items]``, in ``torch.get_num_threads()`` threads."""
    todo = list(items)
    workers = max(1, min(torch.get_num_threads(), len(todo)))
    if workers == 1:
        return [fn(item) for item in todo]
    with threadpool_limits(limits=1), ThreadPoolExecutor(workers) as pool:
        return list(pool.map(fn, todo))
