"""Capture on a GPU in bfloat16 against the bare forward and the GPU's bf16 matmul rate.

    python benchmarks/gpu_capture.py [--layers 32] [--batch-size 4] [--length 2048]
        [--batches 8] [--repeats 3] [--second-moment]
    python benchmarks/gpu_capture.py --smoke     # tiny shapes on the CPU: checks the script

A randomly initialised Llama with the shapes of an 8B model (d=4096, 32 blocks, 32 heads,
8 KV heads, MLP 14336, vocabulary 128256) is built directly on the GPU in bfloat16 (no
weights need to be carried to the machine). Measured in one run, interleaved:

(a) the bare forward of the base model (no LM head, no hidden states kept);
(b) capture: the same forward with hooks streaming all 33 hidden-state layers into the
    decomposition accumulator, which lives on the GPU in float64; the only value read
    back per batch is one finiteness flag. The state is copied to the host once, at the
    end (timed separately);
(c) the bf16 matmul rate of the GPU (8192^3 products), against which the model FLOPs
    per second of (a) and (b) are set.
Target: (b) at least 0.9x the tokens/s of (a).

Before timing, two checks on one window of the same model: the hooks' hidden states equal
Hugging Face's own ``output_hidden_states`` (layers 0..L-1; HF's last entry has the final
norm applied), and the accumulator's state built on the GPU equals one built on the CPU
from the same hidden states (relative difference of every statistic).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

import torch

DEVICE = "cuda"
LLAMA_8B = {
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "vocab_size": 128256,
}
SMOKE = {
    "hidden_size": 256,
    "intermediate_size": 512,
    "num_attention_heads": 8,
    "num_key_value_heads": 2,
    "vocab_size": 1000,
}


def sync() -> None:
    if DEVICE == "cuda":
        torch.cuda.synchronize()


def build(layers: int, shapes: dict[str, int]):  # type: ignore[no-untyped-def]
    from transformers import LlamaConfig, LlamaForCausalLM

    from geomlens.models.families.llama import LLAMA

    config = LlamaConfig(
        **shapes,
        num_hidden_layers=layers,
        max_position_embeddings=8192,
        rope_theta=500000.0,
        attn_implementation="sdpa",
    )
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16)
    try:
        with torch.device(DEVICE):
            model = LlamaForCausalLM(config)
    finally:
        torch.set_default_dtype(previous)
    model.eval().requires_grad_(False)
    return LLAMA.build(model, None, "llama-8b-shapes (random)", "random-init")


def matmul_tflops(n: int = 8192, repeats: int = 20) -> float:
    a = torch.randn(n, n, device=DEVICE, dtype=torch.bfloat16)
    b = torch.randn(n, n, device=DEVICE, dtype=torch.bfloat16)
    for _ in range(3):
        a @ b
    sync()
    t0 = time.perf_counter()
    for _ in range(repeats):
        a @ b
    sync()
    return 2 * n**3 * repeats / (time.perf_counter() - t0) / 1e12


def bare(view, ids: torch.Tensor, batch_size: int) -> float:  # type: ignore[no-untyped-def]
    sync()
    t0 = time.perf_counter()
    with torch.inference_mode():
        for start in range(0, len(ids), batch_size):
            view.base(input_ids=ids[start : start + batch_size], use_cache=False)
    sync()
    return time.perf_counter() - t0


def capture(view, ids: torch.Tensor, batch_size: int, second: bool) -> tuple[float, float]:  # type: ignore[no-untyped-def]
    """Seconds of the capture loop, and of the one host copy of the state at the end."""
    from geomlens.capturing import hidden_states
    from geomlens.stats import CapturedBatch, DecompositionAccumulator

    layers = list(range(view.n_layers + 1))
    n_c, n_t = ids.shape
    acc = DecompositionAccumulator(layers, n_c, n_t, view.d_model, second, device=DEVICE)
    index = torch.arange(n_c, device=DEVICE)
    sync()
    t0 = time.perf_counter()
    for start in range(0, n_c, batch_size):
        rows = slice(start, start + batch_size)
        hidden = hidden_states(view, ids[rows], layers)
        acc.update(CapturedBatch(hidden=hidden, context_index=index[rows]))
    sync()
    t1 = time.perf_counter()
    acc.state_dict()  # the only device-to-host copy of the statistics
    return t1 - t0, time.perf_counter() - t1


def agreement(view, ids: torch.Tensor) -> dict[str, float]:  # type: ignore[no-untyped-def]
    """Largest differences of the GPU path against independent computations (one window)."""
    from geomlens.capturing import hidden_states
    from geomlens.stats import CapturedBatch, DecompositionAccumulator

    layers = list(range(view.n_layers + 1))
    ours = hidden_states(view, ids, layers)
    with torch.inference_mode():
        theirs = view.base(input_ids=ids, output_hidden_states=True, use_cache=False)
    hook_diff = max(
        (ours[layer].float() - theirs.hidden_states[layer].float()).abs().max().item()
        for layer in range(view.n_layers)
    )
    index = torch.arange(len(ids))
    states = []
    for device in (DEVICE, "cpu"):
        acc = DecompositionAccumulator(
            layers, len(ids), ids.shape[1], view.d_model, False, device=device
        )
        hidden = {layer: h.to(device) for layer, h in ours.items()}
        acc.update(CapturedBatch(hidden=hidden, context_index=index.to(device)))
        states.append(acc.state_dict())
    gpu, cpu = states
    state_diff = max(
        (
            (gpu[k].double() - cpu[k].double()).norm() / cpu[k].double().norm().clamp_min(1e-300)
        ).item()
        for k in ("pos_sum", "ctx_sum", "first", "sumsq")
    )
    return {"hooks_vs_hf_max_abs_diff": hook_diff, "gpu_vs_cpu_state_max_rel_diff": state_diff}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--layers", type=int, default=32)
    parser.add_argument("--batch-size", type=int, default=4)
    parser.add_argument("--length", type=int, default=2048)
    parser.add_argument("--batches", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--second-moment", action="store_true")
    parser.add_argument("--smoke", action="store_true", help="tiny shapes on the CPU")
    args = parser.parse_args()
    global DEVICE
    shapes = LLAMA_8B
    if args.smoke:
        DEVICE, shapes = "cpu", SMOKE
        args.layers, args.length, args.batches, args.repeats = 2, 64, 2, 1
    elif not torch.cuda.is_available():
        sys.exit("gpu_capture.py needs a CUDA device; none is available here.")

    t0 = time.perf_counter()
    view = build(args.layers, shapes)
    build_s = time.perf_counter() - t0
    n_params = sum(p.numel() for p in view.base.parameters())
    n_embed = view.W_E.numel()
    n_c = args.batch_size * args.batches
    ids = torch.randint(0, view.W_E.shape[0], (n_c, args.length), device=DEVICE)
    tokens = ids.numel()
    # forward FLOPs: 2 per weight per token, plus causal attention (QK^T and AV)
    flops = 2 * (n_params - n_embed) * tokens
    flops += 2 * view.n_layers * n_c * args.length**2 * view.d_model  # causal: half of 4
    checks = agreement(view, ids[:1])
    bare(view, ids[: args.batch_size], args.batch_size)  # warm-up
    capture(view, ids[: args.batch_size], args.batch_size, args.second_moment)
    rate = matmul_tflops(512 if args.smoke else 8192)
    a_s, b_s, copy_s = [], [], []
    for _ in range(args.repeats):
        a_s.append(bare(view, ids, args.batch_size))
        loop, copy = capture(view, ids, args.batch_size, args.second_moment)
        b_s.append(loop)
        copy_s.append(copy)
    a, b = tokens / statistics.median(a_s), tokens / statistics.median(b_s)
    result = {
        "device": torch.cuda.get_device_name() if DEVICE == "cuda" else "cpu (smoke)",
        "model": f"Llama shapes, {n_params / 1e9:.2f}B parameters in the base model, bf16",
        "build_seconds": build_s,
        "tokens_per_run": tokens,
        "batch": [args.batch_size, args.length],
        "second_moment": args.second_moment,
        "bare_tok_s": a,
        "capture_tok_s": b,
        "ratio": b / a,
        "state_copy_seconds": statistics.median(copy_s),
        "bf16_matmul_tflops": rate,
        "bare_model_tflops": flops / statistics.median(a_s) / 1e12,
        "capture_model_tflops": flops / statistics.median(b_s) / 1e12,
        "bare_fraction_of_matmul": flops / statistics.median(a_s) / 1e12 / rate,
        **checks,
        "peak_gpu_memory_gib": torch.cuda.max_memory_allocated() / 2**30 if DEVICE == "cuda" else 0,
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
