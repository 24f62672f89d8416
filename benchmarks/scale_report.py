"""``geomlens report`` at scale: a random-weight Llama with a 128k vocabulary, end to end.

    python benchmarks/scale_report.py prepare DIR          # here: tokenizer and long articles
    python benchmarks/scale_report.py run DIR [--device cuda|cpu] [--contexts C] [--length T]
        [--batch-size B] [--limit N] [--no-gpu-capture]

``prepare`` writes DIR/tokenizer (SmolLM2's tokenizer) and DIR/bbc (the BBC articles of at
least 2,048 SmolLM2 tokens, as .txt by topic), so that a GPU machine without the bundled
packages can run ``run DIR`` (it reads them when they are there, the bundled ones if not).

``run`` saves a randomly initialised Llama as DIR/model-DEVICE (SmolLM2's 49,152-token
tokenizer; the embedding has 128,256 rows, which covers it) and runs, each in a fresh
process, ``geomlens capture`` and then ``geomlens report`` with the same windows and
options. It prints the model, the sizes, each command's seconds and peak memory (resident
set on the CPU, ``torch.cuda.max_memory_allocated`` on a GPU), the report's capture
seconds, each report stage's seconds (its "[i/N] ...: done in N s" lines) and the ratio
report/capture, then one JSON line with everything.

- ``--device cuda`` (defaults: 8 x 2048 BBC tokens, batch 4, ``--limit 5``, bfloat16):
  Llama-3-8B shapes (d=4096, 32 blocks, 32 heads, 8 KV heads, MLP 14336, vocabulary
  128256), built on the GPU and saved in bfloat16 (16 GB on the GPU machine's disk).
  First it reruns ``benchmarks/gpu_capture.py`` (capture against the bare bf16 forward,
  target >= 0.9; skip it with ``--no-gpu-capture``). Only 9 BBC articles reach 2,048 tokens,
  so ``--contexts`` is at most 9 there.
- ``--device cpu`` (defaults: 8 x 1024 tokens, batch 2, ``--limit 5``, float32): d=1024,
  24 blocks, 16 heads, 8 KV heads, MLP 4096, vocabulary 128256, untied LM head as in
  Llama 3 (0.64B parameters, 2.6 GB folder).

Logs of both commands go to DIR/logs, run folders to DIR/runs-DEVICE (removed first).
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
VOCAB = 128256
SHAPES = {
    "cuda": {
        "hidden_size": 4096,
        "intermediate_size": 14336,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
    },
    "cpu": {
        "hidden_size": 1024,
        "intermediate_size": 4096,
        "num_hidden_layers": 24,
        "num_attention_heads": 16,
        "num_key_value_heads": 8,
    },
}
DEFAULTS = {  # contexts, length, batch size, dtype
    "cuda": (8, 2048, 4, "bfloat16"),
    "cpu": (8, 1024, 2, "float32"),
}
LONGEST = 2048
"""prepare copies the articles of at least this many tokens."""

CHILD = """
import json, resource, sys
from geomlens.cli import main
code = main(sys.argv[2:])
rss = max(resource.getrusage(w).ru_maxrss for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
peak = {"rss_mib": rss / 1024}
try:
    import torch
    if torch.cuda.is_available():
        peak["cuda_gib"] = torch.cuda.max_memory_allocated() / 2**30
except ImportError:
    pass
open(sys.argv[1], "w").write(json.dumps(peak))
sys.exit(code)
"""
"""Runs one geomlens command and writes its peak memory (itself or a process it started,
whichever is larger) to the file named first."""


def smollm2_tokenizer():  # type: ignore[no-untyped-def]
    from transformers import AutoTokenizer

    from geomlens.models.loading import resolve_folder

    return AutoTokenizer.from_pretrained(resolve_folder("smollm2-135m"))


def prepare(folder: Path) -> None:
    from geomlens.corpus import load_corpus

    tokenizer = smollm2_tokenizer()
    tokenizer.save_pretrained(folder / "tokenizer")
    corpus = load_corpus("bbc")
    texts = [doc.text for doc in corpus.documents]
    lengths = [len(ids) for ids in tokenizer(texts, add_special_tokens=False)["input_ids"]]
    shutil.rmtree(folder / "bbc", ignore_errors=True)
    kept = 0
    for doc, n in zip(corpus.documents, lengths, strict=True):
        if n >= LONGEST:
            path = folder / "bbc" / doc.doc_id
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(doc.text, encoding="utf-8")
            kept += 1
    print(
        f"wrote {folder / 'tokenizer'} and {kept} articles of >= {LONGEST} tokens in {folder}/bbc"
    )


def build_model(folder: Path, device: str, dtype: str) -> Path:
    """Save a random Llama of the device's shapes (with SmolLM2's tokenizer) in ``folder``."""
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    saved = folder / "tokenizer"
    tokenizer = AutoTokenizer.from_pretrained(saved) if saved.exists() else smollm2_tokenizer()
    config = LlamaConfig(
        **SHAPES[device],
        vocab_size=VOCAB,
        max_position_embeddings=8192,
        rope_theta=500000.0,
        tie_word_embeddings=False,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    out = folder / f"model-{device}"
    shutil.rmtree(out, ignore_errors=True)
    torch.manual_seed(0)
    previous = torch.get_default_dtype()
    torch.set_default_dtype(getattr(torch, dtype))
    try:
        with torch.device(device):
            model = LlamaForCausalLM(config)
    finally:
        torch.set_default_dtype(previous)
    model.save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)
    n_params = sum(p.numel() for p in model.parameters())
    print(f"saved {out}: {n_params / 1e9:.2f}B parameters, {dtype}", flush=True)
    del model
    if device == "cuda":
        torch.cuda.empty_cache()  # the commands run in other processes
    return out


def geomlens(command: str, argv: list[str], logs: Path) -> dict[str, Any]:
    """One geomlens command in a fresh process: seconds, peak memory, its stderr lines."""
    logs.mkdir(parents=True, exist_ok=True)
    peak_file, err_file = logs / f"{command}.peak.json", logs / f"{command}.stderr"
    started = time.perf_counter()
    with open(err_file, "w") as err:
        code = subprocess.run(
            [sys.executable, "-c", CHILD, str(peak_file), command, *argv], stderr=err
        ).returncode
    seconds = time.perf_counter() - started
    lines = err_file.read_text(errors="replace").replace("\r", "\n").splitlines()
    if code:
        tail = "\n".join(line for line in lines[-20:] if line.strip())
        sys.exit(f"geomlens {command} {' '.join(argv)} exited with {code}:\n{tail}")
    return {"seconds": seconds, **json.loads(peak_file.read_text()), "stderr": lines}


def stage_seconds(lines: list[str]) -> dict[str, float]:
    """The report's "[i/N] title: done in N s" lines as {title: seconds}."""
    found = (re.match(r"\[\d+/\d+\] (.+): done in (\d+) s$", line.strip()) for line in lines)
    return {m.group(1): float(m.group(2)) for m in found if m}


def capture_seconds(run: Path) -> float:
    timing = json.loads((run / "manifest.json").read_text())["timing"]
    return float(timing.get("seconds", timing.get("wall_seconds", 0.0)))


def gpu_capture() -> dict[str, Any]:
    """benchmarks/gpu_capture.py's measurement, in a fresh process (its JSON result)."""
    out = subprocess.run(
        [sys.executable, str(HERE / "gpu_capture.py")], check=True, capture_output=True, text=True
    ).stdout
    return json.loads(out[out.index("{") :])


def memory(result: dict[str, Any], device: str) -> str:
    if device == "cuda":
        return f"{result.get('cuda_gib', 0):.1f} GiB GPU (RSS {result['rss_mib']:,.0f} MiB)"
    return f"{result['rss_mib']:,.0f} MiB RSS"


def run(folder: Path, args: argparse.Namespace) -> None:
    device = args.device
    contexts, length, batch, dtype = DEFAULTS[device]
    contexts, length = args.contexts or contexts, args.length or length
    batch = args.batch_size or batch
    result: dict[str, Any] = {"device": device, "shapes": SHAPES[device], "vocab": VOCAB}
    if device == "cuda" and not args.no_gpu_capture:
        result["gpu_capture"] = gpu_capture()
        print(f"gpu_capture.py: capture/bare {result['gpu_capture']['ratio']:.3f} (target >= 0.9)")
    model = build_model(folder, device, dtype)
    corpus = folder / "bbc" if (folder / "bbc").exists() else "bbc"
    common = ["--model", str(model), "--corpus", str(corpus), "--contexts", str(contexts)]
    common += ["--length", str(length), "--batch-size", str(batch), "--device", device]
    common += ["--dtype", dtype]
    runs, logs = folder / f"runs-{device}", folder / "logs"
    shutil.rmtree(runs, ignore_errors=True)
    cap = geomlens("capture", [*common, "--quiet", "--out", str(runs / "capture")], logs)
    rep = geomlens(
        "report", [*common, "--limit", str(args.limit), "--out", str(runs / "report")], logs
    )
    stages = stage_seconds(rep["stderr"])
    result.update(
        sizes={"contexts": contexts, "length": length, "batch_size": batch, "limit": args.limit},
        dtype=dtype,
        capture={k: v for k, v in cap.items() if k != "stderr"},
        report={k: v for k, v in rep.items() if k != "stderr"},
        report_capture_seconds=capture_seconds(runs / "report"),
        stages=stages,
        ratio=rep["seconds"] / cap["seconds"],
    )
    print(f"sizes: {contexts} x {length} tokens, batch {batch}, --limit {args.limit}, {dtype}")
    print(f"geomlens capture  {cap['seconds']:8.0f} s   peak {memory(cap, device)}")
    print(f"geomlens report   {rep['seconds']:8.0f} s   peak {memory(rep, device)}")
    print(f"  its capture     {result['report_capture_seconds']:8.0f} s")
    for title, seconds in stages.items():
        print(f"  {title:<40s} {seconds:6.0f} s")
    print(f"report/capture    {result['ratio']:8.2f}")
    print(json.dumps(result))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("step", choices=["prepare", "run"])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    parser.add_argument("--contexts", type=int, default=None)
    parser.add_argument("--length", type=int, default=None)
    parser.add_argument("--batch-size", type=int, default=None)
    parser.add_argument("--limit", type=int, default=5, help="concept-test items (5)")
    parser.add_argument("--no-gpu-capture", action="store_true")
    args = parser.parse_args()
    args.folder.mkdir(parents=True, exist_ok=True)
    if args.step == "prepare":
        prepare(args.folder)
    else:
        run(args.folder, args)


if __name__ == "__main__":
    main()
