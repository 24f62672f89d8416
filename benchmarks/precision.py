"""A model's forward pass in float32, bfloat16 and float16, interleaved (CPU by default).

    python benchmarks/precision.py [--model smollm2-135m] [--batch 1] [--length 128]
        [--repeats 3] [--device cpu]

Loads the model once per dtype through ``load_model`` (the on-load check included, not
timed), runs one warm-up pass of each, then ``repeats`` rounds of one timed pass per dtype
in turn on the same random token ids, so that a machine whose load changes slows every
dtype alike. Prints the median seconds per pass, tokens/s and the ratio to float32.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import torch

DTYPES = ("float32", "bfloat16", "float16")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="smollm2-135m")
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--length", type=int, default=128)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--device", default="cpu")
    args = p.parse_args(argv)
    from geomlens.models.loading import load_model

    torch.manual_seed(0)
    ids = torch.randint(100, 40_000, (args.batch, args.length))
    views = {d: load_model(args.model, dtype=d, device=args.device) for d in DTYPES}
    times: dict[str, list[float]] = {d: [] for d in DTYPES}
    with torch.inference_mode():
        for view in views.values():
            view.base(input_ids=ids.to(view.device))  # warm-up
        for _ in range(args.repeats):
            for dtype, view in views.items():
                start = time.perf_counter()
                view.base(input_ids=ids.to(view.device))
                times[dtype].append(time.perf_counter() - start)
    tokens = args.batch * args.length
    base = statistics.median(times["float32"])
    for dtype in DTYPES:
        seconds = statistics.median(times[dtype])
        print(
            f"{dtype}: {seconds:.3f} s per pass of {args.batch} x {args.length} tokens "
            f"({tokens / seconds:.0f} tokens/s, {seconds / base:.2f}x float32's time)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
