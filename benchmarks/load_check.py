"""The on-load check's cost against the default capture, measured in one run.

    python benchmarks/load_check.py [--model smollm2-135m] [--contexts 128] [--length 128]
        [--batch-size 8] [--repeats 3] [--device cpu] [--dtype float32]

(a) geomlens capture of the default job (SmolLM2, C=128 x T=128 BBC windows, batch 8):
    the forward passes with hooks streaming every layer into the decomposition statistics;
(b) the on-load check that every load runs before it (``models.check.check_view``): one
    probe through Hugging Face's forward, every block, the attention probabilities and the
    logits rebuilt from the view.
Prints the seconds of each (median of the repeats, interleaved so that drift in machine
load hits both alike) and the ratio b/a (target < 0.02).
"""

from __future__ import annotations

import argparse
import math
import statistics
import tempfile

import torch
from capture import timed  # the capture benchmark's timer (one copy)


def capture(view, windows, config) -> None:
    from geomlens.capturing import capture_windows
    from geomlens.runs.runfolder import RunFolder

    with tempfile.TemporaryDirectory() as tmp:
        capture_windows(
            view, windows, config, RunFolder(tmp), checkpoint_every_s=math.inf, progress=False
        )
    if view.device.type == "cuda":
        torch.cuda.synchronize()


def main() -> None:
    from geomlens.capturing import CaptureConfig
    from geomlens.models.check import check_view
    from geomlens.pipeline.run import prepare

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--contexts", type=int, default=128)
    parser.add_argument("--length", type=int, default=128)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", default="float32")
    args = parser.parse_args()
    config = CaptureConfig(
        model=args.model,
        contexts=args.contexts,
        length=args.length,
        batch_size=args.batch_size,
        device=args.device,
        dtype=args.dtype,
    )
    view, _, windows = prepare(config)
    print(
        f"model={args.model} C={args.contexts} T={args.length} batch={args.batch_size} "
        f"device={args.device} dtype={args.dtype} threads={torch.get_num_threads()} "
        f"repeats={args.repeats}"
    )
    check_view(view)  # warm-up
    caps, checks = [], []
    for _ in range(args.repeats):
        caps.append(timed(lambda: capture(view, windows, config)))
        checks.append(timed(lambda: check_view(view)))
    a, b = statistics.median(caps), statistics.median(checks)
    result = check_view(view)
    print(f"(a) capture                {a:9.3f} s")
    print(
        f"(b) on-load check          {b:9.3f} s   ({result.tokens} tokens, {result.blocks} blocks)"
    )
    print(f"ratio b/a                  {b / a:9.4f}   (target < 0.02)")
    worst = ", ".join(f"{k} {v:.2g}" for k, v in result.max_error.items())
    print(f"largest differences        {worst} (tolerance {result.tolerance:g})")


if __name__ == "__main__":
    main()
