"""The walk on both stacks of an encoder-decoder, against Hugging Face's own computation.

Tiny random T5 models (``seq2seq_models.tiny_t5``: v1.1 with an untied, unscaled head and
v1.0 with tied embeddings and the d^-0.5 output scale), built once per module: the
decoder stack's encoding walk reads what the decoder's logits read, the decoding walk
generates what ``generate`` does, the three attention kernels match a direct computation,
the far-position test on a planted kernel, and the command end to end.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from safetensors.torch import load_file
from seq2seq_models import tiny_t5

from geomlens.analyses.attention.parts import self_scores
from geomlens.analyses.walk.kernels import (
    FAR_OFFSETS,
    bias_kernels,
    cross_scores,
    far_amplification,
    far_position_dict,
    query_start,
)
from geomlens.analyses.walk.refactor import record_attention, record_seq2seq_attention
from geomlens.analyses.walk.similarity import decoder_inputs, layer_stack, seq2seq_forward
from geomlens.analyses.walk.step import check_generate, decoder_kernels, kernels_and_refactor
from geomlens.analyses.walk.walks import TokenSpace, comparable, decoding_walk, encoding_walk
from geomlens.cli import main
from geomlens.errors import GeomlensError
from geomlens.models import ModelView, load_model

ROWS = ("t5-v1_1", "t5-v1_0")
TEXT = "Q: What is 2 plus 2?\nA: 4.\n\nQ: What colour is snow?\nA: White."


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("t5")
    return {row: tiny_t5(root, row) for row in ROWS}


@pytest.fixture(scope="module")
def views(folders: dict[str, Path]) -> dict[str, ModelView]:
    return {row: load_model(str(f), attention="eager") for row, f in folders.items()}


def _text_ids(view: ModelView) -> torch.Tensor:
    return torch.tensor(view.tokenizer(TEXT)["input_ids"])


# --------------------------------------------------------------------------- encoding walk


@pytest.mark.parametrize("row", ROWS)
def test_decoder_walk_reads_the_decoder_logits(views: dict[str, ModelView], row: str):
    view = views[row]
    ids = _text_ids(view)
    dec = decoder_inputs(view, ids)
    assert dec[0] == view.config.decoder_start_token_id and torch.equal(dec[1:], ids[:-1])
    hidden, names = layer_stack(view, ids, "decoder")
    L = len(view.decoder_blocks)
    assert names == (*[str(l) for l in range(L + 1)], "final_norm")
    out = seq2seq_forward(view, ids[None], dec[None], output_hidden_states=True)
    # HF's decoder states 0..L-1 are the raw block inputs, its last one is after the norm.
    for l in range(L):
        assert torch.allclose(hidden[l], out.decoder_hidden_states[l][0].float(), atol=1e-6)
    assert torch.allclose(hidden[-1], out.decoder_hidden_states[L][0].float(), atol=1e-5)
    walk = encoding_walk(view, hidden, names, dec, k=5, next_ids=ids, stack="decoder")
    logits = out.logits[0].double()
    assert walk.stack == "decoder" and walk.next_rank_dot.shape == (L + 1, len(ids))
    assert torch.equal(torch.as_tensor(walk.top_dot[L, :, 0]), logits.argmax(-1))
    ranks = (logits > logits.gather(-1, ids[:, None])).sum(-1).numpy()
    assert (walk.next_rank_dot[L] == ranks).all()
    # the readout includes the output scale: inner products at layer L are the logits
    r = comparable(view, hidden, names, "decoder")[L]
    dot, _ = TokenSpace.of(view).scores(r)
    assert torch.allclose(dot.double(), logits, atol=1e-4 * float(logits.abs().max()))


def test_encoder_walk_unchanged_by_the_label(views: dict[str, ModelView]):
    view = views["t5-v1_0"]
    ids = _text_ids(view)
    hidden, names = layer_stack(view, ids)
    main_walk = encoding_walk(view, hidden, names, ids, k=5)
    enc_walk = encoding_walk(view, hidden, names, ids, k=5, stack="encoder")
    assert main_walk.to_dict() == enc_walk.to_dict()
    assert np.array_equal(main_walk.top_dot, enc_walk.top_dot)


# --------------------------------------------------------------------------- decoding walk


@pytest.mark.parametrize("row", ROWS)
def test_greedy_equals_generate_and_logits_equal_forward(views: dict[str, ModelView], row: str):
    view = views[row]
    ids, n = _text_ids(view), 6
    walk = decoding_walk(view, ids, n, "greedy")
    with torch.inference_mode():
        ref = view.model.generate(
            ids[None], max_new_tokens=n, min_new_tokens=n, do_sample=False, eos_token_id=None
        )
    assert ref[0, 0] == view.config.decoder_start_token_id
    assert walk.tokens.tolist() == ref[0, 1:].tolist()
    assert walk.prompt_length == len(ids)
    dec = torch.cat([torch.tensor([view.config.decoder_start_token_id]), ref[0, 1:-1]])
    forward = seq2seq_forward(view, ids[None], dec[None]).logits[0].double()
    steps = view.unembed(torch.as_tensor(walk.vectors), torch.float64)
    assert (steps - forward).abs().max() <= 1e-4
    assert (walk.top_dot[:, 0] == walk.tokens).all()
    a = decoding_walk(view, ids, 4, "sample", seed=3)
    b = decoding_walk(view, ids, 4, "sample", seed=3)
    assert a.tokens.tolist() == b.tokens.tolist() and np.array_equal(a.vectors, b.vectors)


def test_check_generate_counts_decoder_positions(views: dict[str, ModelView]):
    view = views["t5-v1_1"]
    assert view.n_ctx == 512
    check_generate(view, 500, 512)  # the text goes to the encoder, not the decoder
    with pytest.raises(GeomlensError, match="--generate 512 or less"):
        check_generate(view, 10, 513)


# --------------------------------------------------------------------------- kernels


def _np_kernel(A: np.ndarray, offsets: np.ndarray, causal: bool) -> np.ndarray:
    """Mean of A[b, h, i, i - delta] over pairs with i, j >= 1 (causal: i >= q0), in loops."""
    B, H, T, S = A.shape
    q0 = query_start(causal, T)
    out = np.full((H, len(offsets)), np.nan)
    for n, d in enumerate(offsets):
        vals = [
            A[b, :, i, i - d]
            for b in range(B)
            for i in range(T)
            if 1 <= i - d < S and i >= 1 and (not causal or i >= q0)
        ]
        if vals:
            out[:, n] = np.mean(vals, axis=0)
    return out


def test_kernels_of_all_three_attentions_equal_numpy(views: dict[str, ModelView]):
    view = views["t5-v1_1"]
    T = 12
    ids = torch.randint(5, 2000, (3, T), generator=torch.Generator().manual_seed(1))
    windows = SimpleNamespace(input_ids=ids.numpy(), n_contexts=3)
    enc, _ = kernels_and_refactor(view, windows, 3)  # type: ignore[arg-type]
    own, cross = decoder_kernels(view, windows, 3, batch=2)  # type: ignore[arg-type]
    out = seq2seq_forward(view, ids, decoder_inputs(view, ids), output_attentions=True)
    assert torch.allclose(record_attention(view, ids).attn[0], out.encoder_attentions[0])
    for kernel, attns, causal in (
        (enc, out.encoder_attentions, False),
        (own, out.decoder_attentions, True),
        (cross, out.cross_attentions, False),
    ):
        assert kernel.causal == causal and kernel.logits is not None
        for l, a in enumerate(attns):
            ref = _np_kernel(a.double().numpy(), kernel.offsets, causal)
            assert np.allclose(kernel.attn[l], ref, atol=1e-6, equal_nan=True), (causal, l)
    assert (own.offsets >= 0).all() and cross.offsets.min() == -63


def test_decoder_and_cross_scores_give_hf_attention(views: dict[str, ModelView]):
    """The pre-softmax kernels' scores: their softmax is Hugging Face's attention."""
    view = views["t5-v1_0"]
    ids = torch.randint(5, 2000, (2, 10), generator=torch.Generator().manual_seed(2))
    rec = record_seq2seq_attention(view, ids, decoder_inputs(view, ids))
    for l, block in enumerate(view.decoder_blocks):
        own = self_scores(block, rec.decoder_in[l]).masked_fill(~block.attn.mask(10), -torch.inf)
        assert (own.softmax(-1) - rec.self_attn[l].double()).abs().max() <= 1e-6
        cross = cross_scores(block, rec.cross_x[l], rec.encoded)
        assert (cross.softmax(-1) - rec.cross_attn[l].double()).abs().max() <= 1e-6


def test_far_position_on_planted_kernels():
    offsets = np.arange(-63, 64)
    mag = np.abs(offsets).astype(float)
    decaying = np.exp(-mag / 10)
    rising = np.where(mag >= 32, 0.5, 0.125)  # amplifies far positions
    behind = np.where(offsets <= -32, 0.75, 0.125)  # only at keys after the query
    kernel = np.stack(
        [np.stack([decaying, rising, behind]), np.stack([rising, decaying, decaying])]
    )
    amp = far_amplification(kernel, offsets)
    assert amp is not None and amp.tolist() == [[False, True, True], [True, False, False]]
    causal = far_amplification(kernel, offsets, causal=True)
    assert causal is not None and causal.tolist() == [[False, True, False], [True, False, False]]
    scored = far_position_dict(kernel, offsets, causal=False)
    assert scored["far_amplification_fraction"] == pytest.approx(0.5)
    assert scored["far_amplification_heads"] == [[0, 1], [0, 2], [1, 0]]
    short = kernel.copy()
    short[..., np.abs(offsets) > 15] = np.nan  # windows of 16 tokens
    assert far_amplification(short, offsets) is None
    missing = far_position_dict(short, offsets, causal=False)
    assert missing["far_amplification_fraction"] is None
    assert f">= {FAR_OFFSETS[0]}" in missing["far_amplification_reason"]


def test_bias_table_scores(views: dict[str, ModelView]):
    view = views["t5-v1_1"]
    tables = {k.stack: k for k in bias_kernels(view)}
    for stack, k in tables.items():
        scores = k.scores()
        amp = far_amplification(k.bias, k.offsets, causal=stack == "decoder")
        assert amp is not None
        assert scores["far_amplification_fraction"] == pytest.approx(amp.mean())
        assert 0 <= scores["negative_self_bias_fraction"] <= 1


# --------------------------------------------------------------------------- command


def test_walk_command_on_tiny_t5(folders: dict[str, Path], tmp_path: Path, capsys):
    out = tmp_path / "run"
    args = ["walk", "--model", str(folders["t5-v1_0"]), "--contexts", "8", "--length", "16"]
    assert main([*args, "--generate", "4", "--out", str(out), "--quiet"]) == 0
    printed = capsys.readouterr().out
    assert "encoder: own token" in printed and "decoder: own token" in printed
    walk = json.loads((out / "metrics.json").read_text())["walk"]
    assert walk["stack"] == "encoder" and walk["decoding"] is None
    assert walk["kernels"]["far_position"]["far_amplification_fraction"] is None
    assert walk["kernels"]["bias_table"]["stack"] == "encoder"
    dec = walk["decoder"]
    assert dec["layer_names"] == ["0", "1", "2", "final_norm"]
    assert dec["encoding"]["n_positions"] == walk["text"]["n_tokens"]
    assert set(dec["decoding"]) == {"greedy", "sample"}
    assert len(dec["decoding"]["greedy"]["tokens"]) == 4
    assert dec["kernels"]["causal"] is True and dec["kernels"]["bias_table"]["stack"] == "decoder"
    assert dec["cross_attention"]["causal"] is False
    assert dec["cross_attention"]["position_bias"] is None
    assert 0 <= dec["cross_attention"]["negative_self_bias_fraction"] <= 1
    kernels = load_file(str(out / "kernels.safetensors"))
    assert kernels["decoder_attn"].shape == (2, 4, 64)
    assert kernels["cross_attn"].shape == (2, 4, 127)
    assert {"cross_logits", "decoder_logits", "bias_decoder"} <= set(kernels)
    assert (
        load_file(str(out / "encoding_walk_decoder.safetensors"))["next_rank_dot"].shape[1]
        == (walk["text"]["n_tokens"])
    )
    for name in (
        "walk_encoding_ranks_decoder.png",
        "walk_encoding_table_decoder.png",
        "walk_decoding.png",
        "walk_kernels.png",
        "walk_kernels_decoder.png",
        "walk_kernels_cross.png",
    ):
        assert (out / "figures" / name).exists(), name


def test_generate_on_encoder_only_is_refused(tmp_path: Path, capsys):
    assert main(["walk", "--model", "minilm-l6", "--generate", "2", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "is an encoder (drop --generate)" in err and err.count("\n") == 1
