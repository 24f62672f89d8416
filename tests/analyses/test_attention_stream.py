"""The streamed attention split (over heads and query blocks) against the whole-tensor one.

``reference_attention_parts`` below is the algorithm ``attention_parts`` had before it
streamed (every part [B, H, T, T] at once, built from ``split_logits``), kept here as the
reference: the streamed numbers must equal it to 1e-10. The memory test records the shape
of every tensor torch creates during the split and checks that none spans all heads and
T x T pairs.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pytest
import torch
from family_cases import CASES, SEQ, VOCAB, build_case
from torch.utils._python_dispatch import TorchDispatchMode

from geomlens.analyses.attention import parts as ap
from geomlens.analyses.attention.parts import (
    AttentionParts,
    attention_parts,
    pair_mask,
    parts_of,
    real_logits,
    split_logits,
)
from geomlens.capturing.hooks import hidden_states
from geomlens.models import ModelView
from geomlens.stats import CapturedBatch, DecompositionAccumulator, DecompositionStats

TOL = 1e-10


def reference_attention_parts(
    view: ModelView,
    layer: int,
    hidden: torch.Tensor,
    stats: DecompositionStats,
    heatmap_head: int = 0,
    batch_size: int = 16,
) -> dict[str, Any]:
    """The pre-streaming ``attention_parts``: shares, heatmaps [P, T, T], max_rel_error."""
    C, T = int(hidden.shape[0]), int(hidden.shape[1])
    idx = np.arange(C)
    mask = pair_mask(view, T, np.asarray(stats.positions))
    n_rows = mask.sum(-1, keepdim=True).clamp(min=1)
    names = parts_of(view.blocks[layer])
    P, H = len(names), view.n_heads
    count = 0.0
    s1 = torch.zeros(H, P, dtype=torch.float64)
    s2 = torch.zeros(H, P, P, dtype=torch.float64)
    c2 = torch.zeros(H, P, dtype=torch.float64)
    heat = torch.zeros(P, T, T, dtype=torch.float64)
    max_err, max_real = 0.0, 0.0
    for start in range(0, C, batch_size):
        sl = slice(start, start + batch_size)
        split = split_logits(view, layer, hidden[sl], stats, idx[sl])
        stack = torch.stack([split[p] for p in names], dim=-1)  # [B, H, T, T, P]
        real = real_logits(view, layer, hidden[sl])
        max_err = max(max_err, float((stack.sum(-1) - real).abs().max()))
        max_real = max(max_real, float(real.abs().max()))
        heat += stack[:, heatmap_head].abs().sum(0).permute(2, 0, 1)
        vals = stack[:, :, mask]
        count += vals.shape[0] * vals.shape[2]
        s1 += vals.sum((0, 2))
        s2 += torch.einsum("bhnp,bhnq->hpq", vals, vals)
        m = mask[None, None, :, :, None]
        row_mean = (stack * m).sum(3, keepdim=True) / n_rows[None, None, :, :, None]
        c2 += ((stack - row_mean) * m)[:, :, mask].pow(2).sum((0, 2))
    mean = s1 / count
    cov = s2 / count - mean[:, :, None] * mean[:, None, :]
    var = torch.diagonal(cov, dim1=1, dim2=2)
    logit_var = cov.sum((1, 2))
    var_c = c2 / count
    heatmaps = (heat / C).numpy()
    if not view.is_encoder:
        heatmaps[:, ~np.tril(np.ones((T, T), dtype=bool))] = np.nan
    return {
        "share": (var / var.sum(1, keepdim=True)).numpy(),
        "share_cov": (cov.sum(2) / logit_var[:, None]).numpy(),
        "share_centred": (var_c / var_c.sum(1, keepdim=True)).numpy(),
        "logit_var": logit_var.numpy(),
        "heatmaps": heatmaps,
        "max_rel_error": max_err / max_real,
    }


def assert_equal_to_reference(got: AttentionParts, ref: dict[str, Any]) -> float:
    """Every reported number within TOL (relative to max(1, |reference|)); the largest gap."""
    worst = 0.0
    for key in ("share", "share_cov", "share_centred", "logit_var", "heatmaps"):
        a, b = np.asarray(getattr(got, key)), ref[key]
        assert a.shape == b.shape, key
        assert (np.isnan(a) == np.isnan(b)).all(), key
        ok = ~np.isnan(b)
        gap = float((np.abs(a[ok] - b[ok]) / np.maximum(1.0, np.abs(b[ok]))).max())
        assert gap <= TOL, f"{key}: {gap:.3g}"
        worst = max(worst, gap)
    assert abs(got.max_rel_error - ref["max_rel_error"]) <= TOL
    return worst


_VIEWS: dict[str, ModelView] = {}


def tiny(case_id: str) -> ModelView:
    """The tiny random model of test_families' case ``case_id`` (built once)."""
    if case_id not in _VIEWS:
        _VIEWS[case_id] = build_case(next(c for c in CASES if c.id == case_id))
    return _VIEWS[case_id]


def layer_data(
    view: ModelView, layer: int, C: int, T: int, skip_first: bool
) -> tuple[torch.Tensor, DecompositionStats]:
    """[C, T, d] random-token inputs of block ``layer`` and their decomposition."""
    vocab = VOCAB if view.tokenizer is None else min(VOCAB, len(view.tokenizer))
    ids = torch.randint(2, vocab, (C, T), generator=torch.Generator().manual_seed(5))
    hidden = hidden_states(view, ids, [layer])
    acc = DecompositionAccumulator([layer], C, T, view.d_model, second_moment=False)
    acc.update(CapturedBatch(hidden=hidden, context_index=torch.arange(C)))
    return hidden[layer], acc.finalize(layer, skip_first=skip_first)


# The models: causal with rotary and GQA (llama), causal with LayerNorm and projection
# biases (gpt2), bidirectional post-norm (bert), ALiBi position bias (bloom).
TINY = ["llama", "gpt2", "bert", "bloom"]


@pytest.mark.parametrize("skip_first", [False, True])
@pytest.mark.parametrize("case_id", TINY)
def test_streamed_equals_reference_on_tiny_models(case_id: str, skip_first: bool) -> None:
    """Every block of each tiny model, position 0 kept or skipped, equals the reference."""
    view = tiny(case_id)
    C, T = 5, SEQ + 7
    for block in view.blocks:
        hidden, stats = layer_data(view, block.index, C, T, skip_first)
        ref = reference_attention_parts(view, block.index, hidden, stats, heatmap_head=1)
        # one query row per block, windows in batches of 2: every loop runs several times
        got = attention_parts(
            view, block.index, hidden, stats, heatmap_head=1, batch_size=2, block_bytes=1
        )
        assert got.parts == parts_of(block) and got.heatmap_bin == 1
        assert_equal_to_reference(got, ref)
        # the default budget (whole windows in one block) gives the same numbers
        whole = attention_parts(view, block.index, hidden, stats, heatmap_head=1)
        assert_equal_to_reference(whole, ref)


def test_position_bias_is_a_streamed_part() -> None:
    """ALiBi's bias is the sixth part, sliced per head and query block, and exact."""
    view = tiny("bloom")
    hidden, stats = layer_data(view, 1, 3, 12, False)
    got = attention_parts(view, 1, hidden, stats, block_bytes=1)
    assert got.parts[-1] == ap.BIAS_PART and got.share.shape == (view.n_heads, 6)
    assert got.max_rel_error <= 1e-6


def test_streamed_equals_reference_on_minilm(minilm: ModelView, bbc) -> None:
    """Real weights, real text (bidirectional, post-norm): equal, and exact to 1e-12."""
    from geomlens.corpus import make_windows

    C, T, layer = 3, 40, 2
    windows = make_windows(bbc, minilm.tokenizer, C, T, seed=0)
    hidden = hidden_states(minilm, torch.tensor(windows.input_ids), [layer])
    acc = DecompositionAccumulator([layer], C, T, minilm.d_model, second_moment=False)
    acc.update(CapturedBatch(hidden=hidden, context_index=torch.arange(C)))
    stats = acc.finalize(layer, skip_first=True)
    ref = reference_attention_parts(minilm, layer, hidden[layer], stats, heatmap_head=3)
    got = attention_parts(minilm, layer, hidden[layer], stats, heatmap_head=3, block_bytes=10**5)
    assert_equal_to_reference(got, ref)
    assert got.max_rel_error <= 1e-12


def test_long_heatmaps_are_square_bin_means(monkeypatch: pytest.MonkeyPatch) -> None:
    """Heatmaps of windows over HEATMAP_MAX: means of the full heatmap over square bins
    (over the unmasked pairs of each bin); the shares do not change."""
    view = tiny("llama")
    C, T = 3, 20
    hidden, stats = layer_data(view, 0, C, T, False)
    ref = reference_attention_parts(view, 0, hidden, stats)
    monkeypatch.setattr(ap, "HEATMAP_MAX", 8)
    got = attention_parts(view, 0, hidden, stats, block_bytes=1)
    size = 3  # ceil(20 / 8)
    assert got.heatmap_bin == size and got.heatmaps.shape == (len(got.parts), 7, 7)
    full = np.pad(ref["heatmaps"], ((0, 0), (0, 1), (0, 1)), constant_values=np.nan)
    blocks = full.reshape(len(got.parts), 7, size, 7, size)
    with np.errstate(invalid="ignore"), pytest.warns(RuntimeWarning, match="empty slice"):
        expected = np.nanmean(blocks, axis=(2, 4))
    np.testing.assert_allclose(got.heatmaps, expected, rtol=TOL, atol=0)
    assert np.isnan(got.heatmaps[:, 0, 1]).all() and np.isfinite(got.heatmaps[:, 1, 0]).all()
    for key in ("share", "share_cov", "share_centred"):
        np.testing.assert_allclose(getattr(got, key), ref[key], rtol=0, atol=TOL)


# --------------------------------------------------------------------------- memory


class ShapeLog(TorchDispatchMode):
    """Records the shape of every tensor an operator returns (while ``recording``)."""

    def __init__(self) -> None:
        """An empty log, recording."""
        super().__init__()
        self.shapes: list[tuple[int, ...]] = []
        self.recording = True

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        """Run the operator; log the shapes of the tensors it returns."""
        out = func(*args, **(kwargs or {}))
        if self.recording:
            for t in out if isinstance(out, (tuple, list)) else [out]:
                if isinstance(t, torch.Tensor):
                    self.shapes.append(tuple(t.shape))
        return out


def all_heads_pairs(
    shapes: Sequence[tuple[int, ...]], C: int, H: int, T: int
) -> list[tuple[int, ...]]:
    """The shapes [..., H, T, T] (every head's T x T pairs) or with as many numbers as the
    logits of all heads of the C windows (C x H x T x T)."""
    return [
        s
        for s in shapes
        if int(np.prod(s)) >= C * H * T * T or (len(s) >= 3 and s[-3:] == (H, T, T))
    ]


def paused(log: ShapeLog, fn: Callable[[int], torch.Tensor]) -> Callable[[int], torch.Tensor]:
    """``fn`` with the log paused while it runs (the view's own bias table)."""

    def run(length: int) -> torch.Tensor:
        """The bias table of T = ``length``, unlogged."""
        log.recording = False
        try:
            return fn(length)
        finally:
            log.recording = True

    return run


@pytest.mark.parametrize("case_id", ["llama", "bert", "bloom"])
def test_no_tensor_spans_all_heads_and_pairs(case_id: str) -> None:
    """With a one-row budget the split never creates a tensor [..., H, T, T] or one the
    size of the windows' logits of all heads (C x H x T x T; the one-head heatmaps [P, T, T]
    are smaller), while ``split_logits`` (the control) does."""
    view = tiny(case_id)
    C, T, H = 2, 40, view.n_heads
    hidden, stats = layer_data(view, 1, C, T, False)
    assert max(hidden.numel(), view.blocks[1].heads().W_Q.numel()) < C * H * T * T
    log = ShapeLog()
    block = view.blocks[1]
    if block.attn.bias_fn is not None:  # the view gives the bias whole: [H, T, T], once
        attn = dataclasses.replace(block.attn, bias_fn=paused(log, block.attn.bias_fn))
        block = dataclasses.replace(block, attn=attn)
    blocks = list(view.blocks)
    blocks[1] = block
    view = dataclasses.replace(view, blocks=tuple(blocks))
    with log:
        result = attention_parts(view, 1, hidden, stats, block_bytes=1)
    assert result.max_rel_error <= 1e-6
    assert log.shapes and not all_heads_pairs(log.shapes, C, H, T)
    control = ShapeLog()
    with control:
        split_logits(view, 1, hidden, stats)
    assert all_heads_pairs(control.shapes, C, H, T)
