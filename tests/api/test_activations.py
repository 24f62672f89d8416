"""geomlens.activations: hidden states, attention, logits and position/context parts of texts
in memory, each equal to Hugging Face's own outputs (output_hidden_states,
output_attentions, logits) of the same model on the same tokens."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from tiny_models import VOCAB, char_tokenizer

import geomlens
from geomlens.errors import GeomlensError
from geomlens.models import ModelView

TEXTS = ["the cat sat on the mat", "a dog ran far away from home"]


@pytest.fixture(scope="module")
def tiny_gpt2(gpt2: ModelView) -> ModelView:
    """The tiny GPT-2 with a character tokenizer of its vocabulary."""
    return dataclasses.replace(gpt2, tokenizer=char_tokenizer(VOCAB))


def hf_outputs(view: ModelView, text: str) -> tuple[torch.Tensor, object]:
    ids = view.tokenizer(text, return_tensors="pt")["input_ids"]
    with torch.inference_mode():
        out = view.model(input_ids=ids, output_hidden_states=True, output_attentions=True)
    return ids[0], out


def test_decoder_equals_hugging_face(tiny_gpt2: ModelView):
    acts = geomlens.activations(tiny_gpt2, TEXTS, attentions=True, logits=True)
    assert len(acts) == 2 and acts.texts == tuple(TEXTS)
    L = tiny_gpt2.n_layers
    for i, text in enumerate(TEXTS):
        ids, out = hf_outputs(tiny_gpt2, text)
        T = len(ids)
        assert torch.equal(acts.input_ids[i], ids)
        assert len(acts.tokens[i]) == T
        hidden = acts.hidden_states[i]
        assert hidden.shape == (L + 1, T, tiny_gpt2.d_model)  # unpadded, its own tokens
        for layer in range(L):  # HF's last entry is after the final norm
            torch.testing.assert_close(hidden[layer], out.hidden_states[layer][0])
        with torch.inference_mode():
            normed = acts.final_norm(hidden[L])
        torch.testing.assert_close(normed, out.hidden_states[L][0])
        assert acts.attentions is not None and acts.logits is not None
        assert acts.attentions[i].shape == (L, tiny_gpt2.n_heads, T, T)
        for layer in range(L):
            torch.testing.assert_close(acts.attentions[i][layer], out.attentions[layer][0])
        torch.testing.assert_close(acts.logits[i], out.logits[0], rtol=1e-4, atol=1e-4)


def test_encoder_equals_hugging_face_with_special_tokens(minilm: ModelView):
    acts = geomlens.activations(minilm, TEXTS, attentions=True)
    for i, text in enumerate(TEXTS):
        ids, out = hf_outputs(minilm, text)
        assert acts.tokens[i][0] == "[CLS]" and acts.tokens[i][-1] == "[SEP]"
        assert acts.hidden_states[i].shape == (minilm.n_layers + 1, len(ids), minilm.d_model)
        for layer, expected in enumerate(out.hidden_states):  # no final norm: all equal
            torch.testing.assert_close(acts.hidden_states[i][layer], expected[0])
        for layer, expected in enumerate(out.attentions):
            torch.testing.assert_close(acts.attentions[i][layer], expected[0])


def test_parts_add_up_to_the_hidden_states(tiny_gpt2: ModelView):
    """h[c, t] = mu + pos[t] + ctx[c] + resid[c, t] over the shared positions, the parts
    are centred as defined, and the shares sum to one."""
    acts = geomlens.activations(tiny_gpt2, [*TEXTS, "one more text here"], parts=True)
    parts = acts.parts
    assert parts is not None
    T = min(len(ids) for ids in acts.input_ids)
    h = torch.stack([s[:, :T].double() for s in acts.hidden_states], dim=1)
    rebuilt = parts.mu[:, None, None] + parts.pos[:, None] + parts.ctx[:, :, None] + parts.resid
    torch.testing.assert_close(rebuilt, h)
    torch.testing.assert_close(parts.pos.sum(dim=1), torch.zeros_like(parts.mu))
    torch.testing.assert_close(parts.ctx.sum(dim=1), torch.zeros_like(parts.mu))
    shares = parts.shares()
    torch.testing.assert_close(
        shares["pos"] + shares["ctx"] + shares["resid"], torch.ones(len(parts.mu)).double()
    )


@pytest.mark.parametrize(
    ("texts", "options", "words"),
    [
        ("x" * 40, {}, "at most 32 positions"),
        ([], {}, "at least one text"),
        (["fine", "   "], {}, r"texts\[1\] is empty"),
        (["one"], {"parts": True}, "at least 2 different"),
        (["one"], {"logits": "yes"}, "logits takes True or False"),
        (["one", 2], {}, r"texts\[1\] is int"),
    ],
)
def test_refusals_before_any_pass(tiny_gpt2: ModelView, texts, options, words):
    with pytest.raises(GeomlensError, match=words):
        geomlens.activations(tiny_gpt2, texts, **options)


def test_encoder_logits_refused(minilm: ModelView):
    with pytest.raises(GeomlensError, match="decoder-only"):
        geomlens.activations(minilm, "a text", logits=True)


def test_bad_model_refused():
    with pytest.raises(GeomlensError, match="bundled name"):
        geomlens.activations(3, "a text")
