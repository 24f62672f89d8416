"""The hidden-state tier's readout, attention direction and reading from Hugging Face's own
hidden states: logits equal Hugging Face's (LM-head transforms and soft-caps included), a
model whose attention reads later tokens is read as an encoder, and models whose blocks no
module list returns (Longformer, CPM-Ant; Mamba's shifted numbering) are read layer by
layer, each checked against Hugging Face's own outputs."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from geomlens.capturing.hooks import hidden_states
from geomlens.models.hidden_tier import build_hidden_view, check_hidden_view
from geomlens.models.loading import is_encoder_model
from geomlens.models.tiny import tiny_model

IDS = torch.randint(3, 96, (1, 9), generator=torch.Generator().manual_seed(7))


def hidden_view(model_type: str) -> tuple[Any, Any]:
    model = tiny_model(model_type)
    return model, build_hidden_view(model, None, model_type, "memory", is_encoder_model(model))


def last_block_output(view: Any, ids: torch.Tensor) -> torch.Tensor:
    """The last block's output, read as the capture reads it."""
    return hidden_states(view, ids, [view.n_layers])[view.n_layers]


@pytest.mark.parametrize(
    ("model_type", "what"),
    [
        ("ernie", "transform"),  # BERT-style head: dense, activation, LayerNorm, then W_U
        ("modernbert-decoder", "transform"),
        ("recurrent_gemma", "softcap"),  # logits_soft_cap
        ("vaultgemma", "softcap"),  # final_logit_softcapping
    ],
)
def test_readout_equals_hugging_face_logits(model_type: str, what: str) -> None:
    model, view = hidden_view(model_type)
    check = check_hidden_view(view)
    assert check.readout_equal is True and check.max_error["logits"] < 1e-5
    with torch.inference_mode():
        theirs = model(input_ids=IDS).logits
        mine = view.logits(last_block_output(view, IDS))
    assert torch.allclose(mine, theirs, atol=1e-5 * float(theirs.abs().max()))
    with torch.inference_mode():  # W_U alone is not the model's readout
        h = last_block_output(view, IDS)
        h = h if view.final_norm is None else view.final_norm(h)
        plain = h @ view.W_U + (0 if view.b_U is None else view.b_U)
    if what == "transform":
        assert view.head_transform is not None
        assert float((plain - theirs).abs().max()) > 0.05
    else:
        assert view.logit_softcap is not None and view.head_transform is None
        capped = view.logit_softcap * torch.tanh(plain / view.logit_softcap)
        assert torch.allclose(capped, theirs, atol=1e-4)


def test_a_readout_that_is_not_the_models_is_not_claimed() -> None:
    """Reformer's head reads two concatenated streams, not one hidden state: its logits
    differ and the check says so."""
    _, view = hidden_view("reformer")
    check = check_hidden_view(view)
    assert check.readout_equal is False and check.max_error["logits"] > 0.01


def position_zero_moves(model: Any, ids: torch.Tensor) -> float:
    """How far position 0's hidden states move (largest over layers) when only the last
    token changes: Hugging Face's own outputs."""
    changed = ids.clone()
    changed[0, -1] = 3 if int(ids[0, -1]) != 3 else 4
    with torch.inference_mode():
        a = model(input_ids=ids, output_hidden_states=True, use_cache=False).hidden_states
        b = model(input_ids=changed, output_hidden_states=True, use_cache=False).hidden_states
    return max(float((x[:, 0] - y[:, 0]).abs().max()) for x, y in zip(a, b, strict=True))


def test_a_bidirectional_causal_lm_is_read_as_an_encoder() -> None:
    model, view = hidden_view("ernie")
    assert not is_encoder_model(model)  # Hugging Face's tables list it as a causal LM
    assert position_zero_moves(model, IDS) > 1e-3
    assert view.is_encoder and not any(b.attn.causal for b in view.blocks)


@pytest.mark.parametrize("model_type", ["deepseek_v3", "falcon_h1", "mamba"])
def test_causal_models_stay_decoders(model_type: str) -> None:
    """A mixture of experts regroups tokens when one changes (rounding only): still causal."""
    model, view = hidden_view(model_type)
    assert position_zero_moves(model, IDS) < 1e-4
    assert not view.is_encoder


@pytest.mark.parametrize("model_type", ["longformer", "cpmant"])
def test_hidden_states_relayed_from_hugging_face(model_type: str) -> None:
    """No module list returns these blocks' outputs (Longformer pads to its window,
    CPM-Ant prepends prompt tokens): the layers come from output_hidden_states."""
    model, view = hidden_view(model_type)
    check_hidden_view(view)
    layers = list(range(view.n_layers + 1))
    mine = hidden_states(view, IDS, layers)
    with torch.inference_mode():
        theirs = model(input_ids=IDS, output_hidden_states=True, use_cache=False).hidden_states
    assert len(theirs) == view.n_layers + 1
    for layer in layers:
        assert torch.equal(mine[layer], theirs[layer]), layer
    assert torch.equal(view.block_input(IDS), theirs[0])


@pytest.mark.parametrize("model_type", ["mamba", "falcon_mamba", "rwkv"])
def test_shifted_hidden_states_are_numbered_from_the_embedding(model_type: str) -> None:
    """Mamba's (and RWKV's) output_hidden_states start at block 0's output: geomlens's layer
    0 is block 0's input (the embedding), layer i block i - 1's output."""
    model, view = hidden_view(model_type)
    check = check_hidden_view(view)
    assert check.max_error["hidden states"] == 0.0
    mine = hidden_states(view, IDS, list(range(view.n_layers + 1)))
    with torch.inference_mode():
        theirs = model(input_ids=IDS, output_hidden_states=True, use_cache=False).hidden_states
        embedded = model.get_input_embeddings()(IDS)
    if model_type != "rwkv":  # RWKV's block 0 normalises the embedding itself
        assert torch.equal(mine[0], embedded)
    for layer in range(1, view.n_layers + 1):
        assert torch.equal(mine[layer], theirs[layer - 1]), layer


@pytest.mark.parametrize("model_type", ["megatron-bert", "fuyu"])
def test_a_final_norm_beside_the_blocks_is_found(model_type: str) -> None:
    """Megatron-BERT keeps its final LayerNorm in its encoder beside the block list, Fuyu in
    its language model: it is found there, so the radii are known and the readout (through
    it) equals Hugging Face's logits."""
    model, view = hidden_view(model_type)
    assert view.final_norm is not None and view.final_norm.kind == "layernorm"
    check = check_hidden_view(view)
    assert check.final_norm and check.readout_equal is True
    with torch.inference_mode():
        theirs = model(input_ids=IDS, output_hidden_states=True).hidden_states[-1]
        mine = view.final_norm(last_block_output(view, IDS))
    assert torch.equal(mine, theirs)


def test_positions_a_model_pads_on_are_not_read() -> None:
    """Reformer pads its input on the right to a multiple of its chunk length and runs its
    blocks on the padded positions: the hidden states read are the tokens' alone, equal to
    Hugging Face's first T positions."""
    model, view = hidden_view("reformer")
    chunk = int(model.config.lsh_attn_chunk_length or model.config.local_attn_chunk_length)
    g = torch.Generator().manual_seed(7)
    ids = torch.randint(3, 96, (1, chunk + 1), generator=g)  # padded to two chunks
    got = hidden_states(view, ids, [0, view.n_layers])
    with torch.inference_mode():
        theirs = model(input_ids=ids, output_hidden_states=True).hidden_states
    assert theirs[0].shape[1] > ids.shape[1]  # Hugging Face's own are padded
    for layer in (0, view.n_layers):
        assert got[layer].shape[1] == ids.shape[1]
    assert torch.equal(got[0], theirs[0][:, : ids.shape[1]])


def test_the_view_says_its_readout_and_norms_are_not_read() -> None:
    """The load check's verdict on the readout reaches the analyses through the view: a
    readout whose logits differ is "not available", and a model with no norm geomlens
    reads says so (Reformer: both)."""
    from dataclasses import replace

    from geomlens.analyses.common.applicable import norms_missing, readout_missing

    _, view = hidden_view("reformer")
    assert view.readout_differs() is None  # no load check: nothing said
    view = replace(view, load_check=check_hidden_view(view))
    said = readout_missing(view)
    assert said is not None
    assert said.startswith("not available: the readout is not available for this model: ")
    assert "differ from Hugging Face's" in said
    assert norms_missing(view) == "not applicable: the model has no layer norms geomlens can read"
    _, ernie = hidden_view("ernie")  # its head's transform is read: its readout is its own
    ernie = replace(ernie, load_check=check_hidden_view(ernie))
    assert readout_missing(ernie) is None and norms_missing(ernie) is None
