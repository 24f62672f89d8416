"""The walk's kernels and refactoring check read block by block during the tapped pass
(``AttentionTap.streams``) equal those read from every layer's attention returned at the
end of the pass, bit for bit, and the streamed pass asks the model for no attention tuple."""

from __future__ import annotations

import pytest
import torch

from geomlens.analyses.walk.refactor import AttentionTap, attention_weight_modules
from geomlens.capturing.taps import Taps, fill_taps


def ids_for(view, batch: int = 3, length: int = 12) -> torch.Tensor:
    g = torch.Generator().manual_seed(0)
    return torch.randint(1, int(view.W_E.shape[0]), (batch, length), generator=g)


@pytest.mark.parametrize("name", ["gpt2", "gemma3", "t5", "minilm"])
def test_streamed_attention_tap_equals_the_returned_attentions(name, request, monkeypatch):
    view = request.getfixturevalue(name)
    assert attention_weight_modules(view) is not None
    ids = ids_for(view)
    streamed = AttentionTap(view, len(ids))
    assert streamed.streams
    seen: list[dict] = []
    forward = view.base.forward
    monkeypatch.setattr(view.base, "forward", lambda *a, **k: seen.append(k) or forward(*a, **k))
    fill_taps(view, ids, Taps({"attention": streamed}))
    assert seen and not any(k.get("output_attentions") for k in seen)
    monkeypatch.undo()

    returned = AttentionTap(view, len(ids))
    returned.streams, returned._weights = False, None  # every layer's attention at the end
    fill_taps(view, ids, Taps({"attention": returned}))
    a, b = streamed.state_dict(), returned.state_dict()
    assert a.keys() == b.keys()
    for key in a:
        assert torch.equal(a[key], b[key]), key
    kernel, refactor = streamed.finalize()
    assert kernel.n_windows == len(ids) and refactor.n_tokens == ids.numel()


def test_an_encoder_decoders_kernels_come_from_one_encoder_pass(t5):
    """The tap's decoder and cross-attention kernels, read against the tapped encoder
    pass's output, equal the separate pass that runs the encoder again; the encoder runs
    once per tapped chunk."""
    from types import SimpleNamespace

    from geomlens.analyses.walk.step import decoder_kernels

    ids = ids_for(t5, batch=5, length=10)
    tap = AttentionTap(t5, len(ids))
    calls = []
    handle = t5.base.register_forward_pre_hook(lambda *a: calls.append(1))
    fill_taps(t5, ids, Taps({"attention": tap}))
    handle.remove()
    assert len(calls) == 2  # chunks of 4 and 1 windows; the decoder passes read their output
    own, cross = tap.decoder_finalize()
    windows = SimpleNamespace(input_ids=ids.numpy(), n_contexts=len(ids))
    ref_own, ref_cross = decoder_kernels(t5, windows, len(ids))  # type: ignore[arg-type]
    for a, b in ((own, ref_own), (cross, ref_cross)):
        assert a.n_windows == b.n_windows == len(ids)
        torch.testing.assert_close(a.attn, b.attn, rtol=0, atol=1e-12, equal_nan=True)
        torch.testing.assert_close(a.logits, b.logits, rtol=0, atol=1e-9, equal_nan=True)
