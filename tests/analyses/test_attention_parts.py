"""Attention logit parts (position/context split) and W_QK in the positional basis."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from geomlens.analyses.attention import figures as attention_figures
from geomlens.analyses.attention.parts import (
    PARTS,
    AttentionParts,
    attention_parts,
    real_logits,
    split_logits,
)
from geomlens.analyses.attention.qk_basis import (
    Factored,
    fit_low_rank_diagonal,
    fit_low_rank_diagonal_factored,
    fit_low_rank_diagonal_many,
    head_qk,
    head_qk_factors,
    qk_positional_basis,
    qk_rank,
    rotation,
    share_in,
    whole_qk,
)
from geomlens.capturing.hooks import hidden_states
from geomlens.errors import GeomlensError
from geomlens.models import BUNDLED, ModelView, load_model
from geomlens.reporting import figures
from geomlens.stats import CapturedBatch, DecompositionAccumulator, DecompositionStats

C, T = 8, 32


def _eager(name: str) -> ModelView:
    if not BUNDLED[name].installed:
        pytest.skip(f"{name} is not installed")
    return load_model(name, attention="eager")


@pytest.fixture(scope="module")
def smollm2_eager() -> ModelView:
    return _eager("smollm2-135m")


@pytest.fixture(scope="module")
def minilm_eager() -> ModelView:
    return _eager("minilm-l6")


def _layer_data(
    view: ModelView, bbc, layer: int
) -> tuple[torch.Tensor, torch.Tensor, DecompositionAccumulator]:
    from geomlens.corpus import make_windows

    windows = make_windows(bbc, view.tokenizer, C, T, seed=0)
    ids = torch.tensor(windows.input_ids)
    hidden = hidden_states(view, ids, [layer])
    acc = DecompositionAccumulator([layer], C, T, view.d_model, second_moment=False)
    acc.update(CapturedBatch(hidden=hidden, context_index=torch.arange(C)))
    return ids, hidden[layer], acc


@pytest.fixture(scope="module")
def smollm2_layer(smollm2_eager: ModelView, bbc):
    return _layer_data(smollm2_eager, bbc, 3)


@pytest.fixture(scope="module")
def minilm_layer(minilm_eager: ModelView, bbc):
    return _layer_data(minilm_eager, bbc, 2)


def _hf_probs(view: ModelView, ids: torch.Tensor, layer: int) -> torch.Tensor:
    with torch.inference_mode():
        out = view.base(input_ids=ids, output_attentions=True)
    return out.attentions[layer].double()


def _check_split(view: ModelView, ids, hidden, stats: DecompositionStats, layer: int, causal: bool):
    parts = split_logits(view, layer, hidden, stats)
    assert set(parts) == set(PARTS)
    total = sum(parts.values())
    real = real_logits(view, layer, hidden)
    assert total.dtype == torch.float64 and total.shape == (C, view.n_heads, T, T)
    rel = float((total - real).abs().max() / real.abs().max())
    assert rel <= 1e-6, rel
    # the model's own attention probabilities (eager, float32)
    logits = total.clone()
    if causal:
        logits = logits.masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), float("-inf"))
    probs = torch.softmax(logits, -1)
    torch.testing.assert_close(probs, _hf_probs(view, ids, layer), atol=2e-5, rtol=1e-4)
    return parts


@pytest.mark.parametrize("skip_first", [False, True])
def test_smollm2_parts_sum_to_real_logits(
    smollm2_eager: ModelView, smollm2_layer, skip_first: bool
) -> None:
    ids, hidden, acc = smollm2_layer
    stats = acc.finalize(3, skip_first=skip_first)
    _check_split(smollm2_eager, ids, hidden, stats, 3, causal=True)


@pytest.mark.parametrize("skip_first", [False, True])
def test_minilm_parts_sum_to_real_logits(
    minilm_eager: ModelView, minilm_layer, skip_first: bool
) -> None:
    ids, hidden, acc = minilm_layer
    stats = acc.finalize(2, skip_first=skip_first)
    parts = _check_split(minilm_eager, ids, hidden, stats, 2, causal=False)
    # post-norm: no norm before attention, so pos-pos is the same bilinear form for all c
    assert torch.allclose(parts["pos_pos"][0], parts["pos_pos"][-1])


def test_attention_parts_summary(smollm2_eager: ModelView, smollm2_layer) -> None:
    _, hidden, acc = smollm2_layer
    stats = acc.finalize(3, skip_first=True)
    r = attention_parts(smollm2_eager, 3, hidden, stats, heatmap_head=2, batch_size=3)
    H = smollm2_eager.n_heads
    assert r.share.shape == r.share_cov.shape == r.share_centred.shape == (H, len(PARTS))
    assert r.max_rel_error <= 1e-6
    np.testing.assert_allclose(r.share.sum(1), 1.0, atol=1e-12)
    np.testing.assert_allclose(r.share_cov.sum(1), 1.0, atol=1e-9)
    assert (r.share >= 0).all() and (r.logit_var > 0).all()
    assert r.heatmaps.shape == (len(PARTS), T, T)
    assert np.isnan(r.heatmaps[:, 0, 1]).all() and np.isfinite(r.heatmaps[:, 5, 3]).all()
    d = r.to_dict()
    assert d["skip_first"] and len(d["share"]) == H
    # batching does not change the numbers
    r1 = attention_parts(smollm2_eager, 3, hidden, stats, heatmap_head=2, check=False)
    np.testing.assert_allclose(r1.share, r.share, rtol=1e-9)
    np.testing.assert_allclose(r1.heatmaps, r.heatmaps, rtol=1e-9)


def test_the_papers_context_vector_holds_the_residual(
    smollm2_eager: ModelView, smollm2_layer
) -> None:
    """cvec = ctx + resid (the paper's, default) moves resid out of "rest" into the context
    parts; pos-pos and the sum of the parts stay the same."""
    _, hidden, acc = smollm2_layer
    stats = acc.finalize(3, skip_first=True)
    paper = split_logits(smollm2_eager, 3, hidden, stats)
    variant = split_logits(smollm2_eager, 3, hidden, stats, context="ctx")
    torch.testing.assert_close(paper["pos_pos"], variant["pos_pos"], rtol=0, atol=0)
    torch.testing.assert_close(sum(paper.values()), sum(variant.values()), rtol=1e-9, atol=1e-9)
    moved = paper["rest"] - variant["rest"]
    gained = sum(paper[p] - variant[p] for p in ("pos_ctx", "ctx_pos", "ctx_ctx"))
    torch.testing.assert_close(gained, -moved, rtol=1e-9, atol=1e-9)
    a = attention_parts(smollm2_eager, 3, hidden, stats, check=False)
    b = attention_parts(smollm2_eager, 3, hidden, stats, check=False, context="ctx")
    rest = PARTS.index("rest")
    assert a.context == "cvec" and b.to_dict()["context"] == "ctx"
    assert a.share[:, rest].mean() < b.share[:, rest].mean()
    with pytest.raises(GeomlensError, match="context must be one of cvec, ctx"):
        split_logits(smollm2_eager, 3, hidden, stats, context="resid")


def rotary_cos_sin(view: ModelView, length: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Hugging Face's own rotary cos/sin for positions 0..length-1, each [1, T, d_head]."""
    x = torch.zeros(1, length, view.d_model, dtype=view.W_E.dtype)
    with torch.inference_mode():
        cos, sin = view.base.rotary_emb(x, torch.arange(length)[None])
    return cos.double(), sin.double()


def test_rotation_matches_rope(smollm2_eager: ModelView) -> None:
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

    cos, sin = rotary_cos_sin(smollm2_eager, 20)
    g = torch.Generator().manual_seed(0)
    q = torch.randn(1, 1, 20, smollm2_eager.d_head, generator=g, dtype=torch.float64)
    k = torch.randn(1, 1, 20, smollm2_eager.d_head, generator=g, dtype=torch.float64)
    qr, kr = apply_rotary_pos_emb(q, k, cos, sin)
    for i, j in [(15, 4), (7, 7), (19, 0)]:
        expected = float(qr[0, 0, i] @ kr[0, 0, j])
        got = float(q[0, 0, i] @ rotation(smollm2_eager, i - j) @ k[0, 0, j])
        assert got == pytest.approx(expected, rel=1e-5, abs=1e-5)


def test_low_rank_diagonal_fit() -> None:
    rng = np.random.default_rng(1)
    k = 12
    A, B = rng.standard_normal((k, 2)), rng.standard_normal((k, 2))
    planted = A @ B.T + np.diag(rng.standard_normal(k))
    fit = fit_low_rank_diagonal(planted, rank=2, iterations=2000)
    assert fit.residual < 1e-6
    np.testing.assert_allclose(fit.low_rank + np.diag(fit.diagonal), planted, atol=1e-5)
    noise = fit_low_rank_diagonal(rng.standard_normal((k, k)), rank=2)
    assert noise.residual > 0.5
    again = fit_low_rank_diagonal(planted, rank=2, iterations=2000)
    assert np.array_equal(again.low_rank, fit.low_rank)
    # fitted together (one batched SVD per step), each matrix gets its own fit exactly
    noise_matrix = rng.standard_normal((k, k))
    both = fit_low_rank_diagonal_many(np.stack([planted, noise_matrix]), rank=2, iterations=2000)
    assert np.array_equal(both[0].low_rank, fit.low_rank)
    alone = fit_low_rank_diagonal(noise_matrix, rank=2, iterations=2000)
    assert np.array_equal(both[1].low_rank, alone.low_rank)
    assert both[1].residual == alone.residual


def test_whole_matrix_fit_matches_the_dense_fit_and_recovers_a_planted_structure() -> None:
    rng = np.random.default_rng(0)
    d, m = 60, 12
    A, B = rng.standard_normal((d, m)), rng.standard_normal((d, m))
    residual, P, R = fit_low_rank_diagonal_factored(Factored(A, B), iterations=3000, tol=1e-12)
    dense = fit_low_rank_diagonal(A @ B.T, iterations=3000, tol=1e-12)
    assert residual == pytest.approx(dense.residual, abs=1e-9)
    np.testing.assert_allclose(P @ R.T, dense.low_rank, atol=1e-6)
    # planted: a rank-2 part inside a 10-dim subspace U, plus a diagonal, as factors
    d = 300
    U = np.linalg.qr(rng.standard_normal((d, 10)))[0]
    u, v = U[:, :2] @ rng.standard_normal((2, 2)), U[:, :2] @ rng.standard_normal((2, 2))
    diagonal = np.diag(0.05 * rng.standard_normal(d))
    planted = Factored(np.hstack([10 * u, diagonal]), np.hstack([v, np.eye(d)]))
    fit = whole_qk(planted, U, rank=2, seed=0)
    assert fit.residual < 1e-4 and fit.in_basis > 1 - 1e-9
    # a random head of the same shape: most of it is left, and its low-rank part is in U
    # about as much as any 2 random directions are (k / d = 0.033)
    assert fit.baseline_residual > 0.9 and fit.baseline_in_basis < 0.15
    assert share_in(U, U[:, :2], U[:, :2]) == pytest.approx(1.0)


def test_qk_basis_real_smollm2(smollm2_eager: ModelView, smollm2_layer) -> None:
    _, _, acc = smollm2_layer
    stats = acc.finalize(3, skip_first=True)
    r = qk_positional_basis(smollm2_eager, 3, stats, k=10, rank=2, heads=[0, 4])
    assert [h.head for h in r.heads] == [0, 4] and r.singular_values.shape == (10,)
    for h in r.heads:
        assert h.matrix.shape == (10, 10)
        assert 0.0 <= h.fit.residual <= 1.0 and 0.0 < h.baseline_residual <= 1.0
        assert 0.0 < h.share_in_basis <= 1.0
        assert h.whole is not None and 0.0 < h.whole.residual < h.whole.baseline_residual < 1.0
        assert 0.0 <= h.whole.in_basis <= 1.0
    W_Q, W_K = head_qk_factors(smollm2_eager, 3)
    torch.testing.assert_close(W_Q @ W_K.transpose(1, 2), head_qk(smollm2_eager, 3))
    # by default each head takes its own ScreeNOT rank, in every fit and baseline
    own = qk_positional_basis(smollm2_eager, 3, stats, k=10, heads=[0, 4])
    assert own.rank is None
    for h in own.heads:
        assert h.rank == qk_rank(Factored(W_Q[h.head].numpy(), W_K[h.head].numpy()))
        assert h.whole is not None and h.whole.rank == h.rank
    assert {"whole_residual", "whole_low_rank_in_basis"} <= set(r.to_dict()["heads"][0])
    rot = qk_positional_basis(smollm2_eager, 3, stats, k=10, heads=[0], rotary_offset=5)
    assert not np.allclose(rot.heads[0].matrix, r.heads[0].matrix)
    assert r.to_dict()["heads"][1]["head"] == 4


def _fig_ok(fig) -> None:
    import io

    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    assert buf.getvalue()[:4] == b"\x89PNG"


def _fake_parts(causal: bool = True) -> AttentionParts:
    rng = np.random.default_rng(0)
    share = rng.random((4, 5))
    heat = rng.random((5, 6, 6))
    if causal:
        heat[:, ~np.tril(np.ones((6, 6), dtype=bool))] = np.nan
    return AttentionParts(
        layer=1,
        parts=PARTS,
        share=share / share.sum(1, keepdims=True),
        share_cov=share - 0.3,
        share_centred=share,
        logit_var=np.ones(4),
        heatmap_head=0,
        heatmaps=heat,
        max_rel_error=0.0,
        causal=causal,
        skip_first=True,
        n_contexts=2,
        n_positions=6,
    )


@pytest.mark.parametrize("which", ["share", "share_cov"])
def test_figure_part_shares(which: str) -> None:
    _fig_ok(attention_figures.part_shares(_fake_parts(), which))


def test_figure_part_heatmaps() -> None:
    _fig_ok(attention_figures.part_heatmaps(_fake_parts()))


def test_figure_qk_matrix(smollm2_eager: ModelView, smollm2_layer, tmp_path) -> None:
    _, _, acc = smollm2_layer
    r = qk_positional_basis(smollm2_eager, 3, acc.finalize(3), k=6, heads=[1])
    fig = attention_figures.qk_matrix(r)
    _fig_ok(fig)
    assert figures.save(fig, tmp_path / "a" / "qk.png").stat().st_size > 0


def test_gpt2_layernorm_parts_sum_to_real_logits() -> None:
    """Pre-LayerNorm with gain, beta and q/k biases off their defaults (tiny random GPT-2)."""
    from transformers import GPT2Config, GPT2LMHeadModel

    from geomlens.models.families.gpt2 import GPT2

    config = GPT2Config(vocab_size=50, n_positions=16, n_embd=32, n_layer=2, n_head=4)
    torch.manual_seed(0)
    model = GPT2LMHeadModel._from_config(config, attn_implementation="eager").eval()
    with torch.no_grad():
        for p in model.parameters():
            if p.ndim == 1:
                p.add_(0.2 * torch.randn_like(p))
    view = GPT2.build(model.requires_grad_(False), None, "tiny", "memory")
    ids = torch.randint(0, 50, (6, 16), generator=torch.Generator().manual_seed(1))
    hidden = hidden_states(view, ids, [1])
    acc = DecompositionAccumulator([1], 6, 16, 32, second_moment=False)
    acc.update(CapturedBatch(hidden=hidden, context_index=torch.arange(6)))
    stats = acc.finalize(1)
    parts = split_logits(view, 1, hidden[1], stats)
    total = sum(parts.values())
    real = real_logits(view, 1, hidden[1])
    assert float((total - real).abs().max() / real.abs().max()) <= 1e-6
    causal = torch.ones(16, 16, dtype=torch.bool).tril()
    probs = torch.softmax(total.masked_fill(~causal, float("-inf")), -1)
    torch.testing.assert_close(probs, _hf_probs(view, ids, 1), atol=2e-5, rtol=1e-4)


def test_qk_basis_equals_the_dense_w_qk_without_forming_it() -> None:
    """The positional-basis W_QK and its share, computed from the factors (no [H, d, d]
    product, no [d, d] gain), equal the dense formula G W_Q W_K^T G^T with LayerNorm's
    centring written as a matrix (tiny random GPT-2, gains off 1)."""
    from transformers import GPT2Config, GPT2LMHeadModel

    from geomlens.analyses.attention.qk_basis import positional_basis
    from geomlens.models.families.gpt2 import GPT2

    config = GPT2Config(vocab_size=50, n_positions=16, n_embd=32, n_layer=2, n_head=4)
    torch.manual_seed(0)
    model = GPT2LMHeadModel._from_config(config, attn_implementation="eager").eval()
    with torch.no_grad():
        for p in model.parameters():
            if p.ndim == 1:
                p.add_(0.2 * torch.randn_like(p))
    view = GPT2.build(model.requires_grad_(False), None, "tiny", "memory")
    ids = torch.randint(0, 50, (6, 16), generator=torch.Generator().manual_seed(1))
    acc = DecompositionAccumulator([1], 6, 16, 32, second_moment=False)
    acc.update(CapturedBatch(hidden=hidden_states(view, ids, [1]), context_index=torch.arange(6)))
    stats = acc.finalize(1)
    basis = qk_positional_basis(view, 1, stats, k=4, whole_matrix=False)

    block = view.blocks[1]
    w, gain = block.heads(), block.attn_input_norm.weight.double()
    G = (torch.eye(32, dtype=torch.float64) - 1.0 / 32) @ torch.diag(gain)
    dense = (G @ w.W_Q.double()) @ (G @ w.W_K.double()).transpose(1, 2)  # [H, d, d]
    U = torch.as_tensor(positional_basis(stats, 4)[0])
    for head in basis.heads:
        want = U.T @ dense[head.head] @ U
        np.testing.assert_allclose(head.matrix, want.numpy(), rtol=1e-9, atol=1e-12)
        share = float(torch.linalg.norm(want) / torch.linalg.norm(dense[head.head]))
        assert head.share_in_basis == pytest.approx(share, rel=1e-9)
