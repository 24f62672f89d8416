"""What one hidden-state tap (``capturing.taps.HiddenTap``) adds to the capture, measured
in one run: ``capture_windows`` alone and ``capture_windows`` feeding the tap, interleaved
per repeat (so drift in machine load hits both alike), the model loaded once. Printed:
the medians and their ratio. ``massive_cost.py`` and ``anisotropy_cost.py`` run it."""

from __future__ import annotations

import argparse
import math
import statistics
import tempfile
import time
from collections.abc import Callable
from typing import Any

import torch

from geomlens.capturing import CaptureConfig, capture_windows
from geomlens.capturing.taps import Taps
from geomlens.corpus import load_corpus, make_windows
from geomlens.models import load_model
from geomlens.pipeline.taps import tap_factory
from geomlens.runs.runfolder import RunFolder


def arguments(doc: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--contexts", type=int, default=32)
    parser.add_argument("--length", type=int, default=128)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (both sides)")
    parser.add_argument("--figure", default="", help="also draw the analysis's figure here")
    return parser.parse_args()


def compare(name: str, build: Any, args: argparse.Namespace) -> tuple[Any, Any, Any]:
    """Time the capture without and with the tap ``name``; returns the filled tap, the
    model and the windows of the last repeat."""
    torch.set_num_threads(args.threads)
    view = load_model(args.model)
    config = CaptureConfig(
        model=args.model, contexts=args.contexts, length=args.length, batch_size=args.batch_size
    )
    windows = make_windows(load_corpus("bbc"), view.tokenizer, args.contexts, args.length)
    factory = tap_factory({name: (build, 0)})
    times: dict[str, list[float]] = {"plain": [], "tapped": []}
    taps = None

    def capture(taps: Taps | None) -> float:
        with tempfile.TemporaryDirectory() as folder:
            t0 = time.perf_counter()
            capture_windows(
                view,
                windows,
                config,
                RunFolder(folder),
                checkpoint_every_s=math.inf,
                progress=False,
                taps=taps,
            )
            return time.perf_counter() - t0

    for _ in range(args.repeats):
        times["plain"].append(capture(None))
        taps = Taps.made(view, factory)
        times["tapped"].append(capture(taps))
    plain, tapped = statistics.median(times["plain"]), statistics.median(times["tapped"])
    print(
        f"{args.model}, {args.contexts} x {args.length} tokens, batch {args.batch_size}, "
        f"{args.threads} torch thread(s), {args.repeats} repeats"
    )
    print(f"capture alone:        {plain:.2f} s (median)")
    print(f"capture + {name} tap: {tapped:.2f} s (median)")
    print(f"ratio: {tapped / plain:.3f}")
    assert taps is not None
    return taps[name], view, windows


def draw(figure: Callable[..., Any], rows: list[dict[str, Any]], model: str, path: str) -> None:
    if path:
        figure(rows, model).savefig(path, dpi=110)
        print(f"figure written to {path}")
