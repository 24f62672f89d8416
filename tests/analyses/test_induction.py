"""Induction heads: a tiny GPT-2 built to copy, and real SmolLM2."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from geomlens.analyses.attention import figures as attention_figures
from geomlens.analyses.attention.induction import (
    induction_heads,
    repeated_tokens,
    target_masks,
)
from geomlens.errors import GeomlensError
from geomlens.models import BUNDLED, ModelView, load_model

V, P = 16, 16  # vocabulary, positions
D = V + P + V  # token one-hot | position one-hot | previous-token slot
TOK, POS, PREV = slice(0, V), slice(V, V + P), slice(V + P, D)
N_HEAD = 3
PREV_HEAD, INDUCTION_HEAD = 0, 1  # block 0 head 0 (previous token), block 1 head 1


def planted_copier() -> ModelView:
    """A 2-block GPT-2 whose weights implement a previous-token head and an induction head.

    Embeddings are centred one-hots (every row sums to zero and all have the same norm),
    so LayerNorm with gain 1 and bias 0 only rescales, by the same factor everywhere. MLPs
    and all other heads are zero (the others attend uniformly and write nothing).
    """
    from transformers import GPT2Config, GPT2LMHeadModel

    from geomlens.models.families.gpt2 import GPT2

    config = GPT2Config(
        vocab_size=V,
        n_positions=P,
        n_embd=D,
        n_layer=2,
        n_head=N_HEAD,
        bos_token_id=0,
        eos_token_id=0,
    )
    model = GPT2LMHeadModel._from_config(config, attn_implementation="eager").eval()
    dh, a = D // N_HEAD, 3.0
    with torch.no_grad():
        for p in model.parameters():
            p.zero_()
        base = model.transformer
        base.wte.weight[:, TOK] = torch.eye(V) - 1.0 / V
        base.wpe.weight[:, POS] = torch.eye(P) - 1.0 / P
        for blk in base.h:
            blk.ln_1.weight.fill_(1.0)
            blk.ln_2.weight.fill_(1.0)
        base.ln_f.weight.fill_(1.0)
        # block 0: the query at t reads e_t, the key at j reads e_{j+1}; the value (token)
        # is written into the previous-token slot
        W = base.h[0].attn.c_attn.weight  # [D, 3D]: q | k | v (Conv1D, [in, out])
        h0 = slice(PREV_HEAD * dh, (PREV_HEAD + 1) * dh)
        W[POS, 0 * D :][:, h0] = a * torch.eye(P)
        W[POS, 1 * D :][:, h0] = a * torch.eye(P).roll(1, 1)
        W[POS, 1 * D :][P - 1, h0] = 0.0
        W[TOK, 2 * D :][:, h0] = torch.eye(V)
        base.h[0].attn.c_proj.weight[h0, PREV] = torch.eye(V)
        # block 1: the query reads the current token, the key the previous-token slot
        W = base.h[1].attn.c_attn.weight
        h1 = slice(INDUCTION_HEAD * dh, (INDUCTION_HEAD + 1) * dh)
        W[TOK, 0 * D :][:, h1] = a * torch.eye(V)
        W[PREV, 1 * D :][:, h1] = a * torch.eye(V)
    model.requires_grad_(False)
    return GPT2.build(model, None, "planted-copier", "memory")


@pytest.fixture(scope="module")
def copier() -> ModelView:
    return planted_copier()


def test_repeated_tokens() -> None:
    view = planted_copier()
    ids = repeated_tokens(view, 8, 3, seed=4)
    assert ids.shape == (3, 16) and torch.equal(ids[:, :8], ids[:, 8:])
    assert torch.equal(ids, repeated_tokens(view, 8, 3, seed=4))
    assert int(ids.max()) < V


def test_planted_induction_head_is_found(copier: ModelView) -> None:
    r = induction_heads(copier, n=8, batch=8, seed=0, top_k=3)
    assert r.scores.shape == (2, N_HEAD)
    assert (r.scores >= 0).all() and (r.scores <= 1).all()
    assert r.found == ((1, INDUCTION_HEAD),)
    assert r.top[0] == (1, INDUCTION_HEAD)
    assert r.scores[1, INDUCTION_HEAD] > 0.6
    s = r.splits[0]
    assert (s.layer, s.head) == (1, INDUCTION_HEAD) and s.score == s.induction
    total = s.same_token + s.neighbours + s.induction + s.other
    assert total == pytest.approx(1.0, abs=1e-6)
    assert s.neighbours == pytest.approx(s.neighbours_local + s.neighbours_earlier, abs=1e-9)
    assert len(r.splits) == 3 and r.to_dict()["found"] == [[1, INDUCTION_HEAD]]


def test_previous_token_head_attends_back(copier: ModelView) -> None:
    from geomlens.analyses.attention.induction import attention_weights

    attn = attention_weights(copier, repeated_tokens(copier, 8, 2))
    back = attn[0, :, PREV_HEAD].diagonal(offset=-1, dim1=-2, dim2=-1)
    assert float(back.min()) > 0.95


def test_target_masks_are_disjoint() -> None:
    m = target_masks(10)
    parts = m["same_token"].int() + m["neighbours"].int() + m["induction"].int()
    assert int(parts.max()) == 1
    assert torch.equal(m["neighbours"], m["neighbours_local"] | m["neighbours_earlier"])
    row = 5  # query i = 15
    assert torch.nonzero(m["neighbours"][row]).flatten().tolist() == [3, 4, 7, 13, 14, 15]


def test_needs_eager_and_decoder(smollm2: ModelView, minilm: ModelView) -> None:
    with pytest.raises(GeomlensError, match="eager"):
        induction_heads(smollm2, n=4, batch=1)
    with pytest.raises(GeomlensError, match="decoder"):
        induction_heads(minilm, n=4, batch=1)


def test_real_smollm2_induction() -> None:
    if not BUNDLED["smollm2-135m"].installed:
        pytest.skip("smollm2-135m is not installed")
    view = load_model("smollm2-135m", attention="eager")
    r = induction_heads(view, n=32, batch=2, seed=0)
    assert r.scores.shape == (30, 9)
    assert (r.scores >= 0).all() and (r.scores <= 1).all()
    assert len(r.found) >= 3 and r.scores.max() > 0.7
    assert r.scores[:10].max() < 0.1  # early blocks do not copy
    best = r.found[0]
    assert 15 <= best[0] <= 25


def test_induction_figures(copier: ModelView) -> None:
    import io

    r = induction_heads(copier, n=8, batch=2, top_k=2)
    for fig in (attention_figures.induction_scores(r), attention_figures.induction_splits(r)):
        buf = io.BytesIO()
        fig.savefig(buf, format="png")
        assert buf.getvalue()[:4] == b"\x89PNG"
    assert np.isfinite(r.scores).all()


def test_an_encoder_decoder_is_scored_on_its_decoder_self_attention() -> None:
    """T5 with 2 encoder and 3 decoder blocks: one score row per decoder block, equal to
    the mean induction attention of the decoder's own self-attention weights."""
    from transformers import T5Config, T5ForConditionalGeneration

    from geomlens.models.families.t5 import T5

    config = T5Config(
        vocab_size=64,
        d_model=32,
        d_kv=8,
        d_ff=48,
        num_layers=2,
        num_decoder_layers=3,
        num_heads=4,
        relative_attention_num_buckets=8,
        relative_attention_max_distance=16,
        dropout_rate=0.0,
        decoder_start_token_id=0,
        eos_token_id=1,
    )
    config._attn_implementation = "eager"
    torch.manual_seed(3)
    model = T5ForConditionalGeneration(config).eval()
    view = T5.build(model, None, "tiny-t5", "memory")
    n = 6
    result = induction_heads(view, n=n, batch=2, seed=1)
    assert result.scores.shape == (3, 4)
    ids = repeated_tokens(view, n, 2, seed=1)
    with torch.inference_mode():
        out = model(
            input_ids=torch.ones(2, 1, dtype=torch.long),
            decoder_input_ids=ids,
            output_attentions=True,
        )
    i = torch.arange(n, 2 * n)
    expected = torch.stack(
        [a[:, :, i, i - n + 1].double().mean((0, 2)) for a in out.decoder_attentions]
    )
    np.testing.assert_allclose(result.scores, expected.numpy(), atol=1e-6)
