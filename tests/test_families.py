"""Every family adapter against Hugging Face's own outputs, on tiny random models.

One row of ``CASES`` per family (several where a family has layouts or options real
checkpoints use: partial rotary, ALiBi, soft-capping, sliding windows, MoE, parallel
blocks). Each model is built from its config here (no downloads), with norm gains and
biases moved off their initial values, and checked for:

- hidden states equal to HF's ``output_hidden_states``, and the view's logits to HF's;
- attention probabilities rebuilt from the view's per-head Q/K (rotary, scale, bias,
  soft-cap, window) equal to HF's eager attention weights;
- every block rebuilt from the view alone (its layout, norms, per-head attention, MLP or
  experts) equal to the block's real output;
- the layer-norm construction on every norm and the per-head refactoring of attention.

Adding a family: its adapter file, its line in ``models/families/__init__.py``, and one
row here (docs/models.md, "Adding a family").
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest
import torch
import transformers

from geomlens.analyses.attention_parts import BIAS_PART, parts_of, real_logits, split_logits
from geomlens.analyses.lens import lens_logits
from geomlens.analyses.refactor import refactor_check
from geomlens.capture.hooks import hidden_states
from geomlens.errors import GeomlensError
from geomlens.models import ModelView
from geomlens.models.families import FAMILIES, family_for
from geomlens.models.view import BlockView, NormView
from geomlens.stats import CapturedBatch, DecompositionAccumulator

VOCAB = 128
SEQ = 9
ATOL = 2e-5

SMALL: dict[str, Any] = dict(
    vocab_size=VOCAB,
    hidden_size=64,
    intermediate_size=96,
    num_hidden_layers=3,
    num_attention_heads=4,
    max_position_embeddings=64,
)
"""Sizes most configs accept under these names (the others map them per case)."""


@dataclass(frozen=True)
class Case:
    """One tiny model: its config's model type, options, and which family must take it."""

    id: str
    model_type: str
    family: str
    options: dict[str, Any] = field(default_factory=dict)
    sizes: dict[str, Any] = field(default_factory=lambda: dict(SMALL))

    def config(self) -> Any:
        return transformers.CONFIG_MAPPING[self.model_type](**{**self.sizes, **self.options})


CASES: list[Case] = [
    Case("llama", "llama", "llama", dict(num_key_value_heads=2)),
    Case(
        "gpt2",
        "gpt2",
        "gpt2",
        dict(n_inner=96),
        dict(vocab_size=VOCAB, n_embd=64, n_layer=3, n_head=4, n_positions=64),
    ),
    Case("bert", "bert", "bert", dict(hidden_act="gelu")),
    Case("roberta", "roberta", "roberta", dict(pad_token_id=1)),
    Case(
        "gemma3",
        "gemma3_text",
        "gemma3",
        dict(
            num_key_value_heads=2,
            head_dim=16,
            query_pre_attn_scalar=24,
            sliding_window=4,
            layer_types=["sliding_attention", "full_attention", "sliding_attention"],
            attn_logit_softcapping=20.0,
            final_logit_softcapping=15.0,
        ),
    ),
    Case("mistral", "mistral", "mistral", dict(num_key_value_heads=2, sliding_window=4)),
    Case(
        "mixtral",
        "mixtral",
        "mixtral",
        dict(num_key_value_heads=2, num_local_experts=4, num_experts_per_tok=2, sliding_window=4),
    ),
    Case(
        "qwen2",
        "qwen2",
        "qwen2",
        dict(num_key_value_heads=2, use_sliding_window=True, sliding_window=4, max_window_layers=1),
    ),
    Case("qwen3", "qwen3", "qwen3", dict(num_key_value_heads=2, head_dim=16)),
    Case("gemma", "gemma", "gemma", dict(num_key_value_heads=1, head_dim=16)),
    Case(
        "gemma2",
        "gemma2",
        "gemma2",
        dict(
            num_key_value_heads=2,
            head_dim=16,
            query_pre_attn_scalar=24,
            sliding_window=4,
            layer_types=["sliding_attention", "full_attention", "sliding_attention"],
            attn_logit_softcapping=5.0,
            final_logit_softcapping=15.0,
        ),
    ),
    Case("olmo2", "olmo2", "olmo2", dict(num_key_value_heads=2)),
    Case(
        "phi3",
        "phi3",
        "phi3",
        dict(num_key_value_heads=2, partial_rotary_factor=0.5, sliding_window=4, pad_token_id=0),
    ),
    Case(
        "gpt_neo",
        "gpt_neo",
        "gpt_neo",
        dict(attention_types=[[["global", "local"], 1], [["local"], 1]], window_size=4),
    ),
    Case("gptj", "gptj", "gptj", dict(rotary_dim=8, n_inner=96)),
    Case("gpt_neox", "gpt_neox", "gpt_neox", dict(rotary_pct=0.5)),
    Case("gpt_neox-sequential", "gpt_neox", "gpt_neox", dict(use_parallel_residual=False)),
    Case(
        "falcon-new",
        "falcon",
        "falcon",
        dict(new_decoder_architecture=True, num_kv_heads=2, ffn_hidden_size=96, bias=True),
    ),
    Case("falcon-7b", "falcon", "falcon", dict(ffn_hidden_size=96)),
    Case(
        "falcon-11b",
        "falcon",
        "falcon",
        dict(
            new_decoder_architecture=True,
            num_kv_heads=1,
            num_ln_in_parallel_attn=1,
            ffn_hidden_size=96,
        ),
    ),
    Case(
        "falcon-sequential",
        "falcon",
        "falcon",
        dict(multi_query=False, parallel_attn=False, ffn_hidden_size=96, bias=True),
    ),
    Case("phi", "phi", "phi", dict(partial_rotary_factor=0.5)),
    Case("opt", "opt", "opt", dict(ffn_dim=96)),
    Case("bloom", "bloom", "bloom"),
    Case(
        "bloom-6-heads",
        "bloom",
        "bloom",
        sizes=dict(vocab_size=VOCAB, hidden_size=48, num_hidden_layers=2, num_attention_heads=6),
    ),
]


def _build(case: Case) -> ModelView:
    config = case.config()
    family = family_for(config)
    assert family.name == case.family, f"{case.id}: taken by {family.name}"
    auto = {
        "causal-lm": transformers.AutoModelForCausalLM,
        "seq2seq-lm": transformers.AutoModelForSeq2SeqLM,
        "base": transformers.AutoModel,
    }[family.auto_class]
    torch.manual_seed(0)
    model = auto.from_config(config, attn_implementation="eager", dtype=torch.float32)
    with torch.no_grad():
        for p in model.parameters():
            if p.ndim == 1:
                p.add_(0.2 * torch.randn_like(p))
    model.eval().requires_grad_(False)
    return family.build(model, None, f"tiny-{case.id}", "memory")


_VIEWS: dict[str, ModelView] = {}


@pytest.fixture(params=CASES, ids=[c.id for c in CASES])
def view(request: pytest.FixtureRequest) -> ModelView:
    case: Case = request.param
    if case.id not in _VIEWS:
        _VIEWS[case.id] = _build(case)
    return _VIEWS[case.id]


def _ids(view: ModelView) -> torch.Tensor:
    g = torch.Generator().manual_seed(3)
    return torch.randint(2, VOCAB, (2, SEQ), generator=g)


def _hf(view: ModelView, ids: torch.Tensor) -> Any:
    with torch.inference_mode():
        return view.model(input_ids=ids, output_hidden_states=True, output_attentions=True)


def _close(a: torch.Tensor, b: torch.Tensor, what: str, atol: float = ATOL) -> None:
    scale = max(1.0, float(b.abs().max()))
    err = float((a.double() - b.double()).abs().max())
    assert err <= atol * scale, f"{what}: max abs difference {err:.3g} (scale {scale:.3g})"


def _attention_out(block: BlockView, x: torch.Tensor) -> torch.Tensor:
    """sum_h A_h (x W_V,h + b_V,h) W_O,h + b_O from the view alone."""
    w = block.heads()
    probs = block.attn.probabilities(x)
    v = torch.einsum("btd,hde->bhte", x, w.W_V)
    if w.b_V is not None:
        v = v + w.b_V[None, :, None, :]
    out = torch.einsum("bhte,hed->btd", probs @ v, w.W_O)
    return out if w.b_O is None else out + w.b_O


def _rebuild(block: BlockView, h: torch.Tensor) -> torch.Tensor:
    """A block's output from its view, by layout."""
    n1, n2, mlp = block.norm_attn, block.norm_mlp, block.mlp()
    if block.layout == "pre":
        h1 = h + _attention_out(block, n1(h))
        return h1 + mlp(n2(h1))
    if block.layout == "parallel":
        return h + _attention_out(block, n1(h)) + mlp(n2(h))
    if block.layout == "sandwich":
        post_attn, post_mlp = block.extra_norms["post_attn"], block.extra_norms["post_mlp"]
        h1 = h + post_attn(_attention_out(block, n1(h)))
        return h1 + post_mlp(mlp(n2(h1)))
    if block.layout == "post":
        h1 = n1(h + _attention_out(block, h))
        return n2(h1 + mlp(h1))
    if block.layout == "post-sublayer":
        h1 = h + n1(_attention_out(block, h))
        return h1 + n2(mlp(h1))
    raise AssertionError(f"unknown layout {block.layout}")


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
    covered = {c.family for c in CASES}
    missing = [f.name for f in FAMILIES if f.name not in covered and f.name != "t5"]
    assert not missing, f"families without a row in CASES: {missing}"


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


def test_attention_probabilities_equal_hf(view: ModelView) -> None:
    ids = _ids(view)
    out = _hf(view, ids)
    record = hidden_states(view, ids, list(range(view.n_layers)))
    for block in view.blocks:
        h = record[block.index]
        x = h if block.attn_input_norm is None else block.attn_input_norm(h)
        _close(block.attn.probabilities(x), out.attentions[block.index], f"block {block.index}")


def test_blocks_rebuilt_from_the_view(view: ModelView) -> None:
    ids = _ids(view)
    record = hidden_states(view, ids, list(range(view.n_layers + 1)))
    with torch.inference_mode():
        for block in view.blocks:
            rebuilt = _rebuild(block, record[block.index])
            _close(rebuilt, record[block.index + 1], f"{view.name} block {block.index}")


def test_every_norm_is_the_sphere_construction(view: ModelView) -> None:
    g = torch.Generator().manual_seed(5)
    norms: list[NormView] = [n for n in (view.final_norm, view.embedding_norm) if n is not None]
    for b in view.blocks:
        norms += [b.norm_attn, b.norm_mlp]
        norms += [n for k, n in b.extra_norms.items() if k not in ("q_norm", "k_norm")]
    for norm in norms:
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
