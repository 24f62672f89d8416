"""The ``geomlens`` command: parse, call the Python API (``geomlens.api``), print its summary."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

from geomlens.errors import GeomlensError, one_line, os_error_sentence


class UsageError(GeomlensError):
    """A command line argparse refuses (unknown option, a value of the wrong type)."""


class Parser(argparse.ArgumentParser):
    """An argument parser whose errors are one sentence, reported like every other error."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message} (see `{self.prog} --help`).")


MAX_LAYERS = 1_000_000
"""The widest --layers range read (bounds memory before any model is known)."""


def parse_layers(text: str) -> tuple[int, ...] | None:
    """ "all", or a list like "0,4,8" or "0-6" (ranges inclusive)."""
    if text == "all":
        return None
    layers: list[int] = []
    try:
        for part in text.split(","):
            if "-" in part:
                lo, hi = part.split("-")
                if int(hi) - int(lo) >= MAX_LAYERS:
                    raise argparse.ArgumentTypeError(
                        f"--layers range {part} spans more than {MAX_LAYERS} layers; "
                        "no model has that many."
                    )
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
        "--trust-remote-code",
        action="store_true",
        help="let a model folder run its own Python code (auto_map); off by default",
    )
    p.add_argument(
        "--checkpoint-every",
        type=float,
        default=30.0,
        metavar="SECONDS",
        help="save resumable progress at most this often (default 30)",
    )
    p.add_argument(
        "--engine",
        default="local",
        choices=["local", "ray"],
        help="where the capture runs: this process (default) or a Ray cluster",
    )
    p.add_argument(
        "--ray-address",
        default=None,
        metavar="ADDR",
        help="Ray cluster to join (default: RAY_ADDRESS, else a local Ray instance)",
    )
    p.add_argument(
        "--workers", type=int, default=None, metavar="N", help="Ray model workers (--engine ray)"
    )
    p.add_argument(
        "--threads",
        type=int,
        default=None,
        metavar="N",
        help="torch threads per Ray worker (default 1), or of this process with --engine local",
    )
    p.add_argument(
        "--activations-dir",
        default=None,
        metavar="DIR_OR_URL",
        help="where --save-activations writes shards: a folder or fsspec URL "
        "(default: DIR/activations)",
    )


def capture_options(args: argparse.Namespace) -> dict[str, Any]:
    """The Python API's arguments that the capture options give (geomlens.api)."""
    return {
        "model": args.model,
        "corpus": args.corpus,
        "contexts": args.contexts,
        "length": args.length,
        "layers": args.layers,
        "batch_size": args.batch_size,
        "device": args.device,
        "dtype": args.dtype,
        "seed": args.seed,
        "offset": args.offset,
        "balance": args.balance,
        "save_activations": args.save_activations,
        "second_moment": args.second_moment,
        "trust_remote_code": args.trust_remote_code,
        "checkpoint_every": args.checkpoint_every,
        "engine": args.engine,
        "ray_address": args.ray_address,
        "workers": args.workers,
        "threads": args.threads,
        "activations_dir": args.activations_dir,
        "out": args.out,
        "progress": not args.quiet,
    }


def engine_config(args: argparse.Namespace):  # type: ignore[no-untyped-def]
    from geomlens.api.commands import configs

    return configs(capture_options(args))[1]


def capture_config(args: argparse.Namespace):  # type: ignore[no-untyped-def]
    from geomlens.api.commands import configs

    return configs(capture_options(args))[0]


def finished(result: Any) -> int:
    """Print what a command's run says when it finishes (``Result.summary``)."""
    for line in result.summary():
        print(line)
    return 0


def print_table(rows: list[dict[str, Any]], cols: list[str]) -> None:
    """Rows as aligned columns under a header."""
    table = [cols] + [[str(r[c]) for c in cols] for r in rows]
    widths = [max(len(row[i]) for row in table) for i in range(len(cols))]
    for row in table:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=False)).rstrip())


def cmd_families(args: argparse.Namespace) -> int:
    """The supported families: position scheme, block layout, norms, what else each handles."""
    from geomlens.models.families import FAMILIES
    from geomlens.models.loading import gguf_architectures

    gguf = gguf_architectures()
    rows = []
    for family in FAMILIES:
        row = family.describe()
        row["gguf"] = any(t in gguf or family.name in gguf for t in family.model_types)
        row["verified_by"] = (
            f"tests/test_families.py (rows {family.name}*), tests/test_family_commands.py"
        )
        rows.append(row)
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    for row in rows:
        row["features"] = ", ".join(row["features"]) or "-"
        row["gguf"] = "yes" if row["gguf"] else "-"
    print_table(rows, ["family", "position", "layout", "norm", "gguf", "features"])
    print(
        "\nEach family is checked against Hugging Face on tiny random models "
        "(tests/test_families.py) and runs every command (tests/test_family_commands.py)."
    )
    return 0


def cmd_models(args: argparse.Namespace) -> int:
    from geomlens.models import BUNDLED

    if args.families:
        return cmd_families(args)

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
    print_table(
        rows, ["name", "family", "layers", "d_model", "heads", "kv_heads", "position", "installed"]
    )
    missing = [r for r in rows if not r["installed"]]
    for r in missing:
        print(f"\n{r['name']} is not installed: {r['install']}")
    return 0


def cmd_capture(args: argparse.Namespace) -> int:
    from geomlens import api

    return finished(api.capture(**capture_options(args)))


def cmd_decompose(args: argparse.Namespace) -> int:
    from geomlens import api

    return finished(api.decompose(**capture_options(args), skip_first=args.skip_first))


def cmd_walk(args: argparse.Namespace) -> int:
    from geomlens import api

    return finished(
        api.walk(
            **capture_options(args),
            text=args.text,
            text_file=args.text_file,
            generate=args.generate,
        )
    )


def cmd_sphere(args: argparse.Namespace) -> int:
    from geomlens import api

    return finished(
        api.sphere(
            **capture_options(args),
            nouns=args.nouns,
            prompt=args.prompt,
            probe_layers=args.probe_layers,
        )
    )


def cmd_arithmetic(args: argparse.Namespace) -> int:
    from geomlens.arithmetic import make_config
    from geomlens.commands.arithmetic import run_arithmetic, summary_lines

    config = make_config(
        args.preset,
        train_digits=args.train_digits,
        test_digits=args.test_digits,
        reverse_output=args.reverse_output,
        carry=args.carry,
        layers=args.layers,
        heads=args.heads,
        d_model=args.d_model,
        steps=args.steps,
        batch_size=args.batch_size,
        lr=args.lr,
        train_samples=args.train_samples,
        checkpoint_every=args.checkpoint_every,
        eval_samples=args.eval_samples,
        geometry_contexts=args.geometry_contexts,
        control=args.control,
        device=args.device,
        threads=args.threads,
        seed=args.seed,
    )
    out = args.out or f"runs/arithmetic-{config.preset}"
    run = run_arithmetic(config, out, progress=not args.quiet)
    print(f"addition study written to {run.path} (metrics.json, figures/, model/)")
    for line in summary_lines(run):
        print(line)
    return 0


def parse_limit(text: str) -> int | None:
    """ "all" or a positive number of items."""
    if text == "all":
        return None
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--limit takes a number or 'all' (got {text!r})"
        ) from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"--limit must be at least 1 (got {value})")
    return value


def cmd_concepts(args: argparse.Namespace) -> int:
    from geomlens import api

    result = api.concepts(
        model=args.model,
        task=args.task,
        data_dir=args.data_dir,
        shots=args.shots,
        limit=args.limit,
        schemes=args.scheme,
        sweep=args.sweep,
        seed=args.seed,
        device=args.device,
        dtype=args.dtype,
        batch_tokens=args.batch_tokens,
        feed=args.feed,
        trust_remote_code=args.trust_remote_code,
        out=args.out,
        progress=not args.quiet,
    )
    return finished(result)


def cmd_data_bigbench(args: argparse.Namespace) -> int:
    from geomlens.concepts.data import TASKS, default_out, fetch_bigbench

    tasks = tuple(t for t in args.tasks.split(",") if t) if args.tasks else TASKS
    out = args.out or default_out()
    written = fetch_bigbench(out, archive=args.archive, tasks=tasks)
    print(f"BIG-bench tasks written to {out}:")
    for task, path in sorted(written.items()):
        print(f"  {task}: {path}")
    return 0


def cmd_data_hellaswag(args: argparse.Namespace) -> int:
    from geomlens.concepts.hellaswag import fetch_hellaswag

    path, n = fetch_hellaswag(args.out, source=args.source)
    print(f"HellaSwag: {n} items written to {path} (use it with --task {path})")
    return 0


def add_concepts_parsers(sub: argparse._SubParsersAction) -> None:
    """The ``concepts`` and ``data`` commands."""
    p = sub.add_parser(
        "concepts", help="concept-space tests on a multiple-choice task (Singh 2023)"
    )
    p.add_argument("--model", default="smollm2-135m", help="bundled name, folder, .gguf or HF id")
    p.add_argument("--task", default="timedial", help="task file, or a name in the data folder")
    p.add_argument(
        "--data-dir", default=None, help="where task names are looked up (default: $GEOMLENS_DATA)"
    )
    p.add_argument("--shots", type=int, default=0, metavar="K", help="solved examples per item")
    p.add_argument(
        "--limit", type=parse_limit, default=50, metavar="N", help="first N items, or 'all' (50)"
    )
    p.add_argument(
        "--scheme",
        action="append",
        default=None,
        metavar="S",
        help="a preset (sanity, sentences_E, examples_mid, similarity_mid) or key=value "
        "pairs; repeat for several (default: the four presets)",
    )
    p.add_argument("--sweep", default=None, metavar="GRID", help="YAML or JSON grid of schemes")
    p.add_argument("--seed", type=int, default=0, help="few-shot sampling and bootstrap seed")
    p.add_argument("--device", default="cpu", help="cpu or cuda")
    p.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    p.add_argument("--batch-tokens", type=int, default=2048, help="padded tokens per forward")
    p.add_argument(
        "--feed",
        default="encoder",
        choices=["encoder", "decoder"],
        help="encoder-decoders: test 1's vectors are the encoder's input (encoder, default) "
        "or its output, through its final norm (decoder)",
    )
    p.add_argument("--quiet", action="store_true", help="no progress output")
    p.add_argument(
        "--trust-remote-code",
        action="store_true",
        help="let a model folder run its own Python code (auto_map); off by default",
    )
    p.add_argument("--out", default=None, help="run folder (default: runs/concepts-<model>)")
    p.set_defaults(func=cmd_concepts)
    p = sub.add_parser("data", help="rebuild offline data folders")
    data = p.add_subparsers(dest="dataset", required=True)
    q = data.add_parser("bigbench", help="BIG-bench task files from the bigbench package on PyPI")
    q.add_argument(
        "--out", default=None, help="folder (default: $GEOMLENS_DATA/bigbench or data/bigbench)"
    )
    q.add_argument("--archive", default=None, help="an already downloaded bigbench-1.0.0.tar.gz")
    q.add_argument("--tasks", default=None, help="comma-separated task paths (default: five)")
    q.set_defaults(func=cmd_data_bigbench)
    q = data.add_parser("hellaswag", help="HellaSwag's validation split as a task file")
    q.add_argument(
        "--out",
        default=None,
        help="file (default: $GEOMLENS_DATA/hellaswag.jsonl or data/hellaswag.jsonl)",
    )
    q.add_argument(
        "--source", default=None, help="a local JSONL or parquet copy instead of the hub"
    )
    q.set_defaults(func=cmd_data_hellaswag)


def cmd_report(args: argparse.Namespace) -> int:
    from geomlens import api

    result = api.report(
        **capture_options(args), task=args.task, limit=args.limit, skip_first=args.skip_first
    )
    return finished(result)


def cmd_compare(args: argparse.Namespace) -> int:
    from geomlens.report.compare import write_compare

    page = write_compare(args.runs, args.out)
    print(f"comparison written to {page} (and compare.csv, compare_claims.csv beside it)")
    return 0


def add_report_parsers(sub: argparse._SubParsersAction) -> None:
    """The ``report`` and ``compare`` commands."""
    p = sub.add_parser("report", help="every analysis on one capture, in one report.html")
    add_capture_options(p)
    p.add_argument(
        "--task", default=None, help="multiple-choice task of the concept tests (default task)"
    )
    p.add_argument("--limit", type=int, default=40, metavar="N", help="task items scored (40)")
    p.add_argument(
        "--skip-first",
        action="store_true",
        help="primary view leaves position 0 out (both views are shown)",
    )
    p.set_defaults(func=cmd_report)
    p = sub.add_parser(
        "compare", help="per-layer numbers and the papers' claims of several runs side by side"
    )
    p.add_argument("runs", nargs="+", metavar="DIR", help="run folders (decompose or report)")
    p.add_argument("--out", default="runs/compare", help="output folder (default runs/compare)")
    p.set_defaults(func=cmd_compare)


def add_arithmetic_parser(sub: argparse._SubParsersAction) -> None:
    """The ``arithmetic`` command (every option defaults to its preset's value)."""
    p = sub.add_parser(
        "arithmetic", help="addition study: length generalisation and positional geometry"
    )
    p.add_argument("--preset", default=None, choices=["quick", "full"], help="default: full")
    p.add_argument("--train-digits", default=None, metavar="LO-HI", help="full: 5-10")
    p.add_argument("--test-digits", default=None, metavar="LO-HI", help="full: 1-15")
    p.add_argument(
        "--reverse-output",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="write answers least significant digit first (default: on)",
    )
    p.add_argument(
        "--carry",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="--no-carry draws only sums without any carry (default: carries allowed)",
    )
    p.add_argument("--layers", type=int, default=None, metavar="L")
    p.add_argument("--heads", type=int, default=None, metavar="H")
    p.add_argument("--d-model", type=int, default=None, metavar="D")
    p.add_argument("--steps", type=int, default=None, metavar="N")
    p.add_argument("--batch-size", type=int, default=None, metavar="B")
    p.add_argument("--lr", type=float, default=None, help="peak AdamW learning rate")
    p.add_argument(
        "--train-samples",
        type=int,
        default=None,
        metavar="N",
        help="fixed training set size (0: fresh problems every step)",
    )
    p.add_argument("--checkpoint-every", type=int, default=None, metavar="STEPS")
    p.add_argument("--eval-samples", type=int, default=None, metavar="N", help="per length")
    p.add_argument("--geometry-contexts", type=int, default=None, metavar="C")
    p.add_argument(
        "--control",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="also train a control on randomised position ids (full: on, quick: off)",
    )
    p.add_argument("--device", default=None, help="cpu (default) or cuda")
    p.add_argument("--threads", type=int, default=None, metavar="N", help="torch CPU threads")
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.add_argument("--out", default=None, help="run folder (default: runs/arithmetic-<preset>)")
    p.set_defaults(func=cmd_arithmetic)


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="geomlens", description="Measure the geometry of pretrained transformer models."
    )
    parser.add_argument(
        "--debug",
        action="store_true",
        help="show the traceback of an internal error (accepted anywhere on the line)",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("models", help="list the bundled models (or the supported families)")
    p.add_argument("--json", action="store_true")
    p.add_argument(
        "--families",
        action="store_true",
        help="list the supported model families, their layouts and options",
    )
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
    add_arithmetic_parser(sub)
    add_concepts_parsers(sub)
    add_report_parsers(sub)
    return parser


MAX_MESSAGE = 500
"""Longest message printed (characters); longer ones are cut with an ellipsis."""


def bounded(message: str, limit: int = MAX_MESSAGE) -> str:
    """``message`` on one line, at most ``limit`` characters."""
    text = one_line(message)
    return text if len(text) <= limit else text[: limit - 3].rstrip() + "..."


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: the one place where errors become sentences.

    User errors and failed file operations (a full disk, no permission, a read-only file
    system) print one sentence and exit 2: what a run finished before them stays in its
    folder, and rerunning resumes. Anything else is a bug in geomlens: one line naming
    it and exit 1, or its traceback with ``--debug``.
    """
    args_list = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in args_list
    try:
        args = build_parser().parse_args([a for a in args_list if a != "--debug"])
        return int(args.func(args))
    except GeomlensError as exc:
        print(f"geomlens: error: {bounded(str(exc))}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"geomlens: error: {bounded(os_error_sentence(exc))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("geomlens: interrupted.", file=sys.stderr)
        return 130
    except Exception as exc:
        if debug:
            raise
        what = bounded(f"{type(exc).__name__}: {exc}", MAX_MESSAGE - 100)
        print(
            f"geomlens: internal error: {what}; rerun with --debug for the traceback.",
            file=sys.stderr,
        )
        return 1


if __name__ == "__main__":
    sys.exit(main())
