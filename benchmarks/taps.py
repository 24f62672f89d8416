"""What the taps cost: the capture alone, the capture filling the report's taps in the same
passes, and the capture followed by passes of their own (the way the sphere and walk
stages filled them before), in one run.

    python benchmarks/taps.py [--model smollm2-135m] [--contexts 128] [--length 128]
        [--batch-size 8] [--repeats 3]

Per repeat, interleaved (so drift in machine load hits all alike), the model loaded once:

(i)   ``capture_windows`` with no taps;
(ii)  ``capture_windows`` filling the report's taps (norms over 4 windows, attention over
      16) during its own passes;
(iii) (i), then ``fill_taps`` over the same windows: the taps in passes of their own.

Printed: medians and the ratios (ii)/(i) and (iii)/(i). The taps' own work (hooks, the
kernels' float64 scores, the refactoring check) is in both (ii) and (iii); what (ii)
saves is the forward passes of the tapped windows.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import tempfile
import time

import torch

from geomlens.analyses.sphere.compute import NormTap
from geomlens.analyses.sphere.step import IDENTITY_WINDOWS
from geomlens.analyses.walk.refactor import AttentionTap
from geomlens.analyses.walk.step import KERNEL_WINDOWS
from geomlens.capturing import CaptureConfig, capture_windows
from geomlens.capturing.taps import Taps, fill_taps
from geomlens.corpus import load_corpus, make_windows
from geomlens.models import load_model
from geomlens.pipeline.taps import tap_factory
from geomlens.runs.runfolder import RunFolder


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--contexts", type=int, default=128)
    parser.add_argument("--length", type=int, default=128)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    view = load_model(args.model)
    config = CaptureConfig(
        model=args.model, contexts=args.contexts, length=args.length, batch_size=args.batch_size
    )
    windows = make_windows(load_corpus("bbc"), view.tokenizer, args.contexts, args.length)
    ids = torch.tensor(windows.input_ids)
    factory = tap_factory(
        {"norms": (NormTap, IDENTITY_WINDOWS), "attention": (AttentionTap, KERNEL_WINDOWS)}
    )
    times: dict[str, list[float]] = {"plain": [], "tapped": [], "separate": []}

    def capture(folder: str, taps: Taps | None) -> None:
        capture_windows(
            view,
            windows,
            config,
            RunFolder(folder),
            checkpoint_every_s=math.inf,
            progress=False,
            taps=taps,
        )

    for i in range(args.repeats):
        with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
            t0 = time.perf_counter()
            capture(a, None)
            times["plain"].append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            capture(b, Taps.made(view, factory))
            times["tapped"].append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            fill_taps(view, ids, Taps.made(view, factory))
            times["separate"].append(times["plain"][-1] + time.perf_counter() - t0)
        print(
            f"repeat {i + 1}: " + ", ".join(f"{k} {v[-1]:.1f} s" for k, v in times.items()),
            file=sys.stderr,
            flush=True,
        )
    med = {k: statistics.median(v) for k, v in times.items()}
    print(
        f"model={args.model} C={args.contexts} T={args.length} batch={args.batch_size} "
        f"repeats={args.repeats} taps: norms {IDENTITY_WINDOWS} windows, attention "
        f"{KERNEL_WINDOWS} windows"
    )
    print(f"(i)   capture alone                 {med['plain']:7.1f} s")
    print(
        f"(ii)  capture filling the taps      {med['tapped']:7.1f} s  "
        f"{med['tapped'] / med['plain']:.2f} x (i)"
    )
    print(
        f"(iii) capture, then their own pass  {med['separate']:7.1f} s  "
        f"{med['separate'] / med['plain']:.2f} x (i)"
    )


if __name__ == "__main__":
    main()
