"""What second moments cost per batch: the forward, and the accumulator's update without
and with them, on the same hidden states, interleaved in one process.

    python benchmarks/second_moment.py [--model smollm2-135m] [--batch-size 8] [--length 128]
        [--repeats 5]

One batch of BBC windows goes through the base model once with every layer recorded; then,
per repeat, interleaved: (a) the bare forward of the batch, (b) ``update`` of an accumulator
without second moments, (c) ``update`` with them, (d) ``update`` with them and the interval
groups ``decompose`` keeps (each group's positional sums and second-moment sketch). The
capture loop is a forward plus an update, so the implied speed of ``decompose``'s capture
phase against ``capture`` is (a + b) / (a + d) (target >= 0.9). It also prints the
floating-point operations of the d x d products against those of the forward (2 x
parameters per token, embedding excluded): the share a second moment cannot go below on a
machine that runs both at the same rate.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from geomlens.capturing import CaptureConfig
from geomlens.capturing.hooks import base_kwargs, hidden_states
from geomlens.pipeline.run import prepare
from geomlens.stats import DecompositionAccumulator
from geomlens.stats.base import CapturedBatch
from geomlens.stats.decomposition import MAX_GROUPS


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="smollm2-135m")
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--length", type=int, default=128)
    p.add_argument("--repeats", type=int, default=5)
    args = p.parse_args()

    config = CaptureConfig(model=args.model, contexts=args.batch_size, length=args.length)
    view, _, windows = prepare(config)
    ids = torch.tensor(windows.input_ids)
    layers = list(range(view.n_layers + 1))
    batch = CapturedBatch(hidden_states(view, ids, layers), torch.arange(len(ids)))
    kwargs = base_kwargs(view)

    def forward() -> None:
        with torch.inference_mode():
            view.base(input_ids=ids, **kwargs)

    def update(second: bool, groups: int = 0) -> None:
        acc = DecompositionAccumulator(
            layers, len(ids), args.length, view.d_model, second_moment=second, groups=groups
        )
        acc.update(batch)

    groups = min(MAX_GROUPS, len(ids))
    runs = {
        "forward": forward,
        "plain": lambda: update(False),
        "second": lambda: update(True),
        "groups": lambda: update(True, groups),
    }
    for fn in runs.values():  # warm-up
        fn()
    seconds: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(args.repeats):
        for name, fn in runs.items():
            t0 = time.perf_counter()
            fn()
            seconds[name].append(time.perf_counter() - t0)
    a, b, c, g = (statistics.median(seconds[n]) for n in runs)

    d, tokens = view.d_model, ids.numel()
    params = sum(x.numel() for x in view.base.parameters()) - view.W_E.numel()
    product_flops = 2 * len(layers) * d * d * tokens
    forward_flops = 2 * params * tokens
    print(f"model={args.model} batch={args.batch_size} x {args.length} layers={len(layers)}")
    print(f"  forward                     {a:7.3f} s")
    print(f"  update, no second moments   {b:7.3f} s")
    print(f"  update, second moments      {c:7.3f} s  (+{c - b:.3f} s)")
    print(f"  update, + interval groups   {g:7.3f} s  (+{g - c:.3f} s)")
    print(f"  implied (a+b)/(a+c)         {(a + b) / (a + c):7.3f}")
    print(f"  implied (a+b)/(a+d)         {(a + b) / (a + g):7.3f}  (target >= 0.9)")
    print(f"  d x d product FLOPs / forward FLOPs  {product_flops / forward_flops:.3f}")
    each = ", ".join(f"{n}={[round(s, 3) for s in v]}" for n, v in seconds.items())
    print(f"  per repeat: {each}")


if __name__ == "__main__":
    main()
