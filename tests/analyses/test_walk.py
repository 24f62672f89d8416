"""The walk analyses against Hugging Face's own computation.

Real SmolLM2 and MiniLM (the session fixtures, switched to eager attention for the
duration of this module), and tiny random GPT-2, T5 and Gemma 3 models for the other
families, a planted position kernel and T5's relative bias.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Iterator
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from safetensors.torch import load_file
from tiny_models import VOCAB, _tiny

from geomlens.analyses.walk.command import run_walk
from geomlens.analyses.walk.kernels import (
    KernelAccumulator,
    bias_kernels,
    negative_self_bias,
)
from geomlens.analyses.walk.refactor import record_attention, refactor_check
from geomlens.analyses.walk.similarity import layer_stack, similarity_maps
from geomlens.analyses.walk.step import default_text, encode_text
from geomlens.analyses.walk.walks import TokenSpace, decoding_walk, encoding_walk
from geomlens.capturing import CaptureConfig
from geomlens.cli import main
from geomlens.errors import GeomlensError
from geomlens.models import ModelView
from geomlens.models.families.gpt2 import GPT2

SHORT = "Q: What is 2 plus 2?\nA: 4.\n\nQ: What colour is snow?\nA: White."


def _eager(view: ModelView) -> Iterator[ModelView]:
    before = view.config._attn_implementation
    view.model.set_attn_implementation("eager")
    try:
        yield view
    finally:
        view.model.set_attn_implementation(before)


@pytest.fixture(scope="module")
def smollm2_eager(smollm2: ModelView) -> Iterator[ModelView]:
    yield from _eager(smollm2)


@pytest.fixture(scope="module")
def minilm_eager(minilm: ModelView) -> Iterator[ModelView]:
    yield from _eager(minilm)


def _ids(n: int, seed: int = 0) -> torch.Tensor:
    return torch.randint(1, VOCAB, (2, n), generator=torch.Generator().manual_seed(seed))


# --------------------------------------------------------------------------- similarity


def _hf_hidden(view: ModelView, ids: torch.Tensor) -> list[torch.Tensor]:
    with torch.inference_mode():
        out = view.base(input_ids=ids[None], output_hidden_states=True)
    return [h[0].double() for h in out.hidden_states]


def _direct_maps(h: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    dot = h @ h.T
    n = h.norm(dim=-1)
    return dot, dot / (n[:, None] * n[None, :])


@pytest.mark.parametrize("name", ["smollm2", "minilm", "gpt2", "t5"])
def test_similarity_maps_equal_hf_hidden_states(name: str, request: pytest.FixtureRequest):
    view = request.getfixturevalue(name)
    tok = view.tokenizer
    ids = _ids(12)[0] if tok is None else torch.tensor(tok(SHORT)["input_ids"])
    hidden, names = layer_stack(view, ids)
    maps = similarity_maps(hidden, names)
    hf = _hf_hidden(view, ids)
    L = view.n_layers
    # HF's hidden states: layers 0..L-1 as captured, then the last one after the final norm
    # for models that have one (all but BERT), which is our "final_norm" layer.
    pairs = [(l, l) for l in range(L)]
    pairs.append((L + 1, L) if names[-1] == "final_norm" else (L, L))
    assert len(names) == (L + 1 if view.family == "bert" else L + 2)
    for ours, theirs in pairs:
        dot, cos = _direct_maps(hf[theirs])
        scale = float(dot.abs().max())
        assert np.abs(maps.dot[ours] - dot.numpy()).max() <= 1e-5 * scale, (ours, theirs)
        assert np.abs(maps.cos[ours] - cos.numpy()).max() <= 1e-5
    assert np.allclose(np.diagonal(maps.cos, axis1=1, axis2=2), 1.0, atol=1e-5)


# --------------------------------------------------------------------------- refactoring


@pytest.mark.parametrize("name", ["gpt2", "t5", "gemma3"])
def test_refactoring_identity_tiny_families(name: str, request: pytest.FixtureRequest):
    view = request.getfixturevalue(name)
    result = refactor_check(view, _ids(7))
    assert result.max_rel_err <= 1e-5
    assert result.head_norm.shape == (view.n_layers, view.n_heads)
    assert (result.head_norm > 0).all()


def test_refactoring_refuses_sdpa(smollm2: ModelView):
    assert smollm2.config._attn_implementation != "eager"  # runs before the eager fixture
    with pytest.raises(GeomlensError, match="eager"):
        record_attention(smollm2, torch.tensor([[1, 2, 3]]))


@pytest.mark.parametrize("name", ["smollm2_eager", "minilm_eager"])
def test_refactoring_identity_real(name: str, request: pytest.FixtureRequest, bbc):
    view = request.getfixturevalue(name)
    ids = torch.tensor(view.tokenizer(default_text())["input_ids"][:64])[None]
    result = refactor_check(view, ids)
    assert result.max_rel_err <= 1e-5, result.rel_err
    assert np.isfinite(result.head_norm_rel).all()


# --------------------------------------------------------------------------- kernels


@pytest.mark.parametrize("stack", ["encoder", "decoder"])
def test_t5_bias_kernel_equals_compute_bias(stack: str, request: pytest.FixtureRequest):
    view = request.getfixturevalue("t5")
    kernels = {k.stack: k for k in bias_kernels(view, max_offset=40)}
    kernel = kernels[stack]
    block = view.blocks[0] if stack == "encoder" else view.decoder_blocks[0]
    T = 30
    with torch.inference_mode():
        bias = block.attention.compute_bias(T, T)[0].double()  # [H, T, T]
    i, j = torch.meshgrid(torch.arange(T), torch.arange(T), indexing="ij")
    col = torch.as_tensor(kernel.offsets).tolist()
    from_kernel = torch.as_tensor(kernel.bias)[:, [[col.index(int(d)) for d in r] for r in i - j]]
    assert torch.equal(from_kernel.float(), bias.float())
    assert kernel.bidirectional == (stack == "encoder")
    assert len(set(kernel.buckets.tolist())) <= view.position.n_buckets


def _planted_gpt2(strengths: list[float], freqs: list[float], T: int) -> ModelView:
    """One GPT-2 block whose logits depend on the offset only: a_h cos(w_h (i - j)).

    Token embeddings are zero; each learned position holds (cos, sin, -cos, -sin) of
    w p for each frequency, so layer norm leaves it on a fixed sphere; head h reads the
    (cos, sin) pair of its frequency into query and key.
    """
    from transformers import GPT2Config

    config = GPT2Config(vocab_size=VOCAB, n_positions=64, n_embd=64, n_layer=1, n_head=4)
    view = _tiny(GPT2, config, seed=5)
    base = view.base
    d, H = view.d_model, view.n_heads
    dh = d // H
    p = torch.arange(base.wpe.weight.shape[0], dtype=torch.float64)[:, None]
    with torch.no_grad():
        base.wte.weight.zero_()
        wpe = torch.zeros(base.wpe.weight.shape, dtype=torch.float64)
        for f, w in enumerate(sorted(set(freqs))):
            c, s = torch.cos(w * p), torch.sin(w * p)
            wpe[:, 4 * f : 4 * f + 4] = torch.cat([c, s, -c, -s], dim=1)
        base.wpe.weight.copy_(wpe.float())
        block = base.h[0]
        block.ln_1.weight.fill_(1.0)
        block.ln_1.bias.zero_()
        W = torch.zeros(d, 3 * d)
        for h, (a, w) in enumerate(zip(strengths, freqs, strict=True)):
            f = sorted(set(freqs)).index(w)
            for k in range(2):  # the (cos, sin) pair into query and key dims
                W[4 * f + k, h * dh + k] = a
                W[4 * f + k, d + h * dh + k] = 1.0
        block.attn.c_attn.weight.copy_(W)
        block.attn.c_attn.bias.zero_()
    return view


def test_empirical_kernel_recovers_planted_shape():
    T, strengths, freqs = 48, [40.0, 20.0, -40.0, 0.0], [0.02, 0.02, math.pi / 4, 0.02]
    view = _planted_gpt2(strengths, freqs, T)
    ids = _ids(T, seed=3)
    rec = record_attention(view, ids)
    from geomlens.analyses.attention.parts import real_logits

    acc = KernelAccumulator(1, view.n_heads, causal=True, n_offsets=16)
    acc.update(0, rec.attn[0], real_logits(view, 0, rec.block_in[0]))
    kernel = acc.finalize()
    assert kernel.logits is not None
    # Two frequencies fill 8 dims with squares summing to 4: layer norm divides by
    # sqrt(4 / d), so each (cos, sin) pair gives (d / 4) cos(w delta), times 1/sqrt(d_head).
    gain = view.d_model / 4 / math.sqrt(view.d_head)
    delta = kernel.offsets.astype(float)
    for h, (a, w) in enumerate(zip(strengths, freqs, strict=True)):
        planted = a * gain * np.cos(w * delta)
        assert np.allclose(kernel.logits[0, h], planted, rtol=1e-3, atol=1e-3), h
    attn = kernel.attn[0]
    assert (np.diff(attn[0]) < 0).all()  # strong low-frequency head: decays with offset
    assert (np.diff(attn[1]) < 0).all()
    assert np.allclose(attn[3], attn[3].mean(), rtol=1e-6)  # zero strength: flat
    neg = negative_self_bias(attn, kernel.offsets)
    assert neg.tolist() == [False, False, True, False]  # only the planted -cos head


def test_kernel_excludes_position_zero_and_counts():
    acc = KernelAccumulator(1, 1, causal=True, n_offsets=4)
    T = 8
    attn = torch.zeros(1, 1, T, T)
    attn[..., 0] = 1.0  # every query on position 0: the sink must not enter the kernel
    acc.update(0, attn)
    k = acc.finalize()
    assert k.query_start == 4
    assert np.allclose(k.attn, 0.0)


# --------------------------------------------------------------------------- walks


def test_encoding_walk_ranks(smollm2: ModelView):
    ids = torch.tensor(smollm2.tokenizer(SHORT)["input_ids"])
    hidden, names = layer_stack(smollm2, ids)
    walk = encoding_walk(smollm2, hidden, names, ids, k=5)
    L = smollm2.n_layers
    assert walk.top_cos.shape == (L + 1, len(ids), 5)
    assert (walk.own_rank_cos[0] < 5).mean() > 0.9  # the walk starts at its own token
    # Last layer by inner product = the model's own prediction (logits).
    with torch.inference_mode():
        logits = smollm2.model(input_ids=ids[None]).logits[0]
    assert torch.equal(torch.as_tensor(walk.top_dot[L, :, 0]), logits.argmax(-1))
    space = TokenSpace.of(smollm2)
    assert (
        walk.next_rank_dot[L]
        == (logits[:-1] > logits[:-1].gather(-1, ids[1:, None])).sum(-1).numpy()
    ).all()
    assert space.vectors.shape[0] == smollm2.W_E.shape[0]


def test_decoding_walk_greedy_matches_generate_and_sampling_is_seeded(smollm2: ModelView):
    ids = torch.tensor(smollm2.tokenizer(SHORT)["input_ids"])
    greedy = decoding_walk(smollm2, ids, 4, "greedy")
    with torch.inference_mode():
        ref = smollm2.model.generate(ids[None], max_new_tokens=4, do_sample=False)
    assert greedy.tokens.tolist() == ref[0, len(ids) :].tolist()
    assert (greedy.top_dot[:, 0] == greedy.tokens).all()
    a = decoding_walk(smollm2, ids, 4, "sample", seed=7)
    b = decoding_walk(smollm2, ids, 4, "sample", seed=7)
    assert a.tokens.tolist() == b.tokens.tolist()
    assert np.array_equal(a.vectors, b.vectors)


class OlderCacheName(torch.nn.Module):
    """A base model whose forward calls the KV cache ``past_key_values``, as transformers
    releases before the rename to ``cache`` did."""

    def __init__(self, base: torch.nn.Module):
        super().__init__()
        self.inner = base

    def forward(self, input_ids, past_key_values=None, use_cache=False):  # type: ignore[no-untyped-def]
        out = self.inner(input_ids=input_ids, cache=past_key_values, use_cache=use_cache)
        return SimpleNamespace(last_hidden_state=out.last_hidden_state, past_key_values=out.cache)


def test_decoding_walk_passes_the_cache_under_either_name(smollm2: ModelView):
    """Dropping the cache would feed one token per step and change the greedy tokens."""
    ids = torch.tensor(smollm2.tokenizer(SHORT)["input_ids"])
    older = dataclasses.replace(smollm2, base=OlderCacheName(smollm2.base))
    walk = decoding_walk(older, ids, 4, "greedy")
    assert walk.tokens.tolist() == decoding_walk(smollm2, ids, 4, "greedy").tokens.tolist()


def test_decoding_walk_refuses_encoders(minilm: ModelView):
    with pytest.raises(GeomlensError, match="decoder-only"):
        decoding_walk(minilm, torch.tensor([101, 102]), 2)


# --------------------------------------------------------------------------- command


def test_default_text_and_sections(smollm2: ModelView):
    ids, sections = encode_text(smollm2, default_text())
    assert 250 <= len(ids) <= 400
    assert sections is not None and sections.max() + 1 == 4
    with pytest.raises(GeomlensError, match="empty"):
        encode_text(smollm2, "  \n")


def test_run_walk_folder_and_determinism(smollm2_eager: ModelView, tmp_path):
    config = CaptureConfig(model="smollm2-135m", contexts=2, length=24, layers=(0, 1))
    kwargs = dict(text=SHORT, generate=3, kernel_windows=2, view=smollm2_eager, progress=False)
    run = run_walk(config, tmp_path / "a", **kwargs)
    walk = run.metrics["walk"]
    assert walk["refactor"]["max_rel_err"] <= 1e-5
    assert set(walk["decoding"]) == {"greedy", "sample"}
    assert 0 <= walk["kernels"]["negative_self_bias_fraction"] <= 1
    control = walk["encoding"]["control"]  # the shuffled text's walk, read as the walk's
    assert "shuffled at token level" in control["kind"] and control["seed"] == config.seed
    assert 0 <= control["frac_never_leave"] <= 1 and control["frac_never_leave_ci"]["n"] > 0
    tensors = load_file(str(run.path / "similarity.safetensors"))
    L = smollm2_eager.n_layers
    assert tensors["input_ids"].shape == (len(smollm2_eager.tokenizer(SHORT)["input_ids"]),)
    assert {f"dot_{l}" for l in range(L + 2)} <= set(tensors) and "cos_0" not in tensors
    assert tensors["dot_0"].dtype == torch.float32
    kernels = load_file(str(run.path / "kernels.safetensors"))
    assert kernels["attn"].shape == (L, smollm2_eager.n_heads, 64)
    for name in ("walk_similarity_cos.html", "walk_kernels.png", "walk_decoding.png"):
        assert (run.path / "figures" / name).exists()
    again = run_walk(config, tmp_path / "b", **kwargs, figures="none")  # figures drawn once
    first = json.loads((run.path / "metrics.json").read_text())
    assert (run.path / "metrics.json").read_bytes() == (again.path / "metrics.json").read_bytes()
    assert first["walk"]["text"]["n_tokens"] == len(tensors["input_ids"])


def test_run_walk_refuses_generate_on_encoder(minilm: ModelView, tmp_path):
    with pytest.raises(GeomlensError, match="decoder-only"):
        run_walk(CaptureConfig(model="minilm-l6"), tmp_path, generate=2, view=minilm)


def test_cli_text_options(tmp_path, capsys):
    assert main(["walk", "--text-file", str(tmp_path / "missing.txt"), "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "cannot read --text-file" in err and err.count("\n") == 1
    # argparse's own errors are one sentence and exit code 2 as well
    assert main(["walk", "--text", "a", "--text-file", "b"]) == 2
    err = capsys.readouterr().err
    assert "not allowed with argument" in err and err.count("\n") == 1


def test_kernel_batch_fits_the_attention_budget():
    from geomlens.capturing.taps import ATTENTION_BYTES, TAP_CHUNK
    from geomlens.capturing.taps import attention_chunk as kernel_batch

    smol = SimpleNamespace(n_layers=30, n_heads=9)
    assert kernel_batch(smol, 128) == TAP_CHUNK  # the default report: unchanged
    big = SimpleNamespace(n_layers=24, n_heads=16)
    assert kernel_batch(big, 1024) == 1  # 1.6 GB a window: one at a time, never none
    assert kernel_batch(big, 256) * 24 * 16 * 256**2 * 4 <= ATTENTION_BYTES
    assert kernel_batch(big, 512, stacks=2) < kernel_batch(big, 512)
