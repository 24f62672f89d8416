"""The causal checks (``analyses/interventions``): held-out windows share no document with
the estimation windows; the measurements after an edit agree with Hugging Face's own loss
and with hand computations; the directions and controls are what they say; the rule
decides as the issue states."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from tiny_models import gpt2  # noqa: F401 (module fixture)

from geomlens.analyses.interventions import directions as dirs
from geomlens.analyses.interventions.checks import ArmResult, run_checks
from geomlens.analyses.interventions.compute import beats_controls, check_record
from geomlens.analyses.interventions.held_out import held_out_windows
from geomlens.analyses.interventions.measure import (
    masked_inputs,
    measure,
    offset_masks,
    offset_mass,
    readout_logits,
)
from geomlens.capturing.edits import project_out
from geomlens.corpus import make_windows
from geomlens.errors import GeomlensError


def ids_for(view, batch: int = 4, length: int = 12) -> torch.Tensor:
    g = torch.Generator().manual_seed(0)
    return torch.randint(1, int(view.W_E.shape[0]), (batch, length), generator=g)


def test_held_out_windows_share_no_document_with_the_estimation_windows(minilm, bbc):
    est = make_windows(bbc, minilm.tokenizer, 40, 16, seed=3)
    held = held_out_windows(bbc, minilm.tokenizer, est, 25, seed=3)
    assert held.n_contexts == 25 and held.length == est.length
    assert not set(held.doc_ids) & set(est.doc_ids)
    assert len(set(held.doc_ids)) == 25
    again = held_out_windows(bbc, minilm.tokenizer, est, 25, seed=3)
    assert again == held  # the same windows every time
    with pytest.raises(GeomlensError, match="held-out"):
        held_out_windows(bbc, minilm.tokenizer, est, len(bbc.documents), seed=3)


def test_the_decoders_loss_is_hugging_faces_and_the_offset_bins_hold_all_attention(gpt2):  # noqa: F811
    ids = ids_for(gpt2)
    m = measure(gpt2, ids, batch_size=3)
    with torch.inference_mode():
        for b in range(len(ids)):
            hf = gpt2.model(input_ids=ids[b : b + 1], labels=ids[b : b + 1]).loss
            assert m.loss[b] == pytest.approx(float(hf), rel=1e-5)
    assert m.attention.shape == (4, gpt2.n_layers, gpt2.n_heads, 4)
    np.testing.assert_allclose(m.attention.sum(-1), 1.0, atol=1e-5)  # the bins cover every key
    assert m.neighbour.shape == (4,)
    assert m.top_tokens.shape == (10,) and m.context.shape == (4, gpt2.d_model)


def test_the_offset_mass_of_a_planted_attention_lands_in_its_bin():
    bins, queries = offset_masks(8, causal=True)
    attn = torch.zeros(1, 2, 8, 8)
    for q in range(8):
        attn[0, 0, q, q] = 1.0  # head 0: itself
        attn[0, 1, q, max(q - 3, 0)] = 1.0  # head 1: three back (offset 2-4 for q >= 5)
    mass = offset_mass(attn, bins, queries)[0]
    assert mass[0].tolist() == [1.0, 0.0, 0.0, 0.0]
    assert mass[1].tolist() == [0.0, 0.0, 1.0, 0.0]
    assert queries.tolist() == [False] * 5 + [True] * 3


def test_an_encoders_loss_is_over_the_masked_positions(minilm):
    ids = ids_for(minilm, length=20)
    masked, chosen = masked_inputs(minilm, ids)
    assert chosen.sum(1).tolist() == [3] * 4  # 15% of the 18 inner positions
    assert not chosen[:, [0, -1]].any()
    assert (masked[chosen] == minilm.tokenizer.mask_token_id).all()
    m = measure(minilm, ids)
    with torch.inference_mode():
        h = minilm.base(input_ids=masked).last_hidden_state
        logp = torch.log_softmax(minilm.logits(h).double(), -1)
    hand = -(logp.gather(-1, ids[..., None])[..., 0] * chosen).sum(1) / chosen.sum(1)
    np.testing.assert_allclose(m.loss, hand.numpy(), rtol=1e-6)


def test_a_readout_without_gain_and_bias_is_the_plain_normalised_state(gpt2):  # noqa: F811
    h = torch.randn(2, 5, gpt2.d_model)
    norm = gpt2.final_norm
    x = (h - h.mean(-1, keepdim=True)) / torch.sqrt(
        h.var(-1, unbiased=False, keepdim=True) + norm.eps
    )
    with torch.inference_mode():
        np.testing.assert_allclose(
            readout_logits(gpt2, h, "no-gain").numpy(), (x @ gpt2.W_U).numpy(), atol=1e-4
        )
        order = torch.arange(gpt2.d_model)  # the identity order: the model's own readout
        np.testing.assert_allclose(
            readout_logits(gpt2, h, "shuffled", order).numpy(),
            gpt2.logits(h).numpy(),
            atol=1e-4,
        )


def test_the_frequency_parts_split_a_planted_positional_part():
    T, d = 40, 6
    t = np.arange(T)[:, None]
    smooth = np.cos(np.pi * (t + 0.5) * 1 / T) * np.eye(d)[0]  # DCT frequency 1: low
    rough = np.cos(np.pi * (t + 0.5) * 30 / T) * np.eye(d)[1]  # frequency 30: high
    low, high = dirs.frequency_parts(smooth + rough)
    np.testing.assert_allclose(low, smooth, atol=1e-12)
    np.testing.assert_allclose(high, rough, atol=1e-12)
    assert abs(dirs.top_directions(low, 1)[:, 0]) @ np.eye(d)[0] == pytest.approx(1.0)


def test_random_bases_are_orthonormal_and_follow_the_covariance():
    cov = np.diag([100.0, 1.0, 1e-6, 1e-6])
    bases = dirs.random_bases(cov, 1, 50, seed=0)
    assert len(bases) == 50
    np.testing.assert_allclose(bases[0].T @ bases[0], np.eye(1), atol=1e-12)
    weight = np.mean([abs(b[0, 0]) for b in bases])
    assert weight > 0.9  # nearly every draw lies along the large direction
    assert max(abs(b[2:, 0]).max() for b in bases) < 1e-2


def test_the_massive_finder_names_planted_coordinates_and_their_positions():
    rng = np.random.default_rng(0)
    means = rng.normal(size=(10, 32))
    means[0, 5] = 3000.0
    means[0, 9] = -800.0
    means[3, 9] = 500.0
    coords, positions = dirs.massive_coordinates(means)
    assert coords == [5, 9] and positions == [0, 3]
    assert dirs.massive_coordinates(rng.normal(size=(10, 32))) == ([], [])
    picks = dirs.random_coordinates(32, 2, coords, 20, seed=0)
    assert all(len(p) == 2 and not set(p) & {5, 9} for p in picks)


def test_the_rule_needs_the_95th_percentile_and_twice_the_median():
    controls = np.array([0.1, 0.2, 0.3, 0.2, 0.25])
    assert beats_controls(0.7, controls, +1)
    assert not beats_controls(0.35, controls, +1)  # over the 95th percentile, under 2x median
    assert not beats_controls(0.7, controls, -1)  # the wrong direction
    assert beats_controls(-0.7, -controls, -1)


def test_a_checks_record_is_its_own_arms_measurement_beside_its_controls(gpt2):  # noqa: F811
    """The positional check's recorded effect is the loss change of measuring its edit by
    hand, with one control per draw; the final norm's check keeps one control per draw."""
    ids = ids_for(gpt2, batch=8, length=16)
    with torch.inference_mode():
        hs = gpt2.model(input_ids=ids, output_hidden_states=True).hidden_states
    from geomlens.analyses.interventions.checks import LayerGeometry

    geo = []
    for layer in (1, 2):
        h = hs[layer].double().reshape(-1, gpt2.d_model).numpy()
        cov = np.cov(h.T)
        pos = hs[layer].double().mean(0).numpy()
        pos -= pos.mean(0)
        geo.append(
            LayerGeometry(layer, pos, h[:8] - h.mean(0), cov, hs[layer].double().mean(0).numpy())
        )
    result = run_checks(
        gpt2, ids, np.arange(8) % 2, geo, checks=("positional", "final_norm"), draws=4
    )
    record = check_record(result["checks"]["positional"], seed=0)
    arm = record["arms"]["positional"]
    assert record["n_controls"] == 4 and len(record["controls"]["loss"]["draws"]) == 4
    assert (
        arm["loss"]["n"] == 8 and arm["loss"]["low"] <= arm["loss"]["value"] <= arm["loss"]["high"]
    )
    k = record["detail"]["k"]
    edited = measure(
        gpt2,
        ids,
        [
            project_out(torch.from_numpy(dirs.top_directions(g.pos, kk)), [g.layer])
            for g, kk in zip(geo, k, strict=True)
        ],
    )
    assert arm["loss"]["value"] == pytest.approx(
        float((edited.loss - result["base"].loss).mean()), rel=1e-6
    )
    assert isinstance(result["checks"]["positional"]["controls"][0], ArmResult)
    norm = check_record(result["checks"]["final_norm"], seed=0)
    assert norm["detail"] == {"bias": True, "kind": "layernorm"} and norm["n_controls"] == 4
    arm = norm["arms"]["final_norm"]["loss"]
    assert arm["n"] == 8 and np.isfinite(arm["value"])
    assert len(norm["controls"]["loss"]["draws"]) == 4
