"""Edits of the residual stream (``capturing.edits``): an edit that changes nothing leaves
Hugging Face's logits and hidden states bit for bit as they were, and planted edits give
what a hand computation gives, on a decoder, an encoder and both stacks of an
encoder-decoder."""

from __future__ import annotations

import pytest
import torch
from tiny_models import gpt2, t5  # noqa: F401 (module fixtures)

from geomlens.capturing.edits import EditError, editing, project_out, set_coordinates, subtract
from geomlens.capturing.hooks import recording


def ids_for(view, batch: int = 2, length: int = 9) -> torch.Tensor:
    g = torch.Generator().manual_seed(0)
    return torch.randint(1, int(view.W_E.shape[0]), (batch, length), generator=g)


def unit(d: int, i: int) -> torch.Tensor:
    e = torch.zeros(d, 1)
    e[i] = 1.0
    return e


def run(view, ids, **kw):
    with torch.inference_mode():
        return view.model(input_ids=ids, output_hidden_states=True, **kw)


@pytest.mark.parametrize("name", ["gpt2", "minilm"])
def test_the_identity_edit_gives_hugging_faces_outputs_exactly(name, request):
    view = request.getfixturevalue(name)
    ids = ids_for(view)
    ref = run(view, ids)
    nothing = project_out(torch.zeros(view.d_model, 0), range(view.n_layers + 1))
    with editing(view, [nothing]):
        out = run(view, ids)
    first = "logits" if "logits" in ref else "last_hidden_state"
    assert torch.equal(ref[first], out[first])
    assert len(ref.hidden_states) == len(out.hidden_states) == view.n_layers + 1
    for a, b in zip(ref.hidden_states, out.hidden_states, strict=True):
        assert torch.equal(a, b)


@pytest.mark.parametrize("name", ["gpt2", "minilm"])
def test_projecting_out_a_coordinate_at_layer_1_zeroes_it_there_and_only_there(name, request):
    view = request.getfixturevalue(name)
    ids = ids_for(view)
    ref = run(view, ids)
    with editing(view, [project_out(unit(view.d_model, 0), [1])]):
        out = run(view, ids)
    assert torch.equal(out.hidden_states[0], ref.hidden_states[0])
    edited = ref.hidden_states[1].clone()
    edited[..., 0] = 0.0
    assert torch.allclose(out.hidden_states[1], edited, atol=1e-6)
    assert out.hidden_states[1][..., 0].abs().max() < 1e-6
    assert not torch.allclose(out.hidden_states[2], ref.hidden_states[2])  # later blocks read it


def test_subtracting_a_vector_at_layer_0_equals_feeding_the_shifted_embedding(gpt2):  # noqa: F811
    view = gpt2
    ids = ids_for(view)
    v = torch.randn(view.d_model, generator=torch.Generator().manual_seed(1))
    with editing(view, [subtract(v, [0])]):
        out = run(view, ids)
    with torch.inference_mode():
        embeds = view.block_input(ids) - v
        hand = view.model(
            inputs_embeds=embeds - view.W_pos[: ids.shape[1]], output_hidden_states=True
        )
    assert torch.allclose(out.logits, hand.logits, atol=1e-5)
    assert torch.allclose(out.hidden_states[0], embeds, atol=1e-6)


def test_setting_coordinates_of_the_last_layer_gives_the_readout_of_the_edited_state(gpt2):  # noqa: F811
    view = gpt2
    ids = ids_for(view)
    last = view.n_layers
    with torch.inference_mode(), recording(view, [last], stop=False) as rec:
        view.base(input_ids=ids)
    coords, values = (3, 7), torch.tensor([5.0, -2.0])
    with editing(view, [set_coordinates(coords, values, [last], positions=(0, 4))]):
        out = run(view, ids)
    h = rec[last].clone()
    h[:, [0, 4], 3] = 5.0
    h[:, [0, 4], 7] = -2.0
    with torch.inference_mode():
        assert torch.allclose(out.logits, view.logits(h), atol=1e-5)


def test_an_encoder_decoders_decoder_stack_is_edited_apart_from_its_encoder(t5):  # noqa: F811
    view = t5
    ids = ids_for(view)
    dec = torch.zeros_like(ids[:, :5])
    ref = run(view, ids, decoder_input_ids=dec)
    nothing = project_out(torch.zeros(view.d_model, 0), [0, 1, 2], stack="decoder")
    with editing(view, [nothing, project_out(torch.zeros(view.d_model, 0), [0, 1, 2])]):
        same = run(view, ids, decoder_input_ids=dec)
    assert torch.equal(same.logits, ref.logits)
    with editing(view, [project_out(unit(view.d_model, 0), [1], stack="decoder")]):
        out = run(view, ids, decoder_input_ids=dec)
    for a, b in zip(out.encoder_hidden_states, ref.encoder_hidden_states, strict=True):
        assert torch.equal(a, b)
    assert out.decoder_hidden_states[1][..., 0].abs().max() < 1e-6
    assert not torch.allclose(out.logits, ref.logits)
    with editing(view, [project_out(unit(view.d_model, 0), [1])]):
        enc = run(view, ids, decoder_input_ids=dec)
    assert enc.encoder_hidden_states[1][..., 0].abs().max() < 1e-6


def test_edits_that_do_not_fit_are_refused_in_one_sentence(gpt2, minilm):  # noqa: F811
    with pytest.raises(EditError, match="layer 9"), editing(gpt2, [subtract(torch.zeros(64), [9])]):
        pass
    with pytest.raises(EditError, match="wide"), editing(gpt2, [subtract(torch.zeros(5), [1])]):
        pass
    decoder = [subtract(torch.zeros(384), [1], stack="decoder")]
    with pytest.raises(EditError, match="no decoder"), editing(minilm, decoder):
        pass
    with pytest.raises(EditError, match="exactly one"):
        set_coordinates((), 0.0, [1])
