"""What each causal check costs against the capture it rides on, in one run.

    python benchmarks/interventions_cost.py [--model smollm2-135m] [--contexts 32]
        [--length 64] [--held-out 32] [--controls 8] [--batch-size 8]

The model is loaded once. Timed: the capture of the estimation windows (with second
moments, as ``geomlens intervene`` runs it); the unedited pass over the held-out windows
(one eager pass with attention weights and the readout); then each check (its arms and
its controls; the smoothness check reuses the positional check's controls, so its time is
its two arms'). Printed: seconds, and each as a ratio to the capture measured in the same
run. A check's cost is (arms + controls) passes over the held-out windows, so the ratios
scale with held-out / estimation windows and with the control draws.
"""

from __future__ import annotations

import argparse
import math
import tempfile
import time

import numpy as np
import torch

from geomlens.analyses.interventions.checks import CHECKS, geometry, run_checks
from geomlens.analyses.interventions.held_out import held_out_windows
from geomlens.capturing import CaptureConfig, capture_windows
from geomlens.corpus import load_corpus, make_windows
from geomlens.models import load_model
from geomlens.runs.runfolder import RunFolder


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--contexts", type=int, default=32)
    parser.add_argument("--length", type=int, default=64)
    parser.add_argument("--held-out", type=int, default=32)
    parser.add_argument("--controls", type=int, default=8)
    parser.add_argument("--batch-size", type=int, default=8)
    args = parser.parse_args()
    view = load_model(args.model)
    corpus = load_corpus("bbc")
    config = CaptureConfig(
        model=args.model,
        contexts=args.contexts,
        length=args.length,
        batch_size=args.batch_size,
        second_moment=True,
    )
    windows = make_windows(corpus, view.tokenizer, args.contexts, args.length)
    with tempfile.TemporaryDirectory() as folder:
        t0 = time.perf_counter()
        acc, _ = capture_windows(
            view, windows, config, RunFolder(folder), checkpoint_every_s=math.inf, progress=False
        )
        capture = time.perf_counter() - t0
    held = held_out_windows(corpus, view.tokenizer, windows, args.held_out)
    layers = [layer for layer in acc.layers if layer >= 1]
    geo = geometry(acc, layers, skip_first=not view.is_encoder)
    found = run_checks(
        view,
        torch.tensor(np.asarray(held.input_ids)),
        np.asarray(held.labels),
        geo,
        checks=CHECKS,
        draws=args.controls,
        batch_size=args.batch_size,
    )
    print(
        f"{args.model}: capture of {args.contexts} x {args.length} tokens; "
        f"{args.held_out} held-out windows; {args.controls} controls per check"
    )
    print(f"  capture             {capture:8.1f} s  1.00x")
    base = found["base_seconds"]
    print(f"  unedited pass       {base:8.1f} s  {base / capture:.2f}x")
    total = capture + base
    for name, record in found["checks"].items():
        seconds = record.get("seconds")
        if seconds is None:
            print(f"  {name:<19} not run: {record.get('reason', 'readout only')}")
            continue
        total += seconds
        print(f"  {name:<19} {seconds:8.1f} s  {seconds / capture:.2f}x")
    print(f"  all                 {total:8.1f} s  {total / capture:.2f}x")


if __name__ == "__main__":
    main()
