"""The position/context job in TransformerLens against geomlens capture and decompose.

    pip install -e ".[bench]"     # TransformerLens, a benchmark dependency only
    python benchmarks/transformer_lens.py [--contexts 64[,256,1024]] [--length 256]
        [--batch-size 8] [--repeats 2] [--commands capture,decompose]

The job: SmolLM2-135M on the BBC windows geomlens cuts (C windows x T tokens, the same token
ids for every pipeline), every layer's residual stream (the input of block 0 and the
output of every block), and per layer the decomposition h[c,t] = mu + pos[t] + ctx[c] +
resid[c,t] with its variance shares (docs/decomposition.md), with all positions and with
position 0 skipped. Three pipelines, each in a fresh process, interleaved per repeat:

(a) TransformerLens: ``TransformerBridge.boot_transformers`` on the bundled model's local
    folder (nothing is downloaded), then batch by batch ``run_with_cache`` with a names
    filter for ``hook_resid_pre``/``hook_resid_post``, ``cache.accumulated_resid()`` kept
    per batch; at the end the batches are concatenated and mu, pos, ctx and the shares
    come from torch reductions in float64 (the residual share from the residual itself);
(b) ``geomlens capture``; (c) ``geomlens decompose`` (capture with second moments, then
    every analysis of docs/decomposition.md and its figures).

First it checks that TransformerLens's logits equal Hugging Face's on one window (to 1e-4
relative to the largest logit). It prints, per pipeline, the median seconds of the whole
process (start, model load, windows, forward passes, statistics), its CPU seconds (less
noisy than wall time on a shared machine), tokens/s and peak resident memory (each process
reads its own ``ru_maxrss``), the ratios TL/capture and TL/decompose, and the largest
difference between TL's shares and geomlens's.

With several ``--contexts`` the three run at each C in turn, and a last table sets the
peak memory of each against C: TransformerLens holds every layer's residual stream of the
whole corpus, (L + 1) x C x T x d float32, so its peak grows with C; geomlens streams each
batch into float64 sums, so its peak must not. Before (a) runs at a C, that stream's size
is compared with the memory the machine has available: where it does not fit (with room
for the model), (a) is not run at that C, and the table says so with the size it would
need (a shared machine is not taken out of memory to show it).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
MODEL = "smollm2-135m"
RESID = ("hook_resid_pre", "hook_resid_post")

GEOMLENS_CHILD = """
import json, resource, sys
from geomlens.cli import main
code = main(sys.argv[2:])
use = [resource.getrusage(w) for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)]
rss, cpu = max(u.ru_maxrss for u in use), sum(u.ru_utime + u.ru_stime for u in use)
open(sys.argv[1], "w").write(json.dumps({"rss_mib": rss / 1024, "cpu_s": cpu}))
sys.exit(code)
"""
"""Runs one geomlens command and writes its peak resident memory (itself or a process it
started, whichever is larger) and its CPU seconds to the file named first."""


def unshadow() -> None:
    """This file is named transformer_lens.py: keep its folder off the import path."""
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]


def model_folder() -> str:
    from geomlens.models.loading import resolve_folder

    return str(resolve_folder(MODEL))


def boot(folder: str):  # type: ignore[no-untyped-def]
    """TransformerLens's bridge around the local HF folder (offline)."""
    import torch

    try:
        from transformer_lens.model_bridge import TransformerBridge
    except ImportError:
        sys.exit("this benchmark needs TransformerLens >= 4: pip install -e '.[bench]'")
    return TransformerBridge.boot_transformers(folder, device="cpu", dtype=torch.float32)


def window_ids(args: argparse.Namespace, folder: str):  # type: ignore[no-untyped-def]
    """The windows ``geomlens capture`` cuts (same corpus, tokenizer, sizes and seed)."""
    import torch
    from transformers import AutoTokenizer

    from geomlens.corpus import load_corpus, make_windows

    tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
    windows = make_windows(load_corpus("bbc"), tokenizer, args.contexts, args.length, seed=0)
    return torch.tensor(windows.input_ids), windows.fingerprint


def check_logits(args: argparse.Namespace) -> dict[str, float]:
    """Largest |TL - HF| logit difference on one window, relative to the largest logit,
    against HF with eager attention (what the bridge runs) and with SDPA (what geomlens runs)."""
    import torch
    from transformers import AutoModelForCausalLM

    folder = model_folder()
    ids, _ = window_ids(args, folder)
    with torch.inference_mode():
        theirs = boot(folder)(ids[:1], return_type="logits")
        result = {}
        for attention in ("eager", "sdpa"):
            hf = AutoModelForCausalLM.from_pretrained(
                folder, dtype=torch.float32, attn_implementation=attention
            )
            ref = hf(ids[:1]).logits
            result[attention] = float((theirs - ref).abs().max() / ref.abs().max())
    if result["eager"] > 1e-4:
        sys.exit(f"TransformerLens's logits differ from Hugging Face's: {result}")
    return result


def shares(h, skip_first: bool) -> list[float]:  # type: ignore[no-untyped-def]
    """share_pos, share_ctx, share_resid of one layer's [C, T, d] states (float64)."""
    x = h[:, 1:].double() if skip_first else h.double()
    mu = x.mean(dim=(0, 1))
    pos = x.mean(dim=0) - mu
    ctx = x.mean(dim=1) - mu
    total = (x - mu).square().sum()
    resid = (x - mu - pos[None] - ctx[:, None]).square().sum()
    c, t = x.shape[:2]
    parts = (c * pos.square().sum(), t * ctx.square().sum(), resid)
    return [float(p / total) for p in parts]


def tl_pipeline(args: argparse.Namespace) -> dict[str, Any]:
    """(a): cache every residual stream batch by batch, then reduce."""
    import torch

    torch.set_grad_enabled(False)
    folder = model_folder()
    bridge = boot(folder)
    ids, fingerprint = window_ids(args, folder)
    streams = []
    for batch in ids.split(args.batch_size):
        _, cache = bridge.run_with_cache(
            batch, names_filter=lambda name: name.endswith(RESID), return_type=None
        )
        streams.append(cache.accumulated_resid())  # [layers + 1, batch, T, d]
        del cache
    h = torch.cat(streams, dim=1)
    del streams
    return {
        "fingerprint": fingerprint,
        "shares": {str(skip): [shares(layer, skip) for layer in h] for skip in (False, True)},
    }


def child(args: argparse.Namespace) -> None:
    """Run (a) in this process and print its result, peak memory and CPU seconds as JSON."""
    import resource

    result = tl_pipeline(args)
    use = resource.getrusage(resource.RUSAGE_SELF)
    result.update(rss_mib=use.ru_maxrss / 1024, cpu_s=use.ru_utime + use.ru_stime)
    print(json.dumps(result))


def run_tl(args: argparse.Namespace) -> dict[str, Any]:
    argv = [sys.executable, __file__, "--child", "--contexts", str(args.contexts)]
    argv += ["--length", str(args.length), "--batch-size", str(args.batch_size)]
    started = time.perf_counter()
    out = subprocess.run(argv, check=True, capture_output=True, text=True).stdout
    result = json.loads(out.strip().splitlines()[-1])
    return {**result, "seconds": time.perf_counter() - started}


def run_geomlens(command: str, args: argparse.Namespace, out: Path) -> dict[str, Any]:
    peak = out.with_suffix(".peak.json")
    argv = [sys.executable, "-c", GEOMLENS_CHILD, str(peak), command, "--model", MODEL]
    argv += ["--contexts", str(args.contexts), "--length", str(args.length)]
    argv += ["--batch-size", str(args.batch_size), "--quiet", "--out", str(out)]
    started = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if done.returncode:
        sys.exit(f"geomlens {command} failed:\n{done.stderr[-2000:]}")
    return {**json.loads(peak.read_text()), "seconds": seconds, "shares": run_shares(out)}


def run_shares(out: Path) -> dict[str, Any]:
    """The shares of a geomlens run folder, from its float64 statistics."""
    import geomlens

    run = geomlens.open_run(out)
    acc = run.decomposition
    found = {
        str(skip): [list(acc.finalize(layer, skip).shares) for layer in acc.layers]
        for skip in (False, True)
    }
    return {**found, "fingerprint": run.windows["fingerprint"]}


def largest_difference(tl: dict[str, Any], ours: dict[str, Any]) -> float:
    if tl["fingerprint"] != ours["shares"]["fingerprint"]:
        sys.exit("TransformerLens and geomlens saw different windows")
    return max(
        abs(a - b)
        for skip in ("False", "True")
        for row_a, row_b in zip(tl["shares"][skip], ours["shares"][skip], strict=True)
        for a, b in zip(row_a, row_b, strict=True)
    )


TL_FIXED_MIB = 2600
"""TransformerLens's peak beyond the stream it holds (model, bridge, one batch's cache):
3,639-3,762 MiB measured at C=64 x T=256, of which 1,116 MiB the stream."""


def tl_stream_mib(args: argparse.Namespace) -> float:
    """MiB of the residual streams TransformerLens holds for the whole corpus."""
    layers, d = 31, 576  # SmolLM2: the input of block 0 and the output of its 30 blocks
    return layers * args.contexts * args.length * d * 4 / 2**20


def available_mib() -> float:
    """The machine's available memory now (MemAvailable), in MiB."""
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) / 1024
    return float("inf")


def measure(args: argparse.Namespace) -> dict[str, list[dict[str, Any]]]:
    """All three pipelines per repeat, interleaved, each in a fresh process."""
    runs: dict[str, list[dict[str, Any]]] = {"tl": [], **{c: [] for c in args.commands}}
    need = tl_stream_mib(args) + TL_FIXED_MIB
    fits = need < 0.8 * available_mib()
    if not fits:
        print(
            f"(a) not run at C={args.contexts}: it would hold about {need:,.0f} MiB "
            f"({tl_stream_mib(args):,.0f} MiB of residual streams), more than 0.8 of the "
            f"{available_mib():,.0f} MiB available",
            flush=True,
        )
        del runs["tl"]
    with tempfile.TemporaryDirectory() as tmp:
        for repeat in range(args.repeats):
            if fits:
                runs["tl"].append(run_tl(args))
            for command in args.commands:
                out = Path(tmp) / f"{command}-{repeat}"
                runs[command].append(run_geomlens(command, args, out))
            print(
                f"repeat {repeat + 1}/{args.repeats}: "
                + ", ".join(
                    f"{name} {rows[-1]['seconds']:.0f} s, {rows[-1]['rss_mib']:.0f} MiB"
                    for name, rows in runs.items()
                ),
                flush=True,
            )
    return runs


def summary(runs: dict[str, list[dict[str, Any]]], tokens: int) -> dict[str, dict[str, float]]:
    table = {}
    for name, rows in runs.items():
        seconds = statistics.median(r["seconds"] for r in rows)
        table[name] = {
            "seconds": seconds,
            "cpu_s": statistics.median(r["cpu_s"] for r in rows),
            "tokens_per_s": tokens / seconds,
            "peak_mib": max(r["rss_mib"] for r in rows),
        }
    return table


def report(table: dict[str, dict[str, float]], runs: dict[str, Any]) -> None:
    if "tl" not in table:
        for name, row in table.items():
            print(
                f"({name}) {row['seconds']:.1f} s, {row['cpu_s']:.1f} CPU s, "
                f"{row['tokens_per_s']:.0f} tokens/s, {row['peak_mib']:.0f} MiB"
            )
        return
    _report(table, runs)


def _report(table: dict[str, dict[str, float]], runs: dict[str, Any]) -> None:
    labels = {
        "tl": "(a) TransformerLens",
        "capture": "(b) geomlens capture",
        "decompose": "(c) geomlens decompose",
    }
    print(f"{'':26s} {'seconds':>8s} {'CPU s':>8s} {'tokens/s':>9s} {'peak MiB':>9s}")
    for name, row in table.items():
        print(
            f"{labels[name]:26s} {row['seconds']:8.1f} {row['cpu_s']:8.1f} "
            f"{row['tokens_per_s']:9.0f} {row['peak_mib']:9.0f}"
        )
    tl = table["tl"]
    for name in (n for n in ("capture", "decompose") if n in table):
        ours = table[name]
        diff = max(largest_difference(a, b) for a, b in zip(runs["tl"], runs[name], strict=True))
        print(
            f"TL/{name}: time {tl['seconds'] / ours['seconds']:.2f}x (CPU "
            f"{tl['cpu_s'] / ours['cpu_s']:.2f}x), peak memory "
            f"{tl['peak_mib'] / ours['peak_mib']:.2f}x; largest share difference {diff:.1e}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--contexts", default="64", help="C, or several: 256,1024")
    parser.add_argument("--length", type=int, default=256)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--commands", default="capture,decompose", help="geomlens commands run")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    args.commands = [c for c in args.commands.split(",") if c]
    sizes = [int(c) for c in str(args.contexts).split(",")]
    args.contexts = sizes[0]
    unshadow()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # TL must not reach the Hub
    if args.child:
        child(args)
        return
    from importlib.metadata import version

    import torch

    print(
        f"{MODEL}, C={','.join(map(str, sizes))} x T={args.length}, batch {args.batch_size}, "
        f"{args.repeats} repeats, torch {torch.__version__} ({torch.get_num_threads()} "
        f"threads), transformer-lens {version('transformer-lens')}, "
        f"load average {os.getloadavg()[0]:.1f}"
    )
    logits = check_logits(args)
    print(
        f"TL logits vs HF: max relative difference {logits['eager']:.1e} (HF eager), "
        f"{logits['sdpa']:.1e} (HF SDPA)",
        flush=True,
    )
    peaks: dict[int, dict[str, float]] = {}
    for size in sizes:
        args.contexts = size
        print(f"-- C = {size}", flush=True)
        runs = measure(args)
        table = summary(runs, args.contexts * args.length)
        report(table, runs)
        peaks[size] = {name: row["peak_mib"] for name, row in table.items()}
    if len(sizes) > 1:
        names = ["tl", *args.commands]
        print("peak MiB by C: " + "  ".join(f"{n:>10s}" for n in names))
        for size, row in peaks.items():
            cells = [f"{row[n]:10.0f}" if n in row else f"{'not run':>10s}" for n in names]
            print(f"  C = {size:5d}:    " + "  ".join(cells))


if __name__ == "__main__":
    main()
