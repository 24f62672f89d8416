"""Multiple-choice scoring and the walk's kernel tap at Llama-3-8B shapes on a GPU.

    python benchmarks/gpu_scale.py [--layers 32] [--items 64] [--context 1024] [--choices 4]
        [--choice-tokens 16] [--kernel-length 1024] [--repeats 2] [--out FILE.json]
    python benchmarks/gpu_scale.py --smoke     # tiny shapes on the CPU: checks the script

A randomly initialised Llama with the shapes of Llama-3-8B (d=4096, 32 blocks, 32 heads,
8 KV heads, MLP 14336, vocabulary 128256) is built from its config directly on the GPU in
bfloat16 (``gpu_capture.build``; nothing is downloaded or carried to the machine). Three
measurements, each printed as it finishes and all in one JSON at the end:

1. **Choices on a shared prefix.** ``--items`` multiple-choice items of random token ids
   (a context of ``--context`` tokens, ``--choices`` continuations of 1..``--choice-tokens``
   tokens), scored by ``geomlens.analyses.concepts.baseline.score_rows`` three ways, interleaved
   over ``--repeats``: (a) one sequence per choice (lm-evaluation-harness's computation),
   (b) every choice packed behind its context in one pass, (c) the context once with its
   KV cache, then the choices against it. Seconds, tokens/s, the floor (a bare forward of
   each context with its choices, once), the largest |log-likelihood difference| of (b) and
   (c) from (a), and how many items get the same prediction (argmax) as (a). bfloat16
   rounds differently along the three paths: the same check in float32 on the first items
   (``--check-items``) bounds the difference the paths themselves make.
2. **The walk's kernel tap, streamed.** One window of ``--kernel-length`` tokens through
   the capture's attention tap under eager attention, twice: read block by block as each
   block's attention returns (``AttentionTap.streams``, what the report does) and from
   every layer's attention returned at the end (``output_attentions``, what it did
   before). Peak GPU memory of each, and whether the two fill the same statistics.
3. The bf16 matmul rate of the GPU, for scale.

Not run yet: no GPU was lent when it was written. ``--smoke`` runs every part on tiny
shapes on the CPU (float32) to check the script.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from copy import deepcopy
from typing import Any

import gpu_capture
import torch
from gpu_capture import LLAMA_8B, SMOKE, build, matmul_tflops, sync

DTYPE = torch.bfloat16
"""The model's dtype (float32 with ``--smoke``)."""


def items(view: Any, args: argparse.Namespace, seed: int = 0) -> list[Any]:
    """Rows of random ids: a context and ``--choices`` continuations each."""
    from geomlens.analyses.concepts.baseline import Row

    g = torch.Generator().manual_seed(seed)
    vocab = int(view.W_E.shape[0])
    rows = []
    for _ in range(args.items):
        context = torch.randint(1, vocab, (args.context,), generator=g)
        conts = tuple(
            tuple(
                torch.randint(
                    1,
                    vocab,
                    (int(torch.randint(1, args.choice_tokens + 1, (1,), generator=g)),),
                    generator=g,
                ).tolist()
            )
            for _ in range(args.choices)
        )
        rows.append(Row(context, conts))
    return rows


def timed(fn: Any) -> tuple[float, Any]:
    sync()
    t0 = time.perf_counter()
    out = fn()
    sync()
    return time.perf_counter() - t0, out


def floor_seconds(view: Any, rows: list[Any], budget: int) -> float:
    """A bare forward of each context followed by all its choices, once, length-batched."""
    from geomlens.analyses.concepts.baseline import batches

    lengths = [r.n_prefix + sum(len(c) for c in r.continuations) for r in rows]
    seconds = 0.0
    for group in batches(lengths, budget):
        ids = torch.randint(1, 1000, (len(group), max(lengths[i] for i in group)))
        t, _ = timed(lambda ids=ids: view.base(input_ids=ids.to(view.device), use_cache=False))
        seconds += t
    return seconds


def scoring(view: Any, args: argparse.Namespace) -> dict[str, Any]:
    from geomlens.analyses.concepts.baseline import score_rows

    rows = items(view, args)
    tokens = sum(r.n_prefix + sum(len(c) for c in r.continuations) for r in rows)
    modes = ("plain", "packed", "cached")
    with torch.inference_mode():
        score_rows(view, rows[:2], mode="cached", batch_tokens=args.batch_tokens)  # warm-up
        seconds: dict[str, list[float]] = {m: [] for m in modes}
        scores: dict[str, Any] = {}
        for _ in range(args.repeats):
            for mode in modes:
                t, scores[mode] = timed(
                    lambda mode=mode: score_rows(
                        view, rows, mode=mode, batch_tokens=args.batch_tokens
                    )
                )
                seconds[mode].append(t)
        floor = statistics.median(
            floor_seconds(view, rows, args.batch_tokens) for _ in range(args.repeats)
        )
    out: dict[str, Any] = {"items": len(rows), "tokens": tokens, "floor_s": floor}
    for mode in modes:
        s = statistics.median(seconds[mode])
        out[mode] = {"seconds": s, "tokens_per_s": tokens / s, "over_floor": s / floor}
        if mode != "plain":
            out[mode].update(agreement(scores[mode], scores["plain"]))
        print(f"scoring {mode}: {json.dumps(out[mode])}", flush=True)
    out["check_float32"] = float32_check(view, rows[: args.check_items], args.batch_tokens)
    print(f"float32 check: {json.dumps(out['check_float32'])}", flush=True)
    return out


def agreement(ours: list[list[float]], plain: list[list[float]]) -> dict[str, float]:
    """Largest |difference| from (a), and the fraction of items with (a)'s prediction."""
    pairs = zip(ours, plain, strict=True)
    diff = max(abs(a - b) for r, s in pairs for a, b in zip(r, s, strict=True))
    same = sum(
        max(range(len(r)), key=r.__getitem__) == max(range(len(s)), key=s.__getitem__)
        for r, s in zip(ours, plain, strict=True)
    )
    return {"max_abs_diff_vs_plain": diff, "same_prediction": same / len(plain)}


def float32_check(view: Any, rows: list[Any], budget: int) -> dict[str, float]:
    """The three paths in float32 on a few items (a float32 copy of the same weights): the
    difference the paths themselves make."""
    from geomlens.analyses.concepts.baseline import score_rows
    from geomlens.models.families.llama import LLAMA

    copy = LLAMA.build(deepcopy(view.model).float(), None, "float32 copy", "random-init")
    try:
        with torch.inference_mode():
            plain = score_rows(copy, rows, mode="plain", batch_tokens=budget)
            return {
                mode: agreement(score_rows(copy, rows, mode=mode, batch_tokens=budget), plain)[
                    "max_abs_diff_vs_plain"
                ]
                for mode in ("packed", "cached")
            }
    finally:
        del copy
        if gpu_capture.DEVICE == "cuda":
            torch.cuda.empty_cache()


def kernel_tap(view: Any, args: argparse.Namespace) -> dict[str, Any]:
    from geomlens.analyses.walk.refactor import AttentionTap
    from geomlens.capturing.taps import Taps, fill_taps

    ids = torch.randint(1, int(view.W_E.shape[0]), (1, args.kernel_length))
    out: dict[str, Any] = {"length": args.kernel_length}
    states = {}
    for name in ("streamed", "returned"):
        tap = AttentionTap(view, 1)
        if name == "returned":
            tap.streams, tap._weights = False, None  # every layer's attention at the end
        if gpu_capture.DEVICE == "cuda":
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()
        t, _ = timed(lambda tap=tap: fill_taps(view, ids, Taps({"attention": tap})))
        peak = torch.cuda.max_memory_allocated() / 2**30 if gpu_capture.DEVICE == "cuda" else 0
        out[name] = {"seconds": t, "peak_gpu_gib": peak}
        states[name] = tap.state_dict()
        print(f"kernel tap {name}: {json.dumps(out[name])}", flush=True)
    out["same_statistics"] = all(
        torch.equal(states["streamed"][k], states["returned"][k]) for k in states["streamed"]
    )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--layers", type=int, default=32)
    parser.add_argument("--items", type=int, default=64)
    parser.add_argument("--context", type=int, default=1024)
    parser.add_argument("--choices", type=int, default=4)
    parser.add_argument("--choice-tokens", type=int, default=16)
    parser.add_argument("--batch-tokens", type=int, default=16384)
    parser.add_argument("--check-items", type=int, default=4)
    parser.add_argument("--kernel-length", type=int, default=1024)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--smoke", action="store_true", help="tiny shapes on the CPU")
    parser.add_argument("--out", help="also write the JSON here")
    args = parser.parse_args()
    global DTYPE
    shapes = LLAMA_8B
    if args.smoke:
        gpu_capture.DEVICE, shapes = "cpu", SMOKE
        args.layers, args.items, args.context, args.kernel_length = 2, 6, 40, 64
        args.repeats, args.check_items, args.batch_tokens = 1, 2, 256
        DTYPE = torch.float32
    elif not torch.cuda.is_available():
        sys.exit("gpu_scale.py needs a CUDA device; none is available here (try --smoke).")
    t0 = time.perf_counter()
    view = build(args.layers, shapes)
    if args.smoke:  # a float32 model of the same shapes
        from geomlens.models.families.llama import LLAMA

        view = LLAMA.build(view.model.float(), None, "smoke (float32)", "random-init")
    result: dict[str, Any] = {
        "device": torch.cuda.get_device_name() if gpu_capture.DEVICE == "cuda" else "cpu (smoke)",
        "model": f"Llama-3-8B shapes, {args.layers} blocks, random weights",
        "dtype": str(DTYPE),
        "build_seconds": time.perf_counter() - t0,
    }
    result["scoring"] = scoring(view, args)
    result["kernel_tap"] = kernel_tap(view, args)
    result["bf16_matmul_tflops"] = matmul_tflops(512 if args.smoke else 8192)
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
