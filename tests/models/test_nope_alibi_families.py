"""Cohere 2, EXAONE 4 and MPT: which layers rotate, slide or carry ALiBi, what the on-load
check stops when that is declared wrongly, and the MPT options Hugging Face does not
compute, refused by name. (Their equivalence with Hugging Face: the ``cohere2``,
``exaone4`` and ``mpt`` rows of ``tests/family_cases.py``.)"""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch
import transformers
from family_cases import CASES, build_case

from geomlens.errors import GeomlensError
from geomlens.models.check import CheckFailed, check_view
from geomlens.models.families import family_for
from geomlens.models.families.base import AttentionSettings, build_view
from geomlens.models.families.bloom import alibi_slopes

ROWS = {c.id: c for c in CASES}

SLIDING, GLOBAL_NOPE, GLOBAL = (4, True), (None, False), (None, True)


@pytest.mark.parametrize(
    ("row", "expected"),
    [
        ("cohere2", [SLIDING, SLIDING, GLOBAL_NOPE]),
        ("cohere2-layer-types", [SLIDING, GLOBAL_NOPE, SLIDING]),
        ("exaone4", [SLIDING, SLIDING, GLOBAL_NOPE]),
        ("exaone4-global", [GLOBAL, GLOBAL, GLOBAL]),
    ],
)
def test_sliding_layers_rotate_and_global_layers_have_no_positions(row, expected) -> None:
    """(window, rotates) per block: Cohere 2 and EXAONE 4 rotate only their sliding
    layers; EXAONE 4 without a window (1.2B) rotates every layer."""
    view = build_case(ROWS[row])
    assert [(b.attn.window, b.attn.rotary is not None) for b in view.blocks] == expected
    if row == "exaone4":
        assert view.blocks[0].attn.rotary.rope_type == "llama3"
        assert view.blocks[0].attn.qk_norm is not None  # per-head q/k RMSNorms


def test_a_rotating_global_layer_is_stopped_by_the_on_load_check() -> None:
    """Declaring Cohere 2's full-attention layer as rotating is caught at that block."""
    view = build_case(ROWS["cohere2"])
    family = family_for(view.config)
    wrong = replace(family, settings=lambda c, d, i, a: AttentionSettings(window=a.sliding_window))
    with pytest.raises(CheckFailed) as info:
        check_view(build_view(wrong, view.model, None, "wrong", "memory"))
    assert info.value.where == "block 2" and info.value.quantity == "attention probabilities"


def test_mpt_is_alibi_with_its_context_and_scale() -> None:
    view = build_case(ROWS["mpt-6-heads"])
    assert view.position.kind == "alibi" and view.n_ctx == 512
    assert all(b.attn.rotary is None and b.attn.scale == pytest.approx(0.2) for b in view.blocks)
    bias = view.blocks[0].attn.bias(3)  # [H, T, T]: slope_h * (j - i)
    assert torch.allclose(bias[:, 2, 0], -2 * alibi_slopes(6))


@pytest.mark.parametrize("heads", [1, 4, 6, 12, 32, 48, 56, 64])
def test_mpt_alibi_slopes_are_blooms(heads: int) -> None:
    """The MPT family reuses BLOOM's ALiBi: Hugging Face's MPT bias steps by BLOOM's slope
    per key position (at alibi_bias_max 8, the value Hugging Face always uses)."""
    from transformers.models.mpt.modeling_mpt import build_mpt_alibi_tensor

    alibi = build_mpt_alibi_tensor(heads, 3)[:, 0]  # [H, 3]: -2 m, -m, 0
    assert torch.allclose(alibi[:, 1:] - alibi[:, :-1], alibi_slopes(heads)[:, None])


def test_mpt_options_hugging_face_does_not_compute_are_refused() -> None:
    config = transformers.MptConfig(
        attn_config=dict(alibi=False, qk_ln=True, clip_qkv=6.0),
        no_bias=False,
        logit_scale=0.5,
    )
    with pytest.raises(GeomlensError) as info:
        family_for(config)
    message = str(info.value)
    assert "the mpt mapping does not handle" in message
    for named in ("alibi=True", "qk_ln=False", "clip_qkv=None", "no_bias=False"):
        assert named in message, named
    assert "logit_scale=0.5" in message


@pytest.mark.parametrize("ratio", [2, 8])
def test_mpt_expansion_ratio_only_sets_a_width(ratio: int) -> None:
    """An ``expansion_ratio`` other than 4 is handled: the view reads the MLP's width from
    its weights, and its logits equal Hugging Face's."""
    config = transformers.MptConfig(
        d_model=32, n_heads=4, n_layers=2, vocab_size=96, max_seq_len=64, expansion_ratio=ratio
    )
    family = family_for(config)
    assert family.name == "mpt"
    torch.manual_seed(0)
    model = transformers.MptForCausalLM(config).eval().requires_grad_(False)
    view = family.build(model, None, "mpt", "memory")
    check = check_view(view)  # raises where a block or the logits differ from Hugging Face's
    assert check.max_error["logits"] < 1e-4
