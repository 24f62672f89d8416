"""The ``geomlens`` command: parse, call one pipeline function, print where results went."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from geomlens.errors import GeomlensError


def parse_layers(text: str) -> tuple[int, ...] | None:
    """ "all", or a list like "0,4,8" or "0-6" (ranges inclusive)."""
    if text == "all":
        return None
    layers: list[int] = []
    try:
        for part in text.split(","):
            if "-" in part:
                lo, hi = part.split("-")
                layers.extend(range(int(lo), int(hi) + 1))
            else:
                layers.append(int(part))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--layers takes 'all', a list like 0,4,8 or a range like 0-6 (got {text!r})"
        ) from None
    return tuple(layers)


def add_capture_options(p: argparse.ArgumentParser) -> None:
    """The capture options every computing command accepts."""
    p.add_argument("--model", default="smollm2-135m", help="bundled name, folder, .gguf or HF id")
    p.add_argument("--corpus", default="bbc", help="'bbc', a folder of .txt, or a .jsonl file")
    p.add_argument("--contexts", type=int, default=128, help="C: number of windows")
    p.add_argument("--length", type=int, default=128, help="T: tokens per window")
    p.add_argument(
        "--layers", type=parse_layers, default=None, help="'all' (default), 0,4,8 or 0-6"
    )
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--device", default="cpu", help="cpu or cuda")
    p.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--offset", type=int, default=0, help="tokens of each document to skip")
    p.add_argument("--balance", action="store_true", help="balance windows across labels")
    p.add_argument("--save-activations", action="store_true", help="also write an activation store")
    p.add_argument("--out", default=None, help="run folder (default: runs/<command>-<model>)")
    p.add_argument(
        "--second-moment",
        action="store_true",
        help="also accumulate sum h h^T per layer (d x d; needed for spectral norms)",
    )
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument(
        "--checkpoint-every",
        type=float,
        default=30.0,
        metavar="SECONDS",
        help="save resumable progress at most this often (default 30)",
    )


def capture_config(args: argparse.Namespace):  # type: ignore[no-untyped-def]
    from geomlens.capture import CaptureConfig

    return CaptureConfig(
        model=args.model,
        corpus=args.corpus,
        contexts=args.contexts,
        length=args.length,
        layers=args.layers,
        batch_size=args.batch_size,
        device=args.device,
        dtype=args.dtype,
        seed=args.seed,
        offset=args.offset,
        balance=args.balance,
        save_activations=args.save_activations,
        second_moment=args.second_moment,
    )


def cmd_models(args: argparse.Namespace) -> int:
    from geomlens.models import BUNDLED

    rows = [
        {
            "name": m.name,
            "family": m.family,
            "layers": m.n_layers,
            "d_model": m.d_model,
            "heads": m.n_heads,
            "kv_heads": m.n_kv_heads,
            "position": m.position,
            "installed": m.installed,
            "install": m.install,
        }
        for m in BUNDLED.values()
    ]
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    cols = ["name", "family", "layers", "d_model", "heads", "kv_heads", "position", "installed"]
    table = [cols] + [[str(r[c]) for c in cols] for r in rows]
    widths = [max(len(row[i]) for row in table) for i in range(len(cols))]
    for row in table:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=False)).rstrip())
    missing = [r for r in rows if not r["installed"]]
    for r in missing:
        print(f"\n{r['name']} is not installed: {r['install']}")
    return 0


def default_out(command: str, model: str) -> str:
    safe = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in model.strip("/"))
    return f"runs/{command}-{safe}"


def cmd_capture(args: argparse.Namespace) -> int:
    from geomlens.pipeline import run_capture

    out = args.out or default_out("capture", args.model)
    run = run_capture(
        capture_config(args),
        out,
        progress=not args.quiet,
        checkpoint_every_s=args.checkpoint_every,
    )
    timing = run.manifest.get("timing", {})
    print(f"capture written to {run.path}")
    if timing:
        print(f"  {timing['tokens']:.0f} tokens at {timing['tokens_per_s']:.0f} tokens/s")
    return 0


def cmd_decompose(args: argparse.Namespace) -> int:
    from geomlens.decompose import run_decompose

    out = args.out or default_out("decompose", args.model)
    run = run_decompose(
        capture_config(args),
        out,
        skip_first=args.skip_first,
        progress=not args.quiet,
        checkpoint_every_s=args.checkpoint_every,
    )
    rows = run.metrics["decomposition"]["layers"]
    print(f"decomposition written to {run.path} (metrics.json, figures/)")
    view = "position 0 skipped" if args.skip_first else "all positions"
    print(f"  layer  share_pos  share_ctx  pos_rank  ({view})")
    for row in rows:
        print(
            f"  {row['layer']:5d}  {row['share_pos']:9.3f}  {row['share_ctx']:9.3f}"
            f"  {row['pos_rank']:8d}"
        )
    return 0


def cmd_walk(args: argparse.Namespace) -> int:
    from geomlens.walk import read_text_file, run_walk, summary_lines

    text = read_text_file(args.text_file) if args.text_file is not None else args.text
    out = args.out or default_out("walk", args.model)
    run = run_walk(
        capture_config(args),
        out,
        text=text,
        generate=args.generate,
        progress=not args.quiet,
        checkpoint_every_s=args.checkpoint_every,
    )
    print(f"walk written to {run.path} (metrics.json, similarity.safetensors, figures/)")
    for line in summary_lines(run):
        print(line)
    return 0


def cmd_sphere(args: argparse.Namespace) -> int:
    from geomlens.sphere import DEFAULT_PROMPT, run_sphere

    out = args.out or default_out("sphere", args.model)
    run = run_sphere(
        capture_config(args),
        out,
        nouns=args.nouns,
        prompt=args.prompt if args.prompt is not None else DEFAULT_PROMPT,
        layers=args.probe_layers,
        progress=not args.quiet,
        checkpoint_every_s=args.checkpoint_every,
    )
    m = run.metrics["sphere"]
    traj = m["trajectory"]
    print(f"sphere analyses written to {run.path} (metrics.json, sphere_*.json, figures/)")
    print(f"  identity max_rel_err {m['identity']['max_rel_err']:.2e} ({m['readout']})")
    print(f"  top tokens by norm: {m['top_tokens']['norm']['top'][:5]}")
    print(f"  prompt {m['prompt']!r} -> {traj['prediction']!r}; first top-1 layer per position:")
    pairs = zip(traj["tokens"], traj["first_top1"], strict=True)
    print("  " + ", ".join(f"{t!r}:{f}" for t, f in pairs))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="geomlens", description="Measure the geometry of pretrained transformer models."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("models", help="list the bundled models")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_models)
    p = sub.add_parser("capture", help="stream a corpus through a model into statistics")
    add_capture_options(p)
    p.set_defaults(func=cmd_capture)
    p = sub.add_parser("decompose", help="position/context decomposition of the hidden states")
    add_capture_options(p)
    p.add_argument(
        "--skip-first",
        action="store_true",
        help="leave position 0 out of every number (both views are computed and kept)",
    )
    p.set_defaults(func=cmd_decompose)
    p = sub.add_parser("walk", help="movement through embedding space (Singh 2023)")
    add_capture_options(p)
    source = p.add_mutually_exclusive_group()
    source.add_argument("--text", default=None, help="the text walked (default: a few-shot prompt)")
    source.add_argument("--text-file", default=None, metavar="F", help="read the text from F")
    p.add_argument(
        "--generate", type=int, default=0, metavar="N", help="decoding walks of N tokens"
    )
    p.set_defaults(func=cmd_walk)
    p = sub.add_parser("sphere", help="layer norm and the hypersphere (Molina 2023)")
    add_capture_options(p)
    p.add_argument("--nouns", default=None, metavar="FILE", help="probe nouns, one per line")
    p.add_argument("--prompt", default=None, metavar="TEXT", help="prompt of the logit lens")
    p.add_argument(
        "--probe-layers",
        type=parse_layers,
        default=None,
        help="blocks whose heads and FFN rows are probed (default: first, middle, last)",
    )
    p.set_defaults(func=cmd_sphere)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: user errors print one sentence and exit 2."""
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except GeomlensError as exc:
        print(f"geomlens: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("geomlens: interrupted.", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
