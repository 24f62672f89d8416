"""Every family adapter against Hugging Face's own outputs, on tiny random models.

One row of ``CASES`` per family (several where a family has layouts or options real
checkpoints use: partial rotary, ALiBi, soft-capping, sliding windows, MoE, parallel
blocks). Each model is built from its config here (no downloads), with norm gains and
biases moved off their initial values, and checked for:

- the on-load check (``models.check``): attention probabilities rebuilt from the view's
  per-head Q/K (rotary, scale, bias, soft-cap, window) equal to HF's eager attention
  weights, every block rebuilt from the view alone (its layout, norms, per-head attention,
  MLP or experts) equal to the block's real output, the logits equal to HF's;
- hidden states captured by geomlens's hooks equal to HF's ``output_hidden_states``;
- the layer-norm construction on every norm and the per-head refactoring of attention;
- the logit lens at the last layer and the position/context split of the scores.

Adding a family: its adapter file, its line in ``models/families/__init__.py``, and one
row in ``tests/family_cases.py`` (docs/models.md, "Adding a family").
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
import transformers
from family_cases import CASES, SEQ, SEQ2SEQ_CASES, VOCAB, Case, build_case

from geomlens.analyses.attention.parts import BIAS_PART, parts_of, real_logits, split_logits
from geomlens.analyses.sphere.lens import lens_logits
from geomlens.analyses.walk.refactor import refactor_check
from geomlens.capturing.hooks import hidden_states
from geomlens.errors import GeomlensError
from geomlens.models import ModelView
from geomlens.models.check import check_view
from geomlens.models.families import FAMILIES, family_for
from geomlens.models.view import NormView
from geomlens.stats import CapturedBatch, DecompositionAccumulator

ATOL = 2e-5


_VIEWS: dict[str, ModelView] = {}


@pytest.fixture(params=CASES, ids=[c.id for c in CASES])
def view(request: pytest.FixtureRequest) -> ModelView:
    case: Case = request.param
    if case.id not in _VIEWS:
        _VIEWS[case.id] = build_case(case)
    return _VIEWS[case.id]


def _ids(view: ModelView) -> torch.Tensor:
    g = torch.Generator().manual_seed(3)
    return torch.randint(2, VOCAB, (2, SEQ), generator=g)


_HF: dict[str, Any] = {}


def _hf(view: ModelView, ids: torch.Tensor) -> Any:
    """Hugging Face's outputs on ``_ids(view)`` (one forward per row, shared by the tests)."""
    if view.name not in _HF:
        with torch.inference_mode():
            _HF[view.name] = view.model(
                input_ids=ids, output_hidden_states=True, output_attentions=True
            )
    return _HF[view.name]


def _close(a: torch.Tensor, b: torch.Tensor, what: str, atol: float = ATOL) -> None:
    scale = max(1.0, float(b.abs().max()))
    err = float((a.double() - b.double()).abs().max())
    assert err <= atol * scale, f"{what}: max abs difference {err:.3g} (scale {scale:.3g})"


def _geometric(norm: NormView, x: torch.Tensor) -> torch.Tensor:
    """Molina's construction: project (LayerNorm), scale onto the sqrt(d) sphere, gamma, beta."""
    x = x.double()
    d = x.shape[-1]
    if norm.kind == "layernorm":
        x = x - x.mean(-1, keepdim=True)
    y = x * (d**0.5) / torch.sqrt((x * x).sum(-1, keepdim=True) + d * norm.eps)
    y = y * norm.weight.double()
    return y if norm.bias is None else y + norm.bias.double()


# --------------------------------------------------------------------------- checks


def test_every_family_has_a_case() -> None:
    covered = {c.family for c in CASES + SEQ2SEQ_CASES}
    missing = [f.name for f in FAMILIES if f.name not in covered and f.name != "t5"]
    assert not missing, f"families without a row in CASES: {missing}"


@pytest.fixture(params=SEQ2SEQ_CASES, ids=[c.id for c in SEQ2SEQ_CASES])
def seq2seq(request: pytest.FixtureRequest) -> ModelView:
    case: Case = request.param
    if case.id not in _VIEWS:
        _VIEWS[case.id] = build_case(case)
    return _VIEWS[case.id]


def test_encoder_decoders_pass_the_on_load_check(seq2seq: ModelView) -> None:
    """Both stacks' blocks (the decoder's with cross-attention), their attention
    probabilities and the logits rebuilt from the view equal Hugging Face's."""
    check = check_view(seq2seq)
    assert check.blocks == len(seq2seq.blocks) + len(seq2seq.decoder_blocks)
    assert "cross-attention probabilities" in check.max_error
    assert max(check.max_error.values()) < check.tolerance


def test_encoder_decoder_norms_and_refactoring(seq2seq: ModelView) -> None:
    g = torch.Generator().manual_seed(5)
    blocks = seq2seq.blocks + seq2seq.decoder_blocks
    norms = [n for b in blocks for n in (b.norm_attn, b.norm_mlp, *b.extra_norms.values())]
    norms += [n for n in (seq2seq.embedding_norm, seq2seq.final_norm) if n is not None]
    for norm in norms:
        x = 3 * torch.randn(4, norm.weight.shape[-1], generator=g) + 1.0
        with torch.inference_mode():
            _close(_geometric(norm, x), norm(x), f"{seq2seq.name} {norm.kind}")
    result = refactor_check(seq2seq, _ids(seq2seq))
    assert result.max_rel_err <= 1e-5, f"{seq2seq.name}: {result.max_rel_err:.3g}"


def test_the_on_load_check_passes(view: ModelView) -> None:
    """Every block rebuilt from the view (layout, norms, per-head attention with rotary,
    scale, bias, soft-cap and window, MLP or experts) and its attention probabilities equal
    Hugging Face's, and so do the logits (``models.check``)."""
    check = check_view(view)
    assert check.blocks == view.n_layers + len(view.decoder_blocks)
    assert max(check.max_error.values()) < check.tolerance


def test_hidden_states_and_logits_equal_hf(view: ModelView) -> None:
    ids = _hf_ids = _ids(view)
    out = _hf(view, ids)
    L = view.n_layers
    ours = hidden_states(view, ids, list(range(L + 1)))
    for layer in range(L):
        _close(ours[layer], out.hidden_states[layer], f"{view.name} layer {layer}")
    last = ours[L]
    if view.final_norm is not None and not torch.allclose(last, out.hidden_states[L]):
        last = view.final_norm(last)
    _close(last, out.hidden_states[L], f"{view.name} last layer")
    if hasattr(out, "logits"):
        _close(view.logits(ours[L]), out.logits, f"{view.name} logits")
    del _hf_ids


def test_every_norm_is_the_sphere_construction(view: ModelView) -> None:
    g = torch.Generator().manual_seed(5)
    norms: list[NormView] = [n for n in (view.final_norm, view.embedding_norm) if n is not None]
    for b in view.blocks:
        norms += [b.norm_attn, b.norm_mlp]
        norms += [n for k, n in b.extra_norms.items() if k not in ("q_norm", "k_norm")]
    for norm in (n for n in norms if n.kind != "identity"):
        x = 3 * torch.randn(4, norm.weight.shape[-1], generator=g) + 1.0
        with torch.inference_mode():
            _close(_geometric(norm, x), norm(x), f"{view.name} {norm.kind}")


def test_per_head_refactoring_holds(view: ModelView) -> None:
    result = refactor_check(view, _ids(view))
    assert result.max_rel_err <= 1e-5, f"{view.name}: {result.max_rel_err:.3g}"


def test_logit_lens_at_the_last_layer_is_the_models_logits(view: ModelView) -> None:
    ids = _ids(view)
    out = _hf(view, ids)
    if not hasattr(out, "logits"):
        pytest.skip(f"{view.name} has no language-model head")
    last = hidden_states(view, ids, [view.n_layers])[view.n_layers]
    _close(lens_logits(view, last), out.logits, f"{view.name} lens")


def test_attention_parts_sum_to_the_scores(view: ModelView) -> None:
    """The position/context split of every block's scores is exact, whatever the layout
    (a position bias, ALiBi or T5's, is its own part); blocks whose scores are not bilinear
    in the input (q/k norms, soft-capping) are refused with one sentence."""
    C = 4
    ids = torch.randint(2, VOCAB, (C, SEQ), generator=torch.Generator().manual_seed(4))
    L = view.n_layers
    hidden = hidden_states(view, ids, list(range(L)))
    acc = DecompositionAccumulator(list(range(L)), C, SEQ, view.d_model, second_moment=False)
    acc.update(CapturedBatch(hidden=hidden, context_index=torch.arange(C)))
    for block in view.blocks:
        stats = acc.finalize(block.index)
        a = block.attn
        if not a.linear_qk or a.softcap is not None:
            with pytest.raises(GeomlensError, match="cannot split"):
                split_logits(view, block.index, hidden[block.index], stats)
            continue
        parts = split_logits(view, block.index, hidden[block.index], stats)
        assert list(parts) == list(parts_of(block))
        assert (BIAS_PART in parts) == (a.bias_fn is not None)
        total = sum(parts.values())
        real = real_logits(view, block.index, hidden[block.index])
        # the norm runs in float32 in real_logits, in float64 in the split
        assert float((total - real).abs().max() / real.abs().max()) <= 1e-6


def test_t5_v1_1_gated_and_untied_head_give_hfs_logits() -> None:
    """T5 v1.1 / Flan-T5: gated-gelu FFN, no decoder-output scaling. (Their checkpoints
    have an untied head; transformers 5 ties it to ``shared`` for every T5 and keeps
    ``tie_word_embeddings=False`` only as "do not scale", so the view reads ``lm_head``.)"""
    config = transformers.T5Config(
        vocab_size=VOCAB,
        d_model=64,
        d_kv=16,
        d_ff=96,
        num_layers=2,
        num_heads=4,
        feed_forward_proj="gated-gelu",
        tie_word_embeddings=False,
        decoder_start_token_id=0,
    )
    family = family_for(config)
    torch.manual_seed(0)
    model = transformers.AutoModelForSeq2SeqLM.from_config(config, attn_implementation="eager")
    model.eval().requires_grad_(False)
    view = family.build(model, None, "tiny-t5-v1.1", "memory")
    assert view.unembedding_scale == 1.0 and view.blocks[0].mlp().W_gate is not None
    ids = _ids(view)
    with torch.inference_mode():
        out = model(input_ids=ids, decoder_input_ids=ids, output_hidden_states=True)
        decoded = view.unembed(out.decoder_hidden_states[-1])
    _close(decoded, out.logits, "t5 v1.1 logits")
