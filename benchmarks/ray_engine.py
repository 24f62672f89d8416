"""The Ray engine against in-process capture on one machine, measured in one run.

    python benchmarks/ray_engine.py [--model minilm-l6] [--contexts 256] [--length 128]
        [--batch-size 16] [--repeats 2] [--cpus 2]

(a) local: ``capture_windows`` in this process with ``--cpus`` torch threads;
(b) Ray, 1 worker of ``--cpus`` threads;
(c) Ray, ``--cpus`` workers of 1 thread each.
One local Ray instance with ``--cpus`` CPUs serves (b) and (c); the runs are interleaved
so that drift in the machine's load hits all alike. For Ray, two rates are printed:
end to end (actor start and model load included, as a user waits for it) and while
computing (first shard started to last shard finished). Ratios are against (a).
Targets: (b) costs at most 10% over (a); (c) reaches at least 0.9x (a).
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import statistics
import tempfile
import time

import torch


def local_run(view, windows, config, threads: int) -> float:
    from geomlens.capturing import capture_windows
    from geomlens.runs.runfolder import RunFolder

    torch.set_num_threads(threads)
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        capture_windows(
            view, windows, config, RunFolder(tmp), checkpoint_every_s=math.inf, progress=False
        )
        return time.perf_counter() - t0


def ray_run(view, windows, config, workers: int, threads: int) -> dict[str, float]:
    from geomlens.engines import CaptureJob, EngineConfig
    from geomlens.engines.ray import capture_ray
    from geomlens.runs.runfolder import RunFolder

    engine = EngineConfig(name="ray", workers=workers, threads=threads)
    with tempfile.TemporaryDirectory() as tmp:
        job = CaptureJob(view, windows, config, RunFolder(tmp), False, checkpoint_every_s=1e9)
        _, timing = capture_ray(job, engine)
    return timing


def shard_bytes(view, config, c: int, layers: int) -> tuple[int, int]:
    """(accumulator state, activations) bytes of a shard of c contexts."""
    d, t = view.d_model, config.length
    state = layers * (t * d + 2 * c * d + 1) * 8 + c * 8
    if config.second_moment:
        state += layers * d * d * 8
    return state, layers * c * t * d * 4


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="minilm-l6")
    parser.add_argument("--contexts", type=int, default=256)
    parser.add_argument("--length", type=int, default=128)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--cpus", type=int, default=2)
    args = parser.parse_args()

    import ray

    from geomlens.capturing import CaptureConfig
    from geomlens.pipeline.run import prepare

    config = CaptureConfig(
        model=args.model,
        contexts=args.contexts,
        length=args.length,
        batch_size=args.batch_size,
    )
    view, _, windows = prepare(config)
    tokens = args.contexts * args.length
    ray.init(num_cpus=args.cpus, include_dashboard=False, logging_level=logging.WARNING)
    local_run(view, windows, config, args.cpus)  # warm-up
    local, one, many = [], [], []
    for _ in range(args.repeats):
        local.append(local_run(view, windows, config, args.cpus))
        one.append(ray_run(view, windows, config, 1, args.cpus))
        many.append(ray_run(view, windows, config, args.cpus, 1))
    ray.shutdown()

    a = tokens / statistics.median(local)

    def rates(runs: list[dict[str, float]]) -> tuple[float, float]:
        end = tokens / statistics.median(r["seconds"] for r in runs)
        compute = tokens / statistics.median(r["compute_seconds"] for r in runs)
        return end, compute

    b_end, b_compute = rates(one)
    c_end, c_compute = rates(many)
    layers = view.n_layers + 1
    n_batches = math.ceil(args.contexts / args.batch_size)
    shards = {
        w: min(n_batches, 4 * w) for w in (1, args.cpus)
    }  # the engine's default: 4 shards per worker
    moved = {}
    for w, n in shards.items():
        c = math.ceil(n_batches / n) * args.batch_size
        state, acts = shard_bytes(view, config, c, layers)
        moved[w] = {"shards": n, "state_mib": state / 2**20, "activations_mib": acts / 2**20}
    result = {
        "model": args.model,
        "tokens": tokens,
        "local_tok_s": a,
        "ray1_end_to_end_tok_s": b_end,
        "ray1_compute_tok_s": b_compute,
        "rayN_end_to_end_tok_s": c_end,
        "rayN_compute_tok_s": c_compute,
        "ray1_compute_ratio": b_compute / a,
        "ray1_end_to_end_ratio": b_end / a,
        "rayN_compute_ratio": c_compute / a,
        "rayN_end_to_end_ratio": c_end / a,
        "local_seconds": local,
        "ray1_seconds": [r["seconds"] for r in one],
        "rayN_seconds": [r["seconds"] for r in many],
        "bytes_per_shard": moved,
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
