"""The position/context step's per-layer work on one thread and on two, and UMAP in a
fresh process with and without numba's on-disk cache of umap's kernels.

    python benchmarks/layer_threads.py [--model smollm2-135m] [--contexts 64] [--length 128]
        [--batch-size 8] [--repeats 2]

(a) BBC windows go through the model once into an accumulator with second moments and
interval groups, as ``report`` keeps them; then, interleaved per repeat, both views of
every layer (``analyse_layers``) and the half-sample intervals
(``decomposition_intervals``) run with torch at one thread and at two (``map_layers``
follows it), with the BLAS single-threaded as the pipeline runs the analyses. The rows and
intervals of the two must be equal; the ratio one / two is printed.
(b) UMAP of 3,400 random points (the default map's size) in new processes: plain ``umap``
(its kernels compiled in every process) against ``analyses.lens.umap_module`` run twice
(the first compiles and stores, the second loads).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time

import numpy as np
import torch
from threadpoolctl import threadpool_limits

from geomlens.analyses.decomposition.compute import analyse_layers
from geomlens.analyses.decomposition.intervals import decomposition_intervals
from geomlens.capturing import CaptureConfig
from geomlens.capturing.hooks import hidden_states
from geomlens.pipeline.run import prepare
from geomlens.stats import DecompositionAccumulator
from geomlens.stats.base import CapturedBatch
from geomlens.stats.decomposition import interval_groups

UMAP_FIT = """
import sys, time
import numpy as np
if sys.argv[1] == "plain":
    import umap
else:
    from geomlens.analyses.sphere.lens import umap_module
    umap = umap_module()
x = np.random.default_rng(0).standard_normal((3400, 576))
x /= np.linalg.norm(x, axis=1, keepdims=True)
d = np.clip(1.0 - x @ x.T, 0.0, 2.0)
np.fill_diagonal(d, 0.0)
t0 = time.perf_counter()
umap.UMAP(n_components=3, metric="precomputed", random_state=0, n_epochs=200,
          n_jobs=1, tqdm_kwds={"disable": True}).fit_transform(d)
print(time.perf_counter() - t0)
"""


def umap_seconds(kind: str) -> float:
    """Seconds of one UMAP fit in a new process (``kind``: "plain" or "cached")."""
    out = subprocess.run(
        [sys.executable, "-c", UMAP_FIT, kind], capture_output=True, text=True, check=True
    )
    return float(out.stdout.split()[-1])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="smollm2-135m")
    p.add_argument("--contexts", type=int, default=64)
    p.add_argument("--length", type=int, default=128)
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--repeats", type=int, default=2)
    args = p.parse_args()

    config = CaptureConfig(model=args.model, contexts=args.contexts, length=args.length)
    view, _, windows = prepare(config)
    ids = torch.tensor(windows.input_ids)
    labels = np.asarray(windows.labels)
    layers = list(range(view.n_layers + 1))
    groups = interval_groups(len(layers), len(ids), args.length, view.d_model)
    acc = DecompositionAccumulator(
        layers, len(ids), args.length, view.d_model, second_moment=True, groups=groups
    )
    for s in range(0, len(ids), args.batch_size):
        part = ids[s : s + args.batch_size]
        where = torch.arange(s, s + len(part))
        acc.update(CapturedBatch(hidden_states(view, part, layers), where))

    before = torch.get_num_threads()
    seconds: dict[str, list[float]] = {}
    found: dict[int, str] = {}
    with threadpool_limits(limits=1, user_api="blas"):
        for _ in range(args.repeats):
            for threads in (1, 2):
                torch.set_num_threads(threads)
                t0 = time.perf_counter()
                rows = [r.to_dict() for r in analyse_layers(acc, labels, True, config.seed)]
                t1 = time.perf_counter()
                intervals = decomposition_intervals(acc, rows, labels, seed=config.seed)
                t2 = time.perf_counter()
                seconds.setdefault(f"layers/{threads}", []).append(t1 - t0)
                seconds.setdefault(f"intervals/{threads}", []).append(t2 - t1)
                found[threads] = json.dumps([rows, intervals], sort_keys=True, default=str)
    torch.set_num_threads(before)
    if found[1] != found[2]:
        raise SystemExit("the rows or intervals differ between one thread and two")

    umap = {kind: umap_seconds(kind) for kind in ("plain", "cached", "cached again")}
    med = {key: statistics.median(v) for key, v in seconds.items()}
    print(f"model={args.model} C={args.contexts} T={args.length} groups={groups}")
    for step in ("layers", "intervals"):
        one, two = med[f"{step}/1"], med[f"{step}/2"]
        print(f"  {step:<10} one thread {one:6.1f} s  two {two:6.1f} s  one/two {one / two:.2f}")
    print("  rows and intervals equal on one thread and two")
    print(
        f"  UMAP in a new process: plain {umap['plain']:.1f} s, cached (first) "
        f"{umap['cached']:.1f} s, cached (after) {umap['cached again']:.1f} s, "
        f"plain / cached {umap['plain'] / umap['cached again']:.1f}"
    )
    each = ", ".join(f"{k}={[round(s, 1) for s in v]}" for k, v in seconds.items())
    print(f"  per repeat: {each}")


if __name__ == "__main__":
    main()
