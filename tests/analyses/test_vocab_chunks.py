"""Readouts over the vocabulary in chunks equal the whole-vocabulary computation.

Each readout (walks, logit lens, FFN rows, head probe, top tokens, embedding cosines) runs
with a tiny chunk budget (many chunks) and is compared with the whole [rows, vocab] score
matrix ordered by the tie rule (descending score, equal scores by ascending id; the bottom
is that order read from the end). Ties are planted: a score matrix with few distinct
values, and a tiny model whose embedding rows repeat. A dispatch-mode check records every
tensor the readouts allocate: none has a vocabulary-sized dimension next to another one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import pytest
import torch
import transformers
from torch.utils._python_dispatch import TorchDispatchMode

from geomlens.analyses.common import vocab
from geomlens.analyses.sphere import compute as sph
from geomlens.analyses.sphere import ffn, head_probe, lens
from geomlens.analyses.walk.similarity import layer_stack
from geomlens.analyses.walk.walks import (
    TokenSpace,
    _logits64,
    comparable,
    decoding_walk,
    encoding_walk,
)
from geomlens.capturing.hooks import hidden_states
from geomlens.models import ModelView
from geomlens.models.families import family_for

TEXT = "The cat sat on the mat, and then it slept."


@contextmanager
def budget(n_bytes: int) -> Iterator[None]:
    """Run with ``vocab.CHUNK_BYTES`` lowered (many chunks)."""
    old = vocab.CHUNK_BYTES
    vocab.CHUNK_BYTES = n_bytes
    try:
        yield
    finally:
        vocab.CHUNK_BYTES = old


def ref_top(scores: torch.Tensor, k: int) -> torch.Tensor:
    """[M, k] best ids of whole rows under the tie rule."""
    return vocab.reference_order(scores)[..., :k]


def ref_bottom(scores: torch.Tensor, k: int) -> torch.Tensor:
    """[M, k] worst ids of whole rows: the tie rule's order read from the end."""
    return vocab.reference_order(scores).flip(-1)[..., :k]


def ref_rank(scores: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """[M] number of tokens scoring strictly higher than ids[m] in row m."""
    return (scores > scores.gather(-1, ids[:, None])).sum(-1)


def assert_ranks_match(got: Any, scores: torch.Tensor, ids: torch.Tensor) -> None:
    """``got`` [M] are the ranks of ids in whole rows of ``scores``, except by at most the
    number of tokens whose score lies within float32 rounding of the target's (1e-5 of the
    row's largest magnitude): a product over a chunk of the vocabulary may round those the
    other way than the whole product does, on a BLAS whose order of summation follows the
    matrix's shape."""
    target = scores.gather(-1, ids[:, None])
    tol = 1e-5 * scores.abs().amax(-1, keepdim=True)
    near = ((scores - target).abs() <= tol).sum(-1) - 1  # the target itself left out
    off = (torch.as_tensor(np.asarray(got)) - ref_rank(scores, ids)).abs()
    assert bool((off <= near).all()), (off.tolist(), near.tolist())


@pytest.fixture(scope="module")
def tied_ties() -> ModelView:
    """A tiny Llama (vocab 96, tied embeddings) whose embedding rows 10..19 all equal row 5
    and rows 40..44 equal row 30: every readout of those tokens ties exactly."""
    config = transformers.LlamaConfig(
        vocab_size=96,
        hidden_size=32,
        intermediate_size=48,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
        tie_word_embeddings=True,
    )
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(config)
    with torch.no_grad():
        for p in model.parameters():
            if p.ndim == 1:
                p.add_(0.2 * torch.randn_like(p))
        emb: torch.Tensor = model.model.embed_tokens.weight
        emb[10:20] = emb[5]
        emb[40:45] = emb[30]
    model.eval().requires_grad_(False)
    return family_for(config).build(model, None, "tiny-ties", "memory")


# ------------------------------------------------------------------ the scan itself


@pytest.mark.parametrize("n_bytes", [4 * 5 * 3, 4 * 5 * 17, 2**20])
def test_scan_equals_whole_rows_with_planted_ties(n_bytes: int):
    g = torch.Generator().manual_seed(0)
    S = torch.randint(0, 4, (5, 101), generator=g).float()  # 4 values: ties everywhere
    S[2] = torch.randn(101, generator=g)  # one row without ties
    targets = torch.randint(0, 101, (5, 2), generator=g)
    with budget(n_bytes):
        (got,) = vocab.scan_vocab(
            lambda c: [S[:, c]], 5, 101, k=7, bottom=6, rank_ids=targets, logsumexp=True
        )
        (flat,) = vocab.scan_vocab(lambda c: [S[:, c]], 5, 101, rank_ids=targets[:, 0])
    assert torch.equal(got.top_ids, ref_top(S, 7))
    assert torch.equal(got.top_scores, S.gather(-1, ref_top(S, 7)))
    assert torch.equal(got.bottom_ids, ref_bottom(S, 6))
    assert torch.equal(got.bottom_scores, S.gather(-1, ref_bottom(S, 6)))
    for j in range(2):
        assert torch.equal(got.ranks[:, j], ref_rank(S, targets[:, j]))
    assert torch.equal(flat.ranks, ref_rank(S, targets[:, 0]))
    assert torch.allclose(got.logsumexp, torch.logsumexp(S.double(), -1), atol=1e-12)


def test_tie_rule_lower_id_first_and_bottom_is_the_reversed_order():
    S = torch.tensor([[1.0, 3.0, 3.0, 0.0, 3.0, 0.0]])
    with budget(4):  # one token per chunk
        (got,) = vocab.scan_vocab(lambda c: [S[:, c]], 1, 6, k=2, bottom=2)
    assert got.top_ids.tolist() == [[1, 2]]
    assert got.bottom_ids.tolist() == [[5, 3]]


def test_rank_recounted_when_the_target_alone_rounds_differently():
    S = torch.tensor([[0.5, 2.0, 1.0, 3.0]])

    def score(cols: Any) -> list[torch.Tensor]:
        if isinstance(cols, torch.Tensor):  # the targets alone: off by a rounding step
            return [S[:, cols] + 1e-3]
        return [S[:, cols]]

    with budget(8):
        (got,) = vocab.scan_vocab(score, 1, 4, rank_ids=torch.tensor([2]))
    assert got.ranks.tolist() == [2]


# ------------------------------------------------------------------ readouts, real weights

SMALL = 256 * 2**10


def _walk_reference(view: ModelView, r: torch.Tensor, ids: torch.Tensor, k: int):
    dot, cos = TokenSpace.of(view).scores(r)
    return [(s, ref_top(s, k), ref_rank(s, ids)) for s in (dot, cos)]


def test_encoding_walk_chunked_equals_whole(smollm2: ModelView):
    ids = torch.tensor(smollm2.tokenizer(TEXT)["input_ids"])
    hidden, names = layer_stack(smollm2, ids)
    r = comparable(smollm2, hidden, names)
    picks = [0, len(r) // 2, len(r) - 1]  # the walk reads each layer on its own
    with budget(SMALL):
        walk = encoding_walk(smollm2, hidden[picks], tuple(names[i] for i in picks), ids, k=5)
    for j, li in enumerate(picks):
        (dot, top_d, _), (cos, top_c, _) = _walk_reference(smollm2, r[li], ids, 5)
        assert np.array_equal(walk.top_dot[j], top_d.numpy())
        assert np.array_equal(walk.top_cos[j], top_c.numpy())
        assert_ranks_match(walk.own_rank_dot[j], dot, ids)
        assert_ranks_match(walk.own_rank_cos[j], cos, ids)
        assert_ranks_match(walk.next_rank_dot[j], dot[:-1], ids[1:])
        assert_ranks_match(walk.next_rank_cos[j], cos[:-1], ids[1:])


def test_decoding_walk_chunked_equals_whole(smollm2: ModelView):
    ids = torch.tensor(smollm2.tokenizer(TEXT)["input_ids"])
    with budget(SMALL):
        walk = decoding_walk(smollm2, ids, 3, "greedy", k=5)
        d = torch.as_tensor(walk.vectors[0])
        assert torch.equal(_logits64(smollm2, d), smollm2.unembed(d, torch.float64))
    (_, top_d, _), (_, top_c, _) = _walk_reference(
        smollm2, torch.as_tensor(walk.vectors), torch.as_tensor(walk.tokens), 5
    )
    assert np.array_equal(walk.top_dot, top_d.numpy())
    assert np.array_equal(walk.top_cos, top_c.numpy())


def _prompt_hidden(view: ModelView, ids: list[int]) -> dict[int, torch.Tensor]:
    """Hidden states of the first, a middle and the last layer (readouts go layer by layer)."""
    layers = (0, view.n_layers // 2, view.n_layers)
    hs = hidden_states(view, torch.tensor([ids]), layers)
    return {k: v[0] for k, v in hs.items()}


def _check_trajectory(view: ModelView, ids: list[int], n_bytes: int) -> None:
    hidden = _prompt_hidden(view, ids)
    with budget(n_bytes):
        traj = lens.trajectory(view, ids, hidden, k=5)
    for li, layer in enumerate(traj.layers):
        logits = lens.lens_logits(view, hidden[layer])  # [T, vocab], whole
        assert traj.top_ids[li] == ref_top(logits, 5).tolist()
        want = ref_rank(logits[:-1], torch.tensor(ids[1:])) + 1
        assert traj.next_rank[li][:-1] == want.tolist() and traj.next_rank[li][-1] is None


def test_trajectory_chunked_equals_whole(smollm2: ModelView, minilm: ModelView):
    _check_trajectory(smollm2, smollm2.tokenizer(TEXT)["input_ids"], SMALL)
    _check_trajectory(minilm, minilm.tokenizer(TEXT)["input_ids"], SMALL)


def _check_ffn_rows(view: ModelView, layer: int, n_bytes: int) -> None:
    W_out = view.blocks[layer].mlp().W_out
    rows = W_out[torch.argsort(-W_out.double().norm(dim=-1), stable=True)[:6]]
    _, norm = sph.readout_norm(view)
    whole = sph.norm_linear(rows.float(), norm) @ view.W_U.float()
    with budget(n_bytes):
        got = ffn._read(view, rows, 10, 10)
    assert torch.equal(got.top_ids, ref_top(whole, 10))
    assert torch.equal(got.bottom_ids, ref_bottom(whole, 10))
    assert torch.allclose(got.top_scores, whole.gather(-1, got.top_ids), atol=1e-6)


def test_ffn_rows_chunked_equal_whole(smollm2: ModelView, minilm: ModelView):
    _check_ffn_rows(smollm2, 3, SMALL // 8)
    _check_ffn_rows(minilm, 2, SMALL // 8)
    with budget(SMALL // 8):
        small = ffn.ffn_subupdates(smollm2, [1], n_rows=3, k=5)
    assert small.rows == ffn.ffn_subupdates(smollm2, [1], n_rows=3, k=5).rows


def _check_probe(view: ModelView, layer: int) -> None:
    nouns = torch.tensor([5, 17, 400, 1200, 3000])
    with budget(4 * 2**20):  # about 250 tokens per chunk of normalised keys
        probe = head_probe.probe_heads(view, nouns.tolist(), [layer], k=5)
    hw = view.blocks[layer].heads()
    x = head_probe.normalise_tokens(view, layer, nouns).float()
    x_all = head_probe.normalise_tokens(view, layer, torch.arange(view.W_E.shape[0])).float()
    queries, _ = head_probe._queries_keys(view, layer, hw, x)
    _, keys = head_probe._queries_keys(view, layer, hw, x_all)
    _, rnorm = sph.readout_norm(view)
    for h in (0, view.n_heads - 1):
        table = probe.tables[str(layer)][h]["probes"]
        vo = head_probe._proj(x, hw.W_V[h], head_probe._b(hw.b_V, h)) @ hw.W_O[h].float()
        vo_logits = sph.norm_linear(vo, rnorm) @ view.W_U.float()
        for i, row in enumerate(table):
            keys_ref = ref_top(queries[h] @ keys[h].T, 5)[i]
            assert row["keys_vocab"] == [str(int(j)) for j in keys_ref]
            assert row["vo_tokens"] == [str(int(j)) for j in ref_top(vo_logits, 5)[i]]


def test_head_probe_chunked_equals_whole(smollm2: ModelView, minilm: ModelView):
    _check_probe(smollm2, 2)
    _check_probe(minilm, 1)


def _whole_top_tokens(view: ModelView) -> dict[str, torch.Tensor]:
    W_E = view.W_E.double()
    W_U = view.W_U.double()[:, : W_E.shape[0]]
    _, norm = sph.readout_norm(view)
    e = W_E * view.embedding_scale
    return {
        "norm": W_E.norm(dim=-1),
        "plain": (sph.sphere_construction(e, norm, affine=False) * W_U.T).sum(-1),
        "affine": (sph.sphere_construction(e, norm, affine=True) * W_U.T).sum(-1),
    }


def test_top_tokens_and_cosines_chunked_equal_whole(minilm: ModelView):
    with budget(4 * 2**20):
        top = sph.top_tokens(minilm, k=10)
        cos = sph.embedding_cosines(minilm.W_E, minilm.blocks[0].norm_attn)
    for key, s in _whole_top_tokens(minilm).items():
        assert top.tables[key]["top_ids"] == ref_top(s, 10).tolist()
        assert top.tables[key]["bottom_ids"] == ref_bottom(s, 10).tolist()
        want = [sph.sig(float(s[i])) for i in ref_top(s, 10)]
        assert top.tables[key]["top_scores"] == want
    e = minilm.W_E.double()
    for affine, key in ((False, "plain"), (True, "affine")):
        y = sph.sphere_construction(e, minilm.blocks[0].norm_attn, affine=affine)
        whole = (e * y).sum(-1) / (e.norm(dim=-1) * y.norm(dim=-1)).clamp_min(1e-300)
        assert np.allclose(cos[key], whole.numpy(), rtol=0, atol=1e-12)


# ------------------------------------------------------------------ planted ties, tiny model


def test_readouts_order_planted_ties_by_id(tied_ties: ModelView):
    view = tied_ties
    ids = [5, 12, 30, 41, 7, 5, 60, 19]
    hidden = _prompt_hidden(view, ids)
    with budget(4 * 8 * 3):  # three tokens per chunk of the lens
        traj = lens.trajectory(view, ids, hidden, k=8)
    for li, layer in enumerate(traj.layers):
        logits = lens.lens_logits(view, hidden[layer])
        assert traj.top_ids[li] == ref_top(logits, 8).tolist()
    # the own-token readout of tied rows is equal, so the tables order them by id
    with budget(8 * 6 * 32 * 3):
        top = sph.top_tokens(view, k=12)
    whole = _whole_top_tokens(view)["norm"]
    assert top.tables["norm"]["top_ids"] == ref_top(whole, 12).tolist()
    assert top.tables["norm"]["bottom_ids"] == ref_bottom(whole, 12).tolist()
    hs, names = layer_stack(view, torch.tensor(ids))
    with budget(4 * (3 * len(ids) + 32) * 5):
        walk = encoding_walk(view, hs, names, torch.tensor(ids), k=12)
    r = comparable(view, hs, names)
    (_, top_d, own_d), (_, top_c, _) = _walk_reference(view, r[0], torch.tensor(ids), 12)
    assert np.array_equal(walk.top_dot[0], top_d.numpy())
    assert np.array_equal(walk.top_cos[0], top_c.numpy())
    assert np.array_equal(walk.own_rank_dot[0], own_d.numpy())


# ------------------------------------------------------------------ memory


class Allocations(TorchDispatchMode):
    """Records the shape of every tensor an op allocates (views and in-place results,
    which share an input's storage, are not allocations)."""

    def __init__(self) -> None:
        super().__init__()
        self.shapes: list[tuple[int, ...]] = []

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        inputs = {
            t.untyped_storage().data_ptr()
            for t in torch.utils._pytree.tree_leaves((args, kwargs))
            if isinstance(t, torch.Tensor)
        }
        for t in torch.utils._pytree.tree_leaves(out):
            if isinstance(t, torch.Tensor) and t.untyped_storage().data_ptr() not in inputs:
                self.shapes.append(tuple(t.shape))
        return out


def _allocated(fn: Callable[[], Any]) -> list[tuple[int, ...]]:
    mode = Allocations()
    with budget(2 * 2**20), mode:
        fn()
    return mode.shapes


def test_no_vocabulary_sized_matrix_is_allocated(smollm2: ModelView):
    """With a 2 MiB budget no readout allocates a tensor with a dimension of 2,048 or more
    beside another one, nor a vector longer than the vocabulary: [vocab] vectors
    (per-token values) are the only vocabulary-sized tensors (hidden states such as the
    walk's [L+1, T, d] are not vocabulary-sized)."""
    V = int(smollm2.W_E.shape[0])
    ids = smollm2.tokenizer(TEXT)["input_ids"]
    hidden = _prompt_hidden(smollm2, ids)
    hs, names = layer_stack(smollm2, torch.tensor(ids))
    hs, names = hs[:2], names[:2]  # the walk reads each layer on its own
    runs: dict[str, Callable[[], Any]] = {
        "walk": lambda: encoding_walk(smollm2, hs, names, torch.tensor(ids), k=10),
        "lens": lambda: lens.trajectory(smollm2, ids, hidden),
        "ffn": lambda: ffn.ffn_subupdates(smollm2, [1], n_rows=4, k=5),
        "probe": lambda: head_probe.probe_heads(smollm2, [5, 17, 400], [2], k=5),
        "top_tokens": lambda: sph.top_tokens(smollm2, k=10),
        "cosines": lambda: sph.embedding_cosines(smollm2.W_E, smollm2.blocks[0].norm_attn),
    }
    for name, fn in runs.items():
        shapes = _allocated(fn)
        assert shapes, name
        big = [s for s in shapes if (len(s) == 1 and s[0] > V) or (len(s) > 1 and max(s) >= 2048)]
        assert not big, (name, big[:5])
