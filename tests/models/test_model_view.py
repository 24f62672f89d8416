"""ModelView against Hugging Face's own computation, for every supported family.

GPT-2, T5 and Gemma 3 are tiny random models built from configs (no weights ship for
them); Llama and BERT are the bundled SmolLM2 and MiniLM on real weights. Each attention
layer is recomputed from the view's per-head weights on the input the model actually fed
it (captured with a hook) and compared with the module's output.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pytest
import torch
from tiny_models import VOCAB, char_tokenizer
from torch import nn
from transformers.activations import ACT2FN

from geomlens.errors import GeomlensError
from geomlens.models import BUNDLED, BlockView, ModelView, NormView, load_model
from geomlens.models.families import family_for
from geomlens.models.families.t5 import T5, T5DecoderBlockView, unembedding_scale

ATOL = 1e-5
SEQ = 7

# --------------------------------------------------------------------------- fixtures


def _bundled(name: str) -> ModelView:
    if not BUNDLED[name].installed:
        pytest.skip(f"{name} is not installed ({BUNDLED[name].install})")
    return load_model(name, attention="eager")


@pytest.fixture(scope="module")
def smollm2() -> ModelView:
    """SmolLM2-135M on real weights, eager attention (module-scoped; may move to conftest)."""
    return _bundled("smollm2-135m")


@pytest.fixture(scope="module")
def minilm() -> ModelView:
    """MiniLM-L6 on real weights, eager attention (module-scoped; may move to conftest)."""
    return _bundled("minilm-l6")


TINY = ["gpt2", "t5", "t5_relu", "gemma3"]
REAL = ["smollm2", "minilm"]
ALL = TINY + REAL


@pytest.fixture(params=ALL)
def view(request: pytest.FixtureRequest) -> ModelView:
    return request.getfixturevalue(request.param)


# --------------------------------------------------------------------------- helpers


def _ids(view: ModelView) -> torch.Tensor:
    if view.tokenizer is not None:
        ids = view.tokenizer("The cat sat on the mat by the door", return_tensors="pt").input_ids
        return ids[:, :SEQ]
    return torch.randint(0, VOCAB, (2, SEQ), generator=torch.Generator().manual_seed(7))


def _run(view: ModelView, ids: torch.Tensor) -> Any:
    """One forward pass of the whole model (T5: encoder and decoder on the same ids)."""
    with torch.inference_mode():
        if view.family == "t5":
            return view.model(input_ids=ids, decoder_input_ids=ids, use_cache=False)
        return view.model(input_ids=ids)


def _capture(
    modules: list[nn.Module], run: Callable[[], Any]
) -> list[tuple[torch.Tensor, Any, dict]]:
    """For each module (in one forward pass): first tensor input, first output, keyword inputs."""
    seen: dict[int, tuple[torch.Tensor, Any, dict]] = {}

    def hook_for(i: int) -> Callable[..., None]:
        def hook(mod: nn.Module, args: tuple, kwargs: dict, output: Any) -> None:
            x = kwargs["hidden_states"] if "hidden_states" in kwargs else args[0]
            seen[i] = (x, output[0] if isinstance(output, tuple) else output, kwargs)

        return hook

    handles = [
        m.register_forward_hook(hook_for(i), with_kwargs=True) for i, m in enumerate(modules)
    ]
    try:
        run()
    finally:
        for handle in handles:
            handle.remove()
    return [seen[i] for i in range(len(modules))]


def _heads_forward(
    block: BlockView,
    x_q: torch.Tensor,
    x_kv: torch.Tensor,
    *,
    scale: float,
    causal: bool,
    window: int | None = None,
    bias: torch.Tensor | None = None,
    rotate: Callable[[torch.Tensor, torch.Tensor], tuple[torch.Tensor, torch.Tensor]] | None = None,
    heads: Any = None,
) -> torch.Tensor:
    """Attention output rebuilt from per-head weights: sum_h softmax(QK^T) V W_O,h + b_O."""
    h = heads if heads is not None else block.heads()

    def project(x: torch.Tensor, W: torch.Tensor, b: torch.Tensor | None) -> torch.Tensor:
        out = torch.einsum("btd,hde->bhte", x, W)
        return out if b is None else out + b[None, :, None, :]

    q, k, v = project(x_q, h.W_Q, h.b_Q), project(x_kv, h.W_K, h.b_K), project(x_kv, h.W_V, h.b_V)
    if "q_norm" in block.extra_norms:
        q, k = block.extra_norms["q_norm"](q), block.extra_norms["k_norm"](k)
    if rotate is not None:
        q, k = rotate(q, k)
    scores = q @ k.transpose(-1, -2) * scale
    if bias is not None:
        scores = scores + bias
    t_q, t_k = scores.shape[-2:]
    i, j = torch.arange(t_q)[:, None], torch.arange(t_k)[None, :]
    allowed = torch.ones(t_q, t_k, dtype=torch.bool)
    if causal:
        allowed &= j <= i
    if window is not None:
        allowed &= i - j < window
    scores = scores.masked_fill(~allowed, float("-inf"))
    z = scores.softmax(-1) @ v
    out = torch.einsum("bhte,hed->btd", z, h.W_O)
    return out if h.b_O is None else out + h.b_O


def _rotary(
    view: ModelView, x: torch.Tensor, block: BlockView
) -> Callable[[torch.Tensor, torch.Tensor], tuple[torch.Tensor, torch.Tensor]] | None:
    """HF's own rotary embedding for the block (Gemma: by the layer's attention type)."""
    if view.position.kind != "rotary":
        return None
    positions = torch.arange(x.shape[1])[None, :]
    if view.family == "gemma3":
        from transformers.models.gemma3.modeling_gemma3 import apply_rotary_pos_emb

        layer_type = view.config.layer_types[block.index]
        cos, sin = view.base.rotary_emb(x, positions, layer_type)
    else:
        from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

        cos, sin = view.base.rotary_emb(x, positions)
    return lambda q, k: apply_rotary_pos_emb(q, k, cos, sin)


def _scale(view: ModelView) -> float:
    """The query-key scale each family's attention uses (documented in docs/models.md)."""
    if view.family == "t5":
        return 1.0
    return view.d_head**-0.5


def _layers(view: ModelView) -> list[int]:
    """Every block of the tiny models; the first and a middle one of the real ones."""
    n = len(view.blocks)
    return list(range(n)) if n <= 3 else [0, n // 2]


def _all_norms(view: ModelView) -> list[tuple[str, NormView]]:
    norms = [("final", view.final_norm), ("embedding", view.embedding_norm)]
    for prefix, blocks in (("block", view.blocks), ("decoder", view.decoder_blocks)):
        for b in blocks:
            norms += [
                (f"{prefix}{b.index}.attn", b.norm_attn),
                (f"{prefix}{b.index}.mlp", b.norm_mlp),
            ]
            norms += [(f"{prefix}{b.index}.{k}", n) for k, n in b.extra_norms.items()]
    return [(name, n) for name, n in norms if n is not None]


def _max_diff(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).abs().max())


# --------------------------------------------------------------------------- 1. attention


def test_heads_reassemble_attention(view: ModelView) -> None:
    """Per-head W_Q/W_K/W_V/W_O (+ biases, rotary, T5 bias, q/k norms) give the module's output.

    Within 1e-5 absolute on the first and a middle block; every other block within 1e-5
    relative to its largest output (SmolLM2's late blocks write values up to ~180).
    """
    ids = _ids(view)
    seen = _capture([b.attention for b in view.blocks], lambda: _run(view, ids))
    for block, (x, out, _) in zip(view.blocks, seen, strict=True):
        index = block.index
        bias = None
        if view.family == "t5":
            bias = view.blocks[0].attention.compute_bias(x.shape[1], x.shape[1])
        window = None
        if view.family == "gemma3" and view.config.layer_types[index] == "sliding_attention":
            window = view.config.sliding_window
        rebuilt = _heads_forward(
            block,
            x,
            x,
            scale=_scale(view),
            causal=not view.is_encoder,
            window=window,
            bias=bias,
            rotate=_rotary(view, x, block),
        )
        if block.placement == "post":
            # BERT's attention module returns LayerNorm(attention + residual).
            rebuilt = block.norm_attn(rebuilt + x)
        tol = ATOL if index in _layers(view) else ATOL * max(1.0, float(out.abs().max()))
        assert _max_diff(rebuilt, out) <= tol, f"{view.name} block {index}"


def test_gqa_heads_are_expanded(gemma3: ModelView, smollm2: ModelView) -> None:
    for v in (gemma3, smollm2):
        h = v.blocks[0].heads()
        assert v.n_kv_heads < v.n_heads
        assert h.W_Q.shape == (v.n_heads, v.d_model, v.d_head)
        assert h.W_K.shape == h.W_V.shape == (v.n_heads, v.d_model, v.d_head)
        assert h.W_O.shape == (v.n_heads, v.d_head, v.d_model)
        group = v.n_heads // v.n_kv_heads
        torch.testing.assert_close(h.W_K[0], h.W_K[group - 1], rtol=0, atol=0)


def test_t5_decoder_self_and_cross_attention(t5: ModelView) -> None:
    ids = _ids(t5)
    assert len(t5.decoder_blocks) == t5.config.num_decoder_layers
    first = t5.decoder_blocks[0].attention
    for block in t5.decoder_blocks:
        assert isinstance(block, T5DecoderBlockView)
        assert block.cross_attention is not None
        (x, out, _), (xq, cross_out, kwargs) = _capture(
            [block.attention, block.cross_attention], lambda: _run(t5, ids)
        )
        bias = first.compute_bias(x.shape[1], x.shape[1])  # one-directional (decoder) buckets
        rebuilt = _heads_forward(block, x, x, scale=1.0, causal=True, bias=bias)
        assert _max_diff(rebuilt, out) <= ATOL
        encoded = kwargs["key_value_states"]
        rebuilt = _heads_forward(
            block, xq, encoded, scale=1.0, causal=False, heads=block.cross_heads()
        )
        assert _max_diff(rebuilt, cross_out) <= ATOL


def test_t5_position_scheme_reproduces_compute_bias(t5: ModelView) -> None:
    """The bucket table and parameters in PositionScheme give the encoder's compute_bias."""
    pos = t5.position
    attn = t5.blocks[0].attention
    assert pos.kind == "t5-relative" and pos.bidirectional is True
    assert pos.relative_bias is not None
    assert pos.relative_bias.shape == (pos.n_buckets, t5.n_heads)
    n = 40  # beyond max_distance, so the log buckets and the clamp are exercised
    rel = torch.arange(n)[None, :] - torch.arange(n)[:, None]
    buckets = attn._relative_position_bucket(
        rel,
        bidirectional=bool(pos.bidirectional),
        num_buckets=int(pos.n_buckets or 0),
        max_distance=int(pos.max_distance or 0),
    )
    mine = pos.relative_bias[buckets].permute(2, 0, 1)[None]
    torch.testing.assert_close(mine, attn.compute_bias(n, n), rtol=0, atol=0)


# --------------------------------------------------------------------------- 2. MLP


def _mlp_forward(view: ModelView, block: BlockView, x: torch.Tensor) -> torch.Tensor:
    m = block.mlp()
    act = ACT2FN[m.activation]
    pre = x @ m.W_in if m.b_in is None else x @ m.W_in + m.b_in
    hidden = act(pre) if m.W_gate is None else act(x @ m.W_gate) * pre
    out = hidden @ m.W_out
    return out if m.b_out is None else out + m.b_out


def test_mlp_view_reproduces_module(view: ModelView) -> None:
    ids = _ids(view)
    blocks = [view.blocks[i] for i in _layers(view)] + list(view.decoder_blocks)
    modules = [b.mlp().module for b in blocks]
    if view.family == "bert":
        # MlpView.module is BertIntermediate (dense + activation); the MLP ends at
        # BertOutput.dense, before its dropout, residual and LayerNorm.
        modules += [b.module.output.dense for b in blocks]
    seen = _capture(modules, lambda: _run(view, ids))
    outputs = seen[len(blocks) :] if view.family == "bert" else seen
    for block, (x, _, _), (_, out, _) in zip(blocks, seen, outputs, strict=False):
        assert _max_diff(_mlp_forward(view, block, x), out) <= ATOL, f"{view.name} {block.index}"


def test_mlp_shapes_and_gating(t5: ModelView, t5_relu: ModelView, gpt2: ModelView) -> None:
    gated, plain = t5.blocks[0].mlp(), t5_relu.blocks[0].mlp()
    assert gated.W_gate is not None and gated.W_gate.shape == (64, 96)
    assert gated.activation == "gelu_new"
    assert plain.W_gate is None and plain.activation == "relu"
    assert plain.W_in.shape == (64, 96) and plain.W_out.shape == (96, 64)
    m = gpt2.blocks[0].mlp()
    assert m.W_in.shape == (64, 96) and m.W_out.shape == (96, 64)  # n_inner honoured


# --------------------------------------------------------------------------- 3. norms


def _geometric(norm: NormView, x: torch.Tensor) -> torch.Tensor:
    """Centre (LayerNorm), divide by the RMS, multiply by the gain, add the bias."""
    if norm.kind == "layernorm":
        x = x - x.mean(-1, keepdim=True)
    x = x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + norm.eps)
    x = x * norm.weight
    return x if norm.bias is None else x + norm.bias


def test_norm_views_are_geometric(view: ModelView) -> None:
    g = torch.Generator().manual_seed(11)
    norms = _all_norms(view)
    assert norms
    for name, norm in norms:
        d = norm.weight.shape[0]
        x = 3.0 * torch.randn(2, 5, d, generator=g) + 1.5  # off-centre: centring matters
        with torch.inference_mode():
            got = norm(x)
        want = _geometric(norm, x)
        scale = max(1.0, float(want.abs().max()))
        assert _max_diff(got, want) <= ATOL * scale, f"{view.name} {name}"


def test_norm_kinds_and_placement(
    gpt2: ModelView, t5: ModelView, gemma3: ModelView, minilm: ModelView
) -> None:
    assert gpt2.blocks[0].norm_attn.kind == "layernorm" and gpt2.blocks[0].placement == "pre"
    assert gpt2.blocks[0].norm_attn.bias is not None
    assert t5.blocks[0].norm_attn.kind == "rmsnorm" and t5.blocks[0].norm_attn.bias is None
    block = gemma3.blocks[0]
    assert set(block.extra_norms) == {"post_attn", "post_mlp", "q_norm", "k_norm"}
    torch.testing.assert_close(
        block.norm_attn.weight, block.module.input_layernorm.weight + 1.0, rtol=0, atol=0
    )
    assert block.extra_norms["q_norm"].weight.shape == (gemma3.d_head,)
    assert minilm.blocks[0].placement == "post" and minilm.final_norm is None
    assert "final" in t5.blocks[-1].extra_norms and "final" in t5.decoder_blocks[-1].extra_norms


def test_sandwich_block_rebuilt_from_norms(gemma3: ModelView) -> None:
    """Gemma's block output = residual + post_attn(attn(norm_attn x)), then the MLP likewise."""
    ids = _ids(gemma3)
    block = gemma3.blocks[1]
    (x, out, _), (_, attn_out, _) = _capture(
        [block.module, block.attention], lambda: _run(gemma3, ids)
    )
    with torch.inference_mode():
        h = x + block.extra_norms["post_attn"](attn_out)
        mlp = block.mlp().module(block.norm_mlp(h))
        h = h + block.extra_norms["post_mlp"](mlp)
    assert _max_diff(h, out) <= ATOL


# --------------------------------------------------------------------------- 4. embedding / unembedding


DECODERS = ["gpt2", "t5", "t5_relu", "gemma3", "smollm2"]


@pytest.mark.parametrize("name", DECODERS)
def test_unembedding_gives_logits(request: pytest.FixtureRequest, name: str) -> None:
    """final_norm(h) @ W_U (T5: times d^-0.5 when it rescales) is the model's logits."""
    v: ModelView = request.getfixturevalue(name)
    assert v.final_norm is not None
    ids = _ids(v)
    holder: dict[str, Any] = {}
    ((_, normed, _),) = _capture(
        [v.final_norm.module], lambda: holder.setdefault("o", _run(v, ids))
    )
    scale = unembedding_scale(v.config) if v.family == "t5" else 1.0
    logits = (normed * scale) @ v.W_U
    assert v.W_U.shape == (v.d_model, v.W_E.shape[0])
    assert _max_diff(logits, holder["o"].logits) <= ATOL * max(1.0, float(logits.abs().max()))


def test_t5_unembedding_scale_follows_config() -> None:
    from transformers import T5Config

    assert unembedding_scale(T5Config(d_model=64)) == 64**-0.5
    assert unembedding_scale(T5Config(d_model=64, tie_word_embeddings=False)) == 1.0


@pytest.mark.parametrize("name", ["gpt2", "t5", "gemma3", "smollm2", "minilm"])
def test_embedding_feeds_block_zero(request: pytest.FixtureRequest, name: str) -> None:
    """W_E[ids] * embedding_scale (+ W_pos) (BERT: through embedding_norm, W_E holding token
    type 0) enters block 0, and so does ``block_input``."""
    v: ModelView = request.getfixturevalue(name)
    ids = _ids(v)
    ((x, _, _),) = _capture([v.blocks[0].module], lambda: _run(v, ids))
    e = v.W_E[ids] * v.embedding_scale
    if v.W_pos is not None:
        e = e + v.W_pos[: ids.shape[1]]
    if v.embedding_norm is not None:
        e = v.embedding_norm(e)
    assert _max_diff(e, x) <= ATOL * max(1.0, float(e.abs().max()))
    assert _max_diff(v.block_input(ids), x) <= ATOL * max(1.0, float(e.abs().max()))


def test_family_facts(gpt2: ModelView, t5: ModelView, gemma3: ModelView) -> None:
    assert gpt2.describe()["position"] == "learned" and gpt2.tied and not gpt2.is_encoder
    assert gpt2.W_pos is not None and gpt2.W_pos.shape == (32, 64) and gpt2.n_ctx == 32
    assert t5.tied and t5.is_encoder and t5.n_ctx is None and t5.d_head == 8
    assert t5.base is t5.model.encoder and len(t5.blocks) == 2
    assert gemma3.tied and gemma3.n_kv_heads == 2
    assert gemma3.embedding_scale == pytest.approx(math.sqrt(64))
    assert gemma3.position.rope_theta == 5000.0 and gemma3.position.rotary_dim == 16
    local = [b.attn.rotary for b in gemma3.blocks if b.attn.window is not None]
    assert local and all(r is not None and r.theta == 100.0 for r in local)


# --------------------------------------------------------------------------- 5. errors


def test_unknown_architecture_is_refused() -> None:
    from transformers import MambaConfig

    with pytest.raises(GeomlensError, match="'mamba' is not supported"):
        family_for(MambaConfig())


def _refused(config: Any) -> str:
    with pytest.raises(GeomlensError) as info:
        family_for(config)
    return str(info.value)


def test_gpt2_lists_every_unhandled_option() -> None:
    from transformers import GPT2Config

    message = _refused(
        GPT2Config(
            scale_attn_by_inverse_layer_idx=True, add_cross_attention=True, scale_attn_weights=False
        )
    )
    for option in ("scale_attn_by_inverse_layer_idx", "add_cross_attention", "scale_attn_weights"):
        assert option in message
    family_for(GPT2Config(n_inner=100, activation_function="relu", reorder_and_upcast_attn=True))


def test_gemma3_lists_every_unhandled_option() -> None:
    from transformers import Gemma3TextConfig

    message = _refused(
        Gemma3TextConfig(
            use_bidirectional_attention=True,
            rope_parameters={
                "full_attention": {"rope_type": "mrope", "rope_theta": 1e6},
                "sliding_attention": {"rope_type": "default", "rope_theta": 1e4},
            },
        )
    )
    for option in ("use_bidirectional_attention", "rope_parameters"):
        assert option in message
    family_for(Gemma3TextConfig())  # the defaults are handled
    # linear scaling of the global layers (Gemma 3 4B and up) is handled
    family_for(
        Gemma3TextConfig(
            rope_parameters={
                "full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1e6},
                "sliding_attention": {"rope_type": "default", "rope_theta": 1e4},
            }
        )
    )
    # a query scale other than 1/sqrt(head_dim) and soft-capping are handled now (the
    # family table in tests/models/test_families.py checks them against Hugging Face)
    family_for(Gemma3TextConfig(query_pre_attn_scalar=144, final_logit_softcapping=30.0))


def test_llama_and_bert_list_every_unhandled_option() -> None:
    from transformers import BertConfig, LlamaConfig

    message = _refused(LlamaConfig(sliding_window=128, pretraining_tp=2))
    assert "sliding_window" in message and "pretraining_tp" in message
    message = _refused(BertConfig(position_embedding_type="relative_key", is_decoder=True))
    assert "position_embedding_type" in message and "is_decoder" in message


def test_t5_refuses_nothing() -> None:
    from transformers import T5Config

    for proj in ("relu", "gated-gelu", "gated-silu"):
        assert family_for(T5Config(feed_forward_proj=proj)) is T5


def test_options_checked_before_weights_load(tmp_path: Any) -> None:
    """A folder holding only config.json is refused by its options, not by missing weights."""
    from transformers import GPT2Config

    GPT2Config(add_cross_attention=True, scale_attn_by_inverse_layer_idx=True).save_pretrained(
        tmp_path
    )
    with pytest.raises(GeomlensError) as info:
        load_model(tmp_path)
    assert "add_cross_attention" in str(info.value)
    assert "scale_attn_by_inverse_layer_idx" in str(info.value)


@pytest.mark.parametrize("name", ["gpt2", "t5", "gemma3"])
def test_tiny_model_loads_from_folder(
    request: pytest.FixtureRequest, tmp_path: Any, name: str
) -> None:
    """A saved folder loads through ``load_model`` with the family's Auto class, same logits."""

    v: ModelView = request.getfixturevalue(name)
    v.model.save_pretrained(tmp_path)
    char_tokenizer(VOCAB).save_pretrained(tmp_path)  # a vocabulary the embedding covers
    loaded = load_model(tmp_path, attention="eager")
    assert loaded.family == v.family and type(loaded.model) is type(v.model)
    assert loaded.source == str(tmp_path)
    ids = _ids(v)
    torch.testing.assert_close(_run(loaded, ids).logits, _run(v, ids).logits)
