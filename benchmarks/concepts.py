"""Baseline scoring speed, and item-by-item agreement with lm-evaluation-harness.

    python benchmarks/concepts.py [--task step_inference] [--items 500] [--data-dir ../shared/data]
        [--model smollm2-135m] [--batch-tokens 2048] [--lm-eval-batch 16] [--threads N]
        [--skip-plain] [--skip-lm-eval] [--modes cached,packed]

(a) geomlens's baseline scorer, in each of ``--modes``: ``cached`` (the default: each
    context once with its KV cache, then every choice against it, length-sorted batches),
    ``packed`` (one forward per item: the context once, every choice in its own attention
    block);
(b) a plain loop: one forward of the full Hugging Face model per (item, choice);
(c) lm-evaluation-harness's own "hf" model on the same items, when lm_eval is importable,
    through a local task file (a JSONL of the items and a task YAML written to a temporary
    folder; nothing is downloaded).
Prints the time of each, the ratios, acc / acc_norm / acc_bytes of each, and how far the
per-choice log-likelihoods and the per-item predictions of (a) are from (b) and (c).
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from geomlens.analyses.concepts.baseline import baseline_scores, plain_loglik, prepare
from geomlens.analyses.concepts.tasks import load_task
from geomlens.models import load_model
from geomlens.models.loading import resolve_folder

METRICS = ("acc", "acc_norm", "acc_bytes")


def accuracies(lls, items) -> dict[str, float]:
    gold = np.array([it.gold for it in items])
    out = {}
    for name in METRICS:
        preds = []
        for ll, it in zip(lls, items, strict=True):
            ll = np.array(ll)
            if name == "acc":
                preds.append(np.argmax(ll))
            else:
                n = [len(c) if name == "acc_norm" else len(c.encode()) for c in it.choices]
                preds.append(np.argmax(ll / np.array(n, dtype=float)))
        out[name] = float(np.mean(np.array(preds) == gold))
    return out


def predictions(lls, items) -> list[tuple[int, int, int]]:
    out = []
    for ll, it in zip(lls, items, strict=True):
        ll = np.array(ll)
        chars = np.array([len(c) for c in it.choices], dtype=float)
        nbytes = np.array([len(c.encode()) for c in it.choices], dtype=float)
        out.append((int(np.argmax(ll)), int(np.argmax(ll / chars)), int(np.argmax(ll / nbytes))))
    return out


def run_lm_eval(folder: Path, items, batch: int) -> tuple[list[list[float]], float, float]:
    """lm-eval's hf model on the items via a local task; per-item log-likelihoods, seconds.

    The seconds (wall, CPU) count the evaluation only, not the loading of lm-eval's model.
    """
    import lm_eval
    from lm_eval.models.huggingface import HFLM
    from lm_eval.tasks import TaskManager

    model = HFLM(pretrained=str(folder), dtype="float32", batch_size=batch, device="cpu")

    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "items.jsonl"
        data.write_text(
            "".join(
                json.dumps({"query": it.query, "choices": list(it.choices), "gold": it.gold}) + "\n"
                for it in items
            )
        )
        (Path(tmp) / "task.yaml").write_text(
            "task: geomlens_local_mc\n"
            "dataset_path: json\n"
            f"dataset_kwargs:\n  data_files:\n    test: {data}\n"
            "test_split: test\n"
            "output_type: multiple_choice\n"
            "doc_to_text: query\n"
            "doc_to_choice: choices\n"
            "doc_to_target: gold\n"
            "metric_list:\n  - metric: acc\n  - metric: acc_norm\n  - metric: acc_bytes\n"
        )
        t0, c0 = time.perf_counter(), time.process_time()
        res = lm_eval.simple_evaluate(
            model=model,
            tasks=["geomlens_local_mc"],
            task_manager=TaskManager(include_path=tmp),
            log_samples=True,
            bootstrap_iters=0,
        )
        seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    samples = sorted(res["samples"]["geomlens_local_mc"], key=lambda s: s["doc_id"])
    lls = [[float(r[0][0]) for r in s["resps"]] for s in samples]
    print("lm-eval reported:", {k: v for k, v in res["results"]["geomlens_local_mc"].items()})
    return lls, seconds, cpu


def compare(name: str, ours, theirs, items) -> None:
    diff = max(
        abs(a - b) for x, y in zip(ours, theirs, strict=True) for a, b in zip(x, y, strict=True)
    )
    po, pt = predictions(ours, items), predictions(theirs, items)
    agree = [float(np.mean([a[i] == b[i] for a, b in zip(po, pt, strict=True)])) for i in range(3)]
    print(
        f"  geomlens vs {name}: max |loglik diff| {diff:.2e}; items with the same prediction: "
        + ", ".join(f"{m} {a:.3f}" for m, a in zip(METRICS, agree, strict=True))
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--task", default="step_inference")
    ap.add_argument("--data-dir", default=os.environ.get("GEOMLENS_DATA", "../shared/data"))
    ap.add_argument("--items", type=int, default=500)
    ap.add_argument("--batch-tokens", type=int, default=2048)
    ap.add_argument("--lm-eval-batch", type=int, default=16)
    ap.add_argument("--skip-plain", action="store_true")
    ap.add_argument("--skip-lm-eval", action="store_true")
    ap.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    ap.add_argument("--modes", default="cached,packed", help="geomlens scorings, first = (a)")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)

    view = load_model(args.model)
    task = load_task(args.task, args.data_dir)
    items = task.take(args.items)
    prepared = prepare(view, task, items, 0, 0)
    print(
        f"{len(items)} items of {task.name}, {args.model}, {os.cpu_count()} CPUs, "
        f"{torch.get_num_threads()} torch threads, load average {os.getloadavg()[0]:.1f}"
    )

    modes = [m for m in args.modes.split(",") if m]
    timings = {}
    for mode in modes:
        t0, c0 = time.perf_counter(), time.process_time()
        scores = baseline_scores(view, prepared, batch_tokens=args.batch_tokens, mode=mode)
        timings[mode] = (time.perf_counter() - t0, time.process_time() - c0)
        lls = [list(s.loglik) for s in scores]
        print(
            f"(a) geomlens, {mode}: {timings[mode][0]:.1f} s wall, {timings[mode][1]:.1f} s CPU",
            accuracies(lls, items),
        )
        if mode == modes[0]:
            ours = lls
        else:
            compare(f"{modes[0]} (a, {mode})", ours, lls, items)
            print(
                f"  {mode}/{modes[0]}: {timings[mode][0] / timings[modes[0]][0]:.2f}x wall, "
                f"{timings[mode][1] / timings[modes[0]][1]:.2f}x CPU"
            )
    t_ours, c_ours = timings[modes[0]]

    if not args.skip_plain:
        t0, c0 = time.perf_counter(), time.process_time()
        plain = [
            [plain_loglik(view, p.enc.context, c) for c in p.enc.continuations] for p in prepared
        ]
        t_plain, c_plain = time.perf_counter() - t0, time.process_time() - c0
        print(
            f"(b) plain per-choice loop:  {t_plain:.1f} s wall, {c_plain:.1f} s CPU",
            accuracies(plain, items),
        )
        print(f"  speed-up (b)/(a): {t_plain / t_ours:.2f}x wall, {c_plain / c_ours:.2f}x CPU")
        compare("plain loop", ours, plain, items)

    if not args.skip_lm_eval:
        try:
            import lm_eval  # noqa: F401
        except ImportError:
            print("(c) lm-eval is not installed (pip install 'geomlens[lmeval]'); skipped")
            return
        lm_lls, t_lm, c_lm = run_lm_eval(resolve_folder(args.model), items, args.lm_eval_batch)
        print(
            f"(c) lm-eval hf model:       {t_lm:.1f} s wall, {c_lm:.1f} s CPU",
            accuracies(lm_lls, items),
        )
        print(
            f"  speed-up (c)/(a): {t_lm / t_ours:.2f}x wall, {c_lm / c_ours:.2f}x CPU",
            "(lm-eval: evaluation only)",
        )
        compare("lm-eval", ours, lm_lls, items)


if __name__ == "__main__":
    main()
