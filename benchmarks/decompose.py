"""Time of ``decompose`` against ``capture`` alone, on the same config, in one run.

    python benchmarks/decompose.py [--model minilm-l6] [--contexts 256] [--length 256]
        [--batch-size 16] [--repeats 3]

Both run end to end into fresh run folders with the model already loaded (loading is the
same for both and not counted). ``decompose`` adds second moments to the capture, every
per-layer analysis in both views of position 0, the attention split, W_QK fits, induction
heads (decoders) and the figures. Target: decompose / capture <= 1.5.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from geomlens.analyses.decomposition.command import run_decompose
from geomlens.capturing import CaptureConfig
from geomlens.commands.capture import run_capture
from geomlens.models import load_model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="minilm-l6")
    parser.add_argument("--contexts", type=int, default=256)
    parser.add_argument("--length", type=int, default=256)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    view = load_model(args.model)
    config = CaptureConfig(
        model=args.model, contexts=args.contexts, length=args.length, batch_size=args.batch_size
    )
    capture_s, decompose_s = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.repeats):  # interleaved, so drift in machine load hits both alike
            t0 = time.perf_counter()
            run_capture(config, Path(tmp) / f"c{i}", view=view, progress=False)
            capture_s.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            run_decompose(config, Path(tmp) / f"d{i}", view=view, progress=False)
            decompose_s.append(time.perf_counter() - t0)
    c, d = statistics.median(capture_s), statistics.median(decompose_s)
    tokens = args.contexts * args.length
    print(f"model={args.model} C={args.contexts} T={args.length} batch={args.batch_size}")
    print(f"capture alone   {c:8.1f} s  ({tokens / c:7.0f} tokens/s)")
    print(f"decompose       {d:8.1f} s")
    print(f"ratio           {d / c:8.2f}   (target <= 1.5)")


if __name__ == "__main__":
    main()
