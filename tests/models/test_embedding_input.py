"""What the model adds before block 0, exactly: token type 0 (BERT and its kin), the
factorised embedding's norm and projection (ALBERT, ELECTRA-small with an embedding narrower
than the model), scales and learned positions. ``ModelView.block_input`` must equal Hugging
Face's own input to block 0, the on-load check must stop a declaration that leaves one of
them out, and ``geomlens sphere`` and ``walk`` must run on factorised embeddings."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import torch
import transformers
from family_cases import CASES, VOCAB, Case, build_case
from test_family_commands import tiny_folder

from geomlens.cli import main
from geomlens.models import ModelView
from geomlens.models.check import CheckFailed, check_view
from geomlens.models.families.bert import BERT

FACTORISED = [
    Case("albert-narrow", "albert", "albert", dict(embedding_size=16)),
    Case("electra-narrow", "electra", "electra", dict(embedding_size=16)),
]
"""Embeddings narrower than the model (every released ALBERT; ELECTRA-small)."""

ROWS = [c for c in CASES if c.id in ("bert", "roberta", "albert", "electra", "gpt2", "gemma3")]


def _block0_input(view: ModelView, ids: torch.Tensor) -> torch.Tensor:
    """What Hugging Face's block 0 received (its forward hook's first input)."""
    got: list[torch.Tensor] = []
    hook = view.blocks[0].module.register_forward_pre_hook(
        lambda m, args, kwargs: got.append((args or tuple(kwargs.values()))[0]),
        with_kwargs=True,
    )
    try:
        with torch.inference_mode():
            view.model(input_ids=ids)
    finally:
        hook.remove()
    return got[0]


@pytest.mark.parametrize("case", ROWS, ids=[c.id for c in ROWS])
def test_block_input_is_hfs_block_0_input(case: Case) -> None:
    view = build_case(case)
    ids = torch.randint(3, VOCAB, (2, 9), generator=torch.Generator().manual_seed(1))
    real = _block0_input(view, ids)
    ours = view.block_input(ids)
    assert ours.shape == real.shape
    torch.testing.assert_close(ours, real, atol=2e-5, rtol=1e-5)
    assert view.load_check is None and check_view(view).max_error["block-0 input"] < 1e-5


@pytest.mark.parametrize("case", FACTORISED, ids=[c.id for c in FACTORISED])
def test_factorised_embedding_is_exact_and_w_u_reads_the_models_width(case: Case) -> None:
    sizes = dict(case.sizes, hidden_size=32, num_attention_heads=4)
    view = build_case(replace(case, sizes=sizes))
    assert view.factorised is not None and view.factorised.tokens.shape == (VOCAB, 16)
    assert view.W_E.shape == (VOCAB, 32) and view.W_U.shape == (32, VOCAB) and view.tied
    assert view.W_pos is None and view.embedding_norm is None
    ids = torch.randint(3, VOCAB, (1, 9), generator=torch.Generator().manual_seed(2))
    torch.testing.assert_close(view.block_input(ids), _block0_input(view, ids))
    # W_E is the block-0 input without a position: the norm sits before the projection
    zero = torch.zeros(9, dtype=torch.long)
    f = view.factorised
    without = replace(f, positions=None)
    torch.testing.assert_close(view.W_E[ids[0]], without(ids[0]))
    assert not torch.allclose(view.block_input(ids[0], zero), view.W_E[ids[0]])
    logits = view.unembed(view.block_input(ids))
    assert logits.shape == (1, 9, VOCAB)


def test_bert_w_e_holds_token_type_0() -> None:
    view = build_case(next(c for c in CASES if c.id == "bert"))
    stored = view.base.embeddings.word_embeddings.weight
    types = view.base.embeddings.token_type_embeddings.weight
    assert float(types[0].abs().max()) > 0
    torch.testing.assert_close(view.W_E, stored + types[0])
    assert view.W_U.data_ptr() == stored.data_ptr() and view.tied  # the MLM decoder's table


def test_a_declaration_without_the_token_type_is_stopped() -> None:
    """BERT declared without its token type: the blocks are right, block 0's input is not."""
    case = next(c for c in CASES if c.id == "bert")
    config = case.config()
    torch.manual_seed(0)
    model = transformers.AutoModel.from_config(config, attn_implementation="eager")
    model.eval().requires_grad_(False)
    with torch.no_grad():
        model.embeddings.token_type_embeddings.weight.normal_()
    view = replace(BERT, token_type=None).build(model, None, "bert-no-type", "memory")
    with pytest.raises(CheckFailed, match="the embedding: its block-0 input"):
        check_view(view)


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("factorised")


@pytest.mark.parametrize("case", FACTORISED, ids=[c.id for c in FACTORISED])
@pytest.mark.parametrize("command", ["sphere", "walk"])
def test_sphere_and_walk_run_on_a_factorised_embedding(
    case: Case, command: str, root: Path
) -> None:
    folder = root / case.id
    if not folder.exists():
        folder = tiny_folder(case, root)
    config = transformers.AutoConfig.from_pretrained(folder)
    assert config.embedding_size == 16 != config.hidden_size
    out = root / f"{command}-{case.id}"
    args = [command, "--model", str(folder), "--contexts", "4", "--length", "16"]
    assert main([*args, "--figures", "none", "--out", str(out), "--quiet"]) == 0
    assert (out / "metrics.json").exists()
