"""Capture with the model placed by accelerate (``--device-map``) against one device.

    python benchmarks/device_map.py [--model smollm2-135m] [--contexts 64] [--length 256]
        [--gpu-memory 150MiB] [--dtype bfloat16]
    python benchmarks/device_map.py --smoke     # the disk-offload path on the CPU, tiny

On a CUDA machine, three captures of the same windows, each in a fresh run folder:

(a) the whole model on ``cuda`` (``--device cuda``);
(b) ``--device-map auto --max-memory 0=<gpu-memory>,cpu=64GiB``: what does not fit in the
    GPU budget is offloaded to host memory (accelerate moves each offloaded block's
    weights in for its forward pass);
(c) the same with ``cpu=<a few MiB>`` and an offload folder: the rest goes to disk.

For each: tokens/s of the capture, peak GPU memory, where the modules went, and the largest
relative difference of any number in metrics.json from (a). Without CUDA the script says
so and exits 0 (``--smoke`` runs (c) against a CPU run on a tiny random Llama instead).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch


def numbers(value: Any) -> list[float]:
    """Every number of a JSON value, in order."""
    if isinstance(value, dict):
        return [x for k in sorted(value) for x in numbers(value[k])]
    if isinstance(value, list):
        return [x for v in value for x in numbers(v)]
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return [float(value)]
    return []


def largest_difference(a: Path, b: Path) -> float:
    """The largest relative difference between the numbers of two runs' metrics.json."""
    x = numbers(json.loads((a / "metrics.json").read_text()))
    y = numbers(json.loads((b / "metrics.json").read_text()))
    if len(x) != len(y):
        return math.inf
    return max(
        (abs(p - q) / max(abs(p), abs(q), 1e-12) for p, q in zip(x, y, strict=True)),
        default=0.0,
    )


def capture(out: Path, **options: Any) -> dict[str, Any]:
    """One capture; its tokens/s, wall time, peak GPU memory and module placement."""
    import geomlens

    if torch.cuda.is_available():
        torch.cuda.reset_peak_memory_stats()
    start = time.perf_counter()
    geomlens.capture(out=out, progress=False, **options)
    manifest = json.loads((out / "manifest.json").read_text())
    placed = manifest.get("device_map") or {}
    return {
        "tokens_per_s": round(manifest["timing"]["tokens_per_s"], 1),
        "wall_s": round(time.perf_counter() - start, 1),
        "peak_gpu_gib": round(torch.cuda.max_memory_allocated() / 2**30, 3)
        if torch.cuda.is_available()
        else None,
        "placement": {
            d: sum(v == d for v in placed.values()) for d in sorted(set(placed.values()))
        },
    }


def tiny_llama(folder: Path) -> str:
    """A random 4-block Llama with SmolLM2's tokenizer, saved to ``folder``."""
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    from geomlens.models.loading import resolve_folder

    tokenizer = AutoTokenizer.from_pretrained(resolve_folder("smollm2-135m"))
    config = LlamaConfig(
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=2,
        vocab_size=len(tokenizer),
        max_position_embeddings=256,
    )
    torch.manual_seed(0)
    LlamaForCausalLM(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return str(folder)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="smollm2-135m")
    p.add_argument("--contexts", type=int, default=64)
    p.add_argument("--length", type=int, default=256)
    p.add_argument("--dtype", default="bfloat16")
    p.add_argument("--gpu-memory", default="150MiB", help="the GPU budget of run (b)")
    p.add_argument("--smoke", action="store_true", help="the disk path on the CPU, tiny")
    args = p.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="device-map-"))
    if args.smoke:
        model = tiny_llama(root / "tiny")
        common = dict(model=model, contexts=8, length=32, dtype="float32")
        runs = {"one device (cpu)": capture(root / "a", **common)}
        disk = dict(device_map="auto", max_memory={"cpu": "1MB"}, offload_folder=str(root / "off"))
        runs["cpu + disk"] = capture(root / "c", **common, **disk)
        runs["cpu + disk"]["max_rel_diff"] = largest_difference(root / "a", root / "c")
    elif not torch.cuda.is_available():
        print("device_map benchmark: no CUDA device here; skipped (--smoke checks the script).")
        return 0
    else:
        common = dict(
            model=args.model, contexts=args.contexts, length=args.length, dtype=args.dtype
        )
        runs = {"one device (cuda)": capture(root / "a", device="cuda", **common)}
        offload = {"0": args.gpu_memory, "cpu": "64GiB"}
        runs["gpu + cpu offload"] = capture(
            root / "b", device_map="auto", max_memory=offload, **common
        )
        disk = {"0": args.gpu_memory, "cpu": "16MiB"}
        runs["gpu + cpu + disk"] = capture(
            root / "c",
            device_map="auto",
            max_memory=disk,
            offload_folder=str(root / "off"),
            **common,
        )
        for name, folder in (("gpu + cpu offload", "b"), ("gpu + cpu + disk", "c")):
            runs[name]["max_rel_diff"] = largest_difference(root / "a", root / folder)
    print(
        json.dumps(
            {
                "device": torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu",
                "runs": runs,
            },
            indent=1,
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
