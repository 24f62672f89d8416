"""How well the groups' second-moment sketches stand in for their exact second moments.

    python benchmarks/sketch_accuracy.py [--model smollm2-135m] [--contexts 64]
        [--length 128] [--rank R] [--layers-step 2]

The relative norms' intervals come from half-samples of the context groups; a draw's top
eigenvalue of ``sum h h^T`` is a Nystrom estimate from each group's sketch
``(sum h h^T) @ Omega`` (``analyses.decomposition_intervals``). Here the same draws are
also computed exactly, from the hidden states themselves (position 0 left out, as in the
intervals), and the script prints, layer by layer, the standard deviation of the exact
draws and the ratio of the sketched draws' to it: the ratio of the two intervals' widths
(1.0: the sketch loses nothing; above 1: wider, conservative intervals). ``--rank``
overrides the number of sketch columns the memory budget would pick.
"""

from __future__ import annotations

import argparse
import statistics

import numpy as np
import torch
from threadpoolctl import threadpool_limits

from geomlens.analyses.decomposition.compute import relative_norms
from geomlens.analyses.decomposition.intervals import N_DRAWS, group_draws, sketch_corrections
from geomlens.corpus.sources import load_corpus
from geomlens.corpus.windows import make_windows
from geomlens.models.loading import load_model
from geomlens.stats import CapturedBatch, DecompositionAccumulator
from geomlens.stats import decomposition as decomposition_stats

KEYS = ("rel_norm_pos", "rel_norm_pos_centred")


def hidden_states(model: str, contexts: int, length: int) -> np.ndarray:
    """[L, C, T, d] every layer's hidden states of C BBC windows (float64)."""
    view = load_model(model)
    windows = make_windows(load_corpus("bbc"), view.tokenizer, contexts, length)
    ids = torch.tensor(np.array(windows.input_ids))
    out = []
    with torch.inference_mode():
        for start in range(0, contexts, 8):
            batch = ids[start : start + 8]
            found = view.model(
                input_ids=batch, attention_mask=torch.ones_like(batch), output_hidden_states=True
            )
            out.append(torch.stack(found.hidden_states).double())
    return torch.cat(out, 1).numpy()


class ExactDraws:
    """The relative norms of any subset of groups, exactly, from each group's own sums."""

    def __init__(self, h: np.ndarray, group_of: np.ndarray, groups: int) -> None:
        x = h[:, 1:]  # [C, T - 1, d], position 0 left out as in the intervals
        self.length = x.shape[1]
        self.contexts = np.bincount(group_of, minlength=groups)
        self.pos_sums = np.stack([x[group_of == g].sum(0) for g in range(groups)])
        flat = [x[group_of == g].reshape(-1, x.shape[2]) for g in range(groups)]
        self.moments = np.stack([f.T @ f for f in flat])

    def __call__(self, keep: np.ndarray) -> tuple[float, float]:
        """(uncentred, centred) relative norms of the groups ``keep`` marks with 1."""
        n_c = int(keep @ self.contexts)
        pos_sum = np.tensordot(keep, self.pos_sums, axes=1)
        mean = pos_sum.sum(0) / (n_c * self.length)
        numerator = np.sqrt(n_c) * np.linalg.norm(pos_sum / n_c - mean, 2)
        second = np.tensordot(keep, self.moments, axes=1)
        centred = second - n_c * self.length * np.outer(mean, mean)
        tops = [np.linalg.eigvalsh(m)[-1] for m in (second, centred)]
        return numerator / np.sqrt(tops[0]), numerator / np.sqrt(tops[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--contexts", type=int, default=64)
    parser.add_argument("--length", type=int, default=128)
    parser.add_argument("--rank", type=int, default=None)
    parser.add_argument("--layers-step", type=int, default=2)
    args = parser.parse_args()
    if args.rank is not None:
        decomposition_stats.SKETCH_RANKS = (args.rank,)
    torch.set_num_threads(2)
    h = hidden_states(args.model, args.contexts, args.length)
    n_layers, n_contexts, length, d = h.shape
    layers = list(range(0, n_layers, args.layers_step))
    groups = decomposition_stats.MAX_GROUPS
    acc = DecompositionAccumulator(layers, n_contexts, length, d, True, groups=groups)
    for start in range(0, n_contexts, 8):
        hidden = {layer: torch.tensor(h[layer, start : start + 8]) for layer in layers}
        acc.update(CapturedBatch(hidden, torch.arange(start, min(start + 8, n_contexts))))
    assert acc.group_sketch is not None, "the sketches do not fit the memory budget"
    rank = int(acc.group_sketch.shape[-1])
    draws = group_draws(groups, N_DRAWS, seed=0)
    group_of = acc.group_of.numpy()
    print(f"{args.model}, {n_contexts} x {length}, {groups} groups, sketch rank {rank} (d = {d})")
    print("layer | exact sd (uncentred, centred) | sketch sd / exact sd (uncentred, centred)")
    ratios: dict[str, list[float]] = {key: [] for key in KEYS}
    exact_of = {layer: ExactDraws(h[layer], group_of, groups) for layer in layers}
    rows = [
        {"skip_first": True, **dict(zip(KEYS, exact_of[layer](np.ones(groups)), strict=True))}
        for layer in layers
    ]
    corrections = sketch_corrections(acc, rows)
    with threadpool_limits(1, user_api="blas"):
        for layer in layers:
            scale = corrections[layer]
            exact, sketched = [], []
            for weights in draws:
                exact.append(exact_of[layer](weights))
                stats, _ = acc.resample(layer, weights, True)
                found = dict(zip(KEYS, relative_norms(stats), strict=True))
                sketched.append([float(found[key] or np.nan) * scale[key] for key in KEYS])
            sd_exact = np.std(exact, axis=0)
            ratio = np.std(sketched, axis=0) / sd_exact
            for key, value in zip(KEYS, ratio, strict=True):
                ratios[key].append(float(value))
            sds = f"{sd_exact[0]:.4f}, {sd_exact[1]:.4f}"
            print(f"{layer:5d} | {sds} | {ratio[0]:.3f}, {ratio[1]:.3f}")
    for key, values in ratios.items():
        print(
            f"{key}: width ratio min {min(values):.3f}, median {statistics.median(values):.3f}, "
            f"max {max(values):.3f}"
        )


if __name__ == "__main__":
    main()
