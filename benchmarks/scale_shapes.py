"""``geomlens report`` on random models of real big shapes, on the CPU: per stage, its peak
memory and seconds.

    python benchmarks/scale_shapes.py [--shapes llama-3.2-1b,llama-3.1-8b-2l,gemma-2-2b-4l]
        [--contexts 8] [--length 64] [--limit 2] [--dtype bfloat16] [--folder /tmp/geomlens-scale]
        [--json FILE]

Each shape is a randomly initialised model (seed 0) built from its config, saved as
safetensors under ``--folder`` (never in the repository) with SmolLM2's tokenizer (49,152
tokens; the embedding's larger vocabulary covers it), then ``geomlens report`` runs on it in
a fresh process while a thread samples that process's resident set every 0.1 s
(``benchmarks/report_memory.py``'s tracer). The report's progress lines cut the samples
into stages: "(load, windows, capture)" before the first stage line, then each "[i/N]
stage". Per stage it prints the largest resident set while it ran, what that is above the
resident set when it began (what the stage itself holds), and its seconds; then one JSON
line with everything.

The shapes (``SHAPES``): Llama-3.2-1B (d 2048, 16 layers, GQA 32/8, MLP 8192, vocabulary
128,256, tied embeddings); Llama-3.1-8B's shapes cut to 2 layers (d 4096, GQA 32/8, MLP
14336, vocabulary 128,256, untied head); Gemma-2-2B's (d 2304, GQA 8/4 of head 256, MLP
9216, vocabulary 256,000, tied) cut to 4 of its 26 layers; and SmolLM2-135M's bundled
weights (d 576, 30 layers, vocabulary 49,152) as the small end (``smollm2``).
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from report_memory import TRACE_CHILD

LLAMA_3 = {"rope_theta": 500000.0, "max_position_embeddings": 8192, "head_dim": 64}
SHAPES: dict[str, tuple[str, dict[str, Any]]] = {
    "llama-3.2-1b": (
        "llama",
        {
            **LLAMA_3,
            "hidden_size": 2048,
            "intermediate_size": 8192,
            "num_hidden_layers": 16,
            "num_attention_heads": 32,
            "num_key_value_heads": 8,
            "vocab_size": 128256,
            "tie_word_embeddings": True,
        },
    ),
    "llama-3.1-8b-2l": (
        "llama",
        {
            **LLAMA_3,
            "hidden_size": 4096,
            "intermediate_size": 14336,
            "num_hidden_layers": 2,
            "num_attention_heads": 32,
            "num_key_value_heads": 8,
            "head_dim": 128,
            "vocab_size": 128256,
            "tie_word_embeddings": False,
        },
    ),
    "gemma-2-2b-4l": ("gemma2", {"num_hidden_layers": 4}),  # Gemma2Config's defaults: 2B's
}
"""Name -> (model type, config values that differ from that type's defaults)."""

STAGE = re.compile(r"^\[(\d+)/(\d+)\] (.+?)( \.\.\.|: done in .*|: already done)?$")


def smollm2_folder() -> Path:
    from geomlens.models.loading import resolve_folder

    return Path(resolve_folder("smollm2-135m"))


def build(name: str, folder: Path, dtype: str) -> tuple[Path, dict[str, Any]]:
    """Save the random model ``name`` in ``folder``/``name`` (once); its path and sizes."""
    import torch
    import transformers
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model_type, values = SHAPES[name]
    tokenizer = AutoTokenizer.from_pretrained(smollm2_folder())
    ids = {"bos_token_id": tokenizer.bos_token_id, "eos_token_id": tokenizer.eos_token_id}
    ids["pad_token_id"] = tokenizer.pad_token_id
    config = transformers.CONFIG_MAPPING[model_type](**values, **ids)
    out = folder / name
    sizes = {
        "d": config.hidden_size,
        "layers": config.num_hidden_layers,
        "vocab": config.vocab_size,
        "heads": config.num_attention_heads,
    }
    if (out / "config.json").exists():
        return out, sizes
    shutil.rmtree(out, ignore_errors=True)
    torch.manual_seed(0)
    previous = torch.get_default_dtype()
    torch.set_default_dtype(getattr(torch, dtype))
    try:
        model = AutoModelForCausalLM.from_config(config)
    finally:
        torch.set_default_dtype(previous)
    model.save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)
    sizes["parameters"] = sum(p.numel() for p in model.parameters())
    print(f"saved {out}: {sizes['parameters'] / 1e9:.2f}B parameters, {dtype}", flush=True)
    return out, sizes


def traced_report(argv: list[str], keep: Path) -> dict[str, Any]:
    """``geomlens report`` in a fresh process, its resident set sampled (the raw trace kept
    in ``keep``); per stage: peak MiB, MiB above its start, seconds."""
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", TRACE_CHILD, str(keep), "report", *argv])
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"geomlens report {' '.join(argv)} exited with {done.returncode}")
    return {"seconds": seconds, **stage_table(json.loads(keep.read_text()))}


def stage_table(trace: dict[str, Any]) -> dict[str, Any]:
    """A trace's samples cut by the report's stage lines: per stage its peak resident set,
    how far that is above the resident set when it began, and its seconds."""
    samples, lines = trace["samples"], trace["lines"]
    starts = [(samples[0][0], "(load, windows, capture)")]
    for t, line in lines:
        m = STAGE.match(line.strip())
        if m and m.group(4) in (None, " ..."):
            starts.append((t, f"[{m.group(1)}/{m.group(2)}] {m.group(3)}"))
    mib = 2**20
    stages = []
    for k, (t, title) in enumerate(starts):
        end = starts[k + 1][0] if k + 1 < len(starts) else float("inf")
        inside = [own for s, own, _ in samples if t <= s < end]
        before = [own for s, own, _ in samples if s < t] or [0]
        if inside:
            stages.append(
                {
                    "stage": title,
                    "peak_mib": max(inside) / mib,
                    "above_start_mib": (max(inside) - before[-1]) / mib,
                    "seconds": min(end, samples[-1][0]) - t,
                }
            )
    peak = max(own for _, own, _ in samples) / mib
    return {"peak_mib": peak, "stages": stages}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--shapes", default=",".join([*SHAPES, "smollm2"]))
    parser.add_argument("--contexts", type=int, default=8)
    parser.add_argument("--length", type=int, default=64)
    parser.add_argument("--batch-size", type=int, default=4)
    parser.add_argument("--limit", type=int, default=2, help="concept-test items")
    parser.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float32"])
    parser.add_argument("--folder", type=Path, default=Path(tempfile.gettempdir()) / "gl-scale")
    parser.add_argument("--json", type=Path, default=None, help="also write the results here")
    args = parser.parse_args()
    args.folder.mkdir(parents=True, exist_ok=True)
    results = []
    for name in args.shapes.split(","):
        if name == "smollm2":
            model, sizes = "smollm2-135m", {"d": 576, "layers": 30, "vocab": 49152, "heads": 9}
        else:
            path, sizes = build(name, args.folder, args.dtype)
            model = str(path)
        runs = args.folder / f"run-{name}"
        shutil.rmtree(runs, ignore_errors=True)
        argv = ["--model", model, "--contexts", str(args.contexts), "--length", str(args.length)]
        argv += ["--batch-size", str(args.batch_size), "--dtype", args.dtype]
        argv += ["--limit", str(args.limit), "--figures", "none", "--out", str(runs)]
        report = traced_report(argv, args.folder / f"trace-{name}.json")
        results.append({"shape": name, **sizes, **report})
        print(f"\n{name}: d {sizes['d']}, {sizes['layers']} layers, vocabulary {sizes['vocab']:,}")
        print(f"{'stage':<48} {'peak MiB':>9} {'+MiB':>8} {'seconds':>8}")
        for s in report["stages"]:
            print(
                f"{s['stage'][:48]:<48} {s['peak_mib']:9.0f} {s['above_start_mib']:8.0f} "
                f"{s['seconds']:8.0f}"
            )
        print(f"{'report':<48} {report['peak_mib']:9.0f} {'':>8} {report['seconds']:8.0f}")
        sys.stdout.flush()
    record = {"sizes": vars(args) | {"folder": str(args.folder), "json": None}, "runs": results}
    print(json.dumps(record, default=str))
    if args.json is not None:
        args.json.write_text(json.dumps(record, indent=1, default=str))


if __name__ == "__main__":
    main()
