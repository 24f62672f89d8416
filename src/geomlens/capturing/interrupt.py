"""Turn Ctrl-C and SIGTERM into a request to stop at the next batch boundary."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any


@dataclass
class StopRequest:
    requested: bool = False
    signal_name: str = ""


@contextmanager
def stop_at_batch_boundary() -> Iterator[StopRequest]:
    """While active, the first SIGINT/SIGTERM sets ``requested``; a second one aborts at once.

    Accumulator updates are never cut in half, so the saved state is always consistent.
    """
    stop = StopRequest()
    previous: dict[signal.Signals, Any] = {}

    def handler(signum: int, frame: Any) -> None:
        if stop.requested:
            raise KeyboardInterrupt
        stop.requested, stop.signal_name = True, signal.Signals(signum).name

    try:
        for sig in (signal.SIGINT, signal.SIGTERM):
            previous[sig] = signal.signal(sig, handler)
    except ValueError:  # not in the main thread: leave signals alone
        previous.clear()
    try:
        yield stop
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
