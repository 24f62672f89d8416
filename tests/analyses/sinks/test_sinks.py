"""Attention sinks: a planted sink head is found (and a sink away from the first token), the
tap's numbers equal a direct computation on SmolLM2's Hugging Face attentions, the T = 64
numbers equal those of windows cut to 64 tokens, the state merges and round-trips, and the
claims read the numbers with their scope."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch

from geomlens.analyses.sinks.claims import EXIST, FIRST, sink_claims
from geomlens.analyses.sinks.compute import EPSILON, SinkTap, importance
from geomlens.analyses.sinks.step import elsewhere, metrics_block
from geomlens.capturing.taps import Taps, fill_taps
from geomlens.corpus import make_windows
from geomlens.errors import GeomlensError
from geomlens.models.loading import eager_attention


def fake_view(n_layers: int = 2, n_heads: int = 4, encoder: bool = False) -> SimpleNamespace:
    """What the tap reads of a model, with no module that returns attention."""
    return SimpleNamespace(
        name="planted",
        n_layers=n_layers,
        n_heads=n_heads,
        n_ctx=512,
        is_encoder=encoder,
        is_seq2seq=False,
        base=object(),
    )


def causal_uniform(B: int, H: int, T: int) -> torch.Tensor:
    mask = torch.tril(torch.ones(T, T))
    return (mask / mask.sum(-1, keepdim=True)).expand(B, H, T, T).clone()


def planted(B: int = 3, H: int = 4, T: int = 40) -> torch.Tensor:
    """Head 1 puts 0.6 of every query's attention on key 0; head 2 puts 0.5 on key 5 (for
    the queries that see it); the others attend uniformly to what they see."""
    a = causal_uniform(B, H, T)
    rest = torch.tril(torch.ones(T, T))
    sink = 0.4 * rest[1:] / rest[1:].sum(-1, keepdim=True)
    a[:, 1, 1:] = sink
    a[:, 1, 1:, 0] += 0.6
    a[:, 1, 0] = torch.eye(T)[0]
    for i in range(5, T):
        row = torch.zeros(T)
        row[: i + 1] = 0.5 / i
        row[5] = 0.5
        a[:, 2, i] = row
    return a


def test_a_planted_sink_head_and_a_sink_off_the_first_token_are_found():
    attn = planted()
    B, H, T = attn.shape[0], attn.shape[1], attn.shape[-1]
    ids = torch.arange(B * T).reshape(B, T) + 100
    tap = SinkTap(fake_view(n_layers=1, n_heads=H), B)
    tap.update([attn], ids)
    found = tap.finalize()
    alpha0 = found.alpha[0, :, 0]
    expected = (1 + sum(0.6 + 0.4 / (i + 1) for i in range(1, T))) / T
    assert alpha0[1] == pytest.approx(expected)
    assert alpha0[1] > EPSILON and (np.delete(alpha0, 1) < EPSILON).all()
    assert found.above[0].tolist() == [0.0, 1.0, 0.0, 0.0]
    assert found.sink_rate == pytest.approx(1 / H)
    # the sink of the block: head-mean importance is largest at key 0 (the planted head)
    assert (found.positions[:, 0] == 0).all() and (found.tokens[:, 0] == ids[:, 0].numpy()).all()
    # head 2's sink at key 5 is found, and no head is called a sink elsewhere by chance
    away = elsewhere(found)
    assert [(h.layer, h.head, h.position) for h in away] == [(0, 2, 5)]
    assert away[0].alpha == pytest.approx(0.5)  # every query that sees key 5 gives it 0.5


def test_importance_averages_the_queries_that_see_each_key():
    attn = torch.rand(2, 3, 7, 7)
    causal = importance(torch.tril(attn), True)
    full = importance(attn, False)
    for j in range(7):
        assert torch.allclose(causal[..., j], torch.tril(attn)[..., j:, j].double().mean(-1))
        assert torch.allclose(full[..., j], attn[..., :, j].double().mean(-1))


def test_the_state_merges_and_round_trips():
    attn = planted(B=4, T=70)
    ids = torch.randint(0, 50, (4, 70))
    whole = SinkTap(fake_view(1), 4)
    whole.update([attn], ids)
    a, b = SinkTap(fake_view(1), 4), SinkTap(fake_view(1), 4)
    a.update([attn[:1]], ids[:1])
    b.update([attn[1:]], ids[1:])
    a.merge(b)
    again = SinkTap(fake_view(1), 4)
    again.load_state_dict(a.state_dict())
    for key, value in whole.state_dict().items():
        assert torch.allclose(again.state_dict()[key].double(), value.double()), key
    assert whole.finalize().alpha_64 is not None
    with pytest.raises(GeomlensError, match="reads 4 windows"):
        again.update([attn[:1]], ids[:1])


def direct_importance(attn: np.ndarray) -> np.ndarray:
    """[B, H, T, T] causal attention -> [B, H, T] by loops over queries."""
    B, H, T, _ = attn.shape
    out = np.zeros((B, H, T))
    for j in range(T):
        out[..., j] = attn[..., j:, j].mean(-1)
    return out


def test_the_tap_equals_a_direct_computation_on_smollm2(smollm2, bbc):
    windows = make_windows(bbc, smollm2.tokenizer, 2, 72, seed=3)
    ids = torch.tensor(windows.input_ids)
    tap = SinkTap(smollm2, 2)
    assert tap.streams
    fill_taps(smollm2, ids, Taps({"sinks": tap}))
    found = tap.finalize()
    with eager_attention(smollm2), torch.inference_mode():
        attentions = smollm2.base(input_ids=ids, output_attentions=True).attentions
    direct = np.stack([direct_importance(a.double().numpy()) for a in attentions])  # [L, B, H, T]
    assert np.allclose(found.alpha, direct.mean(1), atol=1e-6)
    share = (direct[..., 0] > EPSILON).mean()
    assert found.sink_rate == pytest.approx(share)
    # T = 64 from the same pass equals windows cut to 64 tokens (a causal model)
    cut = SinkTap(smollm2, 2)
    fill_taps(smollm2, ids[:, :64], Taps({"sinks": cut}))
    short = cut.finalize()
    assert found.alpha_64 is not None and found.window_rates_64 is not None
    assert np.allclose(found.alpha_64, short.alpha, atol=1e-5)
    assert np.array_equal(found.window_rates_64, short.window_rates)
    block = metrics_block(found, seed=0)
    assert [r.position for r in block.layers] == [
        int(np.bincount(p).argmax()) for p in found.positions.T
    ]
    assert block.layers[5].token_ids == [int(ids[w, found.positions[w, 5]]) for w in range(2)]


def test_an_encoder_has_no_t64_numbers_and_the_claims_say_it_is_outside(minilm, bbc):
    windows = make_windows(bbc, minilm.tokenizer, 2, 24, seed=3)
    tap = SinkTap(minilm, 2)
    fill_taps(minilm, torch.tensor(windows.input_ids), Taps({"sinks": tap}))
    found = tap.finalize()
    assert not found.causal and found.alpha_64 is None
    metrics = {"sinks": metrics_block(found, seed=0).to_dict()}
    claims = {c.id: c for c in sink_claims(metrics, {"is_encoder": True})}
    assert claims[EXIST].verdict.startswith("not applicable") and claims[EXIST].number is not None


def test_the_claims_decide_from_planted_numbers():
    attn = planted(B=4, T=70)
    tap = SinkTap(fake_view(n_layers=4), 4)
    tap.update([attn] * 4, torch.randint(0, 50, (4, 70)))
    metrics = {"sinks": metrics_block(tap.finalize(), seed=0).to_dict()}
    claims = {c.id: c for c in sink_claims(metrics, {})}
    assert claims[EXIST].verdict == "reproduced" and "T = 64" in claims[EXIST].value
    assert claims[FIRST].verdict == "reproduced" and claims[FIRST].number == 1.0
    uniform = SinkTap(fake_view(n_layers=4), 4)
    uniform.update([causal_uniform(4, 4, 70)] * 4, torch.randint(0, 50, (4, 70)))
    metrics = {"sinks": metrics_block(uniform.finalize(), seed=0).to_dict()}
    assert {c.id: c for c in sink_claims(metrics, {})}[EXIST].verdict == "not reproduced"
    assert sink_claims({}, {})[0].verdict.startswith("not measured")
