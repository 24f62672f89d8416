"""What identifying a model by its weights costs, against one forward pass over the
default corpus, measured in one run.

    python benchmarks/weights_hash.py [--model smollm2-135m] [--contexts 16] [--repeats 3]

A model given in memory, or a view edited after loading, is identified by a streaming
sha256 of its state dict (``geomlens.models.identity.weights_hash``: names, shapes, dtypes
and bytes, tensor by tensor). A view ``load_model`` makes hashes its weights once at load,
and a run given the view hashes them again to see whether they still match the files.
Measured here, each the median of ``--repeats``, interleaved:

(a) ``weights_hash`` of the loaded model (seconds, and seconds per GB of weights);
(b) one bare forward pass (no hooks) over ``--contexts`` BBC windows of 128 tokens, batch 8,
    scaled linearly to the default capture's 128 windows (the forward is linear in windows);
(c) ``load_model`` (loading, on-load check and the hash at load) against ``load_named``
    (what a command loads: the same without the hash).

Prints the ratios a/b (the hash against the default corpus's forward) and c's extra share.
"""

from __future__ import annotations

import argparse
import statistics

import torch
from capture import bare_forward, timed  # the capture benchmark's helpers (one copy)

DEFAULT_CONTEXTS = 128
"""The default capture's windows (``CaptureConfig.contexts``), of 128 tokens each."""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--contexts", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    import numpy as np

    from geomlens.corpus import load_corpus, make_windows
    from geomlens.models.identity import weights_hash
    from geomlens.models.loading import load_model, load_named

    view = load_model(args.model)
    unique = {t.data_ptr(): t for t in view.model.state_dict().values()}  # tied: read once
    size = sum(t.numel() * t.element_size() for t in unique.values())
    windows = make_windows(load_corpus("bbc"), view.tokenizer, args.contexts, 128, seed=0)
    ids = torch.tensor(np.array(windows.input_ids), dtype=torch.long)
    assert weights_hash(view.model) == view.identity.weights_at_load
    rows: dict[str, list[float]] = {k: [] for k in ("a", "b", "load", "named")}
    for _ in range(args.repeats):  # interleaved, so drift in machine load hits all alike
        rows["a"].append(timed(lambda: weights_hash(view.model)))
        rows["b"].append(timed(lambda: bare_forward(view, ids, 8)))
        rows["load"].append(timed(lambda: load_model(args.model)))
        rows["named"].append(timed(lambda: load_named(args.model)))
    med = {k: statistics.median(v) for k, v in rows.items()}
    forward = med["b"] * DEFAULT_CONTEXTS / args.contexts
    gb = size / 1e9
    threads = torch.get_num_threads()
    print(f"{args.model}: {size / 2**20:.1f} MiB of weights hashed, torch threads {threads}")
    print(f"  (a) weights_hash             {med['a']:8.3f} s  ({med['a'] / gb:.2f} s per GB)")
    print(f"  (b) forward, {args.contexts} x 128 tokens  {med['b']:8.3f} s; "
          f"scaled to {DEFAULT_CONTEXTS} x 128: {forward:.2f} s")  # fmt: skip
    print(f"  ratio a/b (hash over the default corpus's forward): {med['a'] / forward:.4f}")
    print(f"  (c) load_model {med['load']:.3f} s, load_named {med['named']:.3f} s: the hash at "
          f"load adds {med['load'] / med['named'] - 1:.1%}")  # fmt: skip


if __name__ == "__main__":
    main()
