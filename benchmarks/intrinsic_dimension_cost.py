"""What the intrinsic-dimension step costs against the capture it reads: the capture
(no taps) of the windows, then the step's profile (TwoNN with its bootstrap and GRIDE at
every captured layer, from the decomposition's own sums), in one run.

    python benchmarks/intrinsic_dimension_cost.py [--model smollm2-135m] [--contexts 128]
        [--length 128] [--batch-size 8] [--repeats 3]

The step adds no capture state and no pass; its cost is the profile alone. Printed:
medians and the ratio (step) / (capture). The report holds more than the capture, so the
step's share of a report's time is smaller than this ratio.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import tempfile
import time

from geomlens.analyses.intrinsic_dimension.compute import phase, pooled, profile
from geomlens.capturing import CaptureConfig, capture_windows
from geomlens.corpus import load_corpus, make_windows
from geomlens.models import load_model
from geomlens.runs.runfolder import RunFolder


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--contexts", type=int, default=128)
    parser.add_argument("--length", type=int, default=128)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    view = load_model(args.model)
    config = CaptureConfig(
        model=args.model, contexts=args.contexts, length=args.length, batch_size=args.batch_size
    )
    windows = make_windows(load_corpus("bbc"), view.tokenizer, args.contexts, args.length)
    times: dict[str, list[float]] = {"capture": [], "step": []}
    for i in range(args.repeats):
        with tempfile.TemporaryDirectory() as folder:
            t0 = time.perf_counter()
            acc, _ = capture_windows(
                view,
                windows,
                config,
                RunFolder(folder),
                checkpoint_every_s=math.inf,
                progress=False,
            )
            times["capture"].append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        found = profile({layer: pooled(acc, layer) for layer in acc.layers}, view.n_layers, 0)
        phase(found)
        times["step"].append(time.perf_counter() - t0)
        print(
            f"repeat {i + 1}: " + ", ".join(f"{k} {v[-1]:.1f} s" for k, v in times.items()),
            file=sys.stderr,
            flush=True,
        )
    med = {k: statistics.median(v) for k, v in times.items()}
    print(
        f"model={args.model} C={args.contexts} T={args.length} batch={args.batch_size} "
        f"repeats={args.repeats} layers {len(acc.layers)}"
    )
    print(f"capture                     {med['capture']:7.1f} s")
    print(
        f"intrinsic-dimension profile {med['step']:7.2f} s  "
        f"{med['step'] / med['capture']:.3f} x the capture"
    )


if __name__ == "__main__":
    main()
