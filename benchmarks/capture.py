"""Capture speed and memory against the bare Hugging Face forward, measured in one run.

    python benchmarks/capture.py [--model smollm2-135m] [--contexts 32] [--length 256]
        [--batch-size 8] [--repeats 3] [--device cpu] [--dtype float32] [--memory-contexts 256]

(a) the bare forward of the base model (no LM head, no hidden states kept);
(b) geomlens capture: the same forward with hooks streaming every layer into the
    decomposition accumulator (position/context sums, sum of squares, second moments).
Prints tokens/s of each (median of the repeats) and the ratio b/a (target >= 0.90),
then the peak resident memory of a full capture at C=contexts and C=memory-contexts, each
in a fresh process (ratio target <= 1.15: memory must not grow with the corpus).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import subprocess
import sys
import tempfile
import time

import torch


def bare_forward(view, ids: torch.Tensor, batch_size: int) -> None:
    from geomlens.capturing.hooks import base_kwargs

    kwargs = base_kwargs(view)
    with torch.inference_mode():
        for start in range(0, len(ids), batch_size):
            view.base(input_ids=ids[start : start + batch_size].to(view.device), **kwargs)
    if view.device.type == "cuda":
        torch.cuda.synchronize()


def geomlens_capture(view, windows, config) -> None:
    from geomlens.capturing import capture_windows
    from geomlens.runs.runfolder import RunFolder

    with tempfile.TemporaryDirectory() as tmp:
        acc, _ = capture_windows(
            view, windows, config, RunFolder(tmp), checkpoint_every_s=math.inf, progress=False
        )
    if view.device.type == "cuda":
        torch.cuda.synchronize()


def timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def speed(args: argparse.Namespace) -> dict:
    from geomlens.capturing import CaptureConfig
    from geomlens.pipeline.run import prepare

    config = CaptureConfig(
        model=args.model,
        contexts=args.contexts,
        length=args.length,
        batch_size=args.batch_size,
        device=args.device,
        dtype=args.dtype,
    )
    view, _, windows = prepare(config)
    ids = torch.tensor(windows.input_ids)
    tokens = ids.numel()
    bare_forward(view, ids[: args.batch_size], args.batch_size)  # warm-up
    bare, ours = [], []
    for _ in range(args.repeats):  # interleaved, so drift in machine load hits both alike
        bare.append(timed(lambda: bare_forward(view, ids, args.batch_size)))
        ours.append(timed(lambda: geomlens_capture(view, windows, config)))
    a, b = tokens / statistics.median(bare), tokens / statistics.median(ours)
    return {"tokens": tokens, "bare_tok_s": a, "capture_tok_s": b, "ratio": b / a}


def peak_memory_mib(args: argparse.Namespace, contexts: int) -> float:
    """Peak RSS (CPU) or peak CUDA memory of one full capture in a fresh process."""
    code = (
        "import sys, json, resource, math, tempfile, torch\n"
        "from geomlens.capturing import CaptureConfig, capture_windows\n"
        "from geomlens.commands.capture import prepare\n"
        "from geomlens.runs.runfolder import RunFolder\n"
        f"c = CaptureConfig(model={args.model!r}, contexts={contexts}, length={args.length},"
        f" batch_size={args.batch_size}, device={args.device!r}, dtype={args.dtype!r})\n"
        "view, _, w = prepare(c)\n"
        "with tempfile.TemporaryDirectory() as t:\n"
        "    capture_windows(view, w, c, RunFolder(t), checkpoint_every_s=math.inf,"
        " progress=False)\n"
        "cuda = torch.cuda.max_memory_allocated() / 2**20 if torch.cuda.is_available() else 0\n"
        "rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024\n"
        "print(json.dumps({'rss': rss, 'cuda': cuda}))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True
    ).stdout
    result = json.loads(out.strip().splitlines()[-1])
    return result["cuda"] if args.device.startswith("cuda") else result["rss"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--contexts", type=int, default=32)
    parser.add_argument("--length", type=int, default=256)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--memory-contexts", type=int, default=256)
    parser.add_argument("--skip-memory", action="store_true")
    args = parser.parse_args()
    print(
        f"model={args.model} C={args.contexts} T={args.length} batch={args.batch_size} "
        f"device={args.device} dtype={args.dtype} threads={torch.get_num_threads()} "
        f"repeats={args.repeats}"
    )
    s = speed(args)
    print(f"(a) bare HF forward      {s['bare_tok_s']:9.0f} tokens/s")
    print(f"(b) geomlens capture     {s['capture_tok_s']:9.0f} tokens/s")
    print(f"ratio b/a                {s['ratio']:9.3f}   (target >= 0.90)")
    if not args.skip_memory:
        small = peak_memory_mib(args, args.contexts)
        large = peak_memory_mib(args, args.memory_contexts)
        print(f"peak memory C={args.contexts:<5d}     {small:9.0f} MiB")
        print(f"peak memory C={args.memory_contexts:<5d}     {large:9.0f} MiB")
        print(f"ratio                    {large / small:9.3f}   (target <= 1.15)")


if __name__ == "__main__":
    main()
