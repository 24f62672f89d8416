"""The libraries that wrap a transformers model, as their users build them: PEFT
(``get_peft_model``), nnsight (``LanguageModel``) and TransformerLens (``TransformerBridge``),
each passed as ``model=`` to ``geomlens.activations`` and ``geomlens.decompose``.

Each is read as the transformers model it wraps, with the numbers of that model's own
forward pass, or refused in one sentence that says what to pass. Each test runs only where
its library is installed (the ``wrappers`` extra installs all three)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
import transformers
from tiny_models import saved_llama

import geomlens
from geomlens.errors import GeomlensError
from geomlens.models.identity import weights_hash

TEXTS = ["The cat sat on the mat.", "Markets fell on Monday as investors waited."]

SMALL = dict(corpus="bbc", contexts=6, length=16, figures="none", progress=False)
"""A tiny capture: six BBC windows of 16 tokens, no figures."""

LORA_TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "down_proj"]


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny Llama (``saved_llama``) saved with its tokenizer."""
    return saved_llama(tmp_path_factory.mktemp("wrappers") / "llama")


def hf(folder: Path) -> Any:
    """The tiny Llama as transformers loads it (a fresh copy)."""
    return transformers.AutoModelForCausalLM.from_pretrained(folder).eval()


@pytest.fixture(scope="module")
def plain(folder: Path) -> geomlens.Activations:
    """The plain model's hidden states and logits on ``TEXTS``."""
    return geomlens.activations(hf(folder), TEXTS, logits=True)


def assert_same(got: geomlens.Activations, want: geomlens.Activations) -> None:
    for a, b in zip(got.hidden_states + got.logits, want.hidden_states + want.logits, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)


def shares(run: geomlens.Result) -> list[float]:
    return [row["share_pos"] for row in run.metrics["decomposition"]["layers"]]


def lora(folder: Path) -> Any:
    """The tiny Llama under a LoRA adapter whose weights are not zero (so it changes what the
    model computes), unmerged, as ``get_peft_model`` returns it."""
    peft = pytest.importorskip("peft")
    torch.manual_seed(1)
    config = peft.LoraConfig(
        r=4, lora_alpha=8, target_modules=LORA_TARGETS, init_lora_weights=False
    )
    return peft.get_peft_model(hf(folder), config).eval()


def hf_forward(model: Any, activations: geomlens.Activations) -> list[torch.Tensor]:
    """``model``'s own logits on the token ids geomlens read."""
    with torch.no_grad():
        return [model(input_ids=ids[None]).logits[0] for ids in activations.input_ids]


def test_peft_lora_is_read_merged_and_refused_unmerged(folder, plain, tmp_path):
    model = lora(folder)
    with pytest.raises(GeomlensError, match=r"not merged\).*merge_adapter\(\)") as refused:
        geomlens.activations(model, TEXTS)
    assert "\n" not in str(refused.value)
    with model.disable_adapter():  # adapters off: the base model, exactly
        assert_same(geomlens.activations(model, TEXTS, logits=True), plain)
    adapted = hf_forward(model, plain)  # the forward pass with the adapters applied

    model.merge_adapter()
    merged = geomlens.activations(model, TEXTS, logits=True)
    for got, want in zip(merged.logits, adapted, strict=True):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    assert not torch.allclose(merged.logits[0], plain.logits[0], atol=1e-3)

    # its identity is its weights, adapters included: never the base model's run
    out = tmp_path / "run"
    run = geomlens.decompose(model=model, out=out, **SMALL)
    record = json.loads((run.folder / "manifest.json").read_text())
    assert record["model_fingerprint"].startswith("weights-v1:")
    assert weights_hash(model.get_base_model()) != weights_hash(hf(folder))
    with pytest.raises(GeomlensError, match="its model changed since it finished"):
        geomlens.decompose(model=hf(folder), out=out, **SMALL)

    # the same numbers as the model with the adapter merged and the PEFT layers removed
    unloaded = model.merge_and_unload()
    assert_same(geomlens.activations(unloaded, TEXTS, logits=True), merged)


def test_peft_prompt_learning_is_refused(folder):
    peft = pytest.importorskip("peft")
    config = peft.PromptTuningConfig(task_type="CAUSAL_LM", num_virtual_tokens=3)
    model = peft.get_peft_model(hf(folder), config)
    with pytest.raises(GeomlensError, match=r"prompt learning.*get_base_model\(\)"):
        geomlens.activations(model, TEXTS)


def test_nnsight_language_model_is_read_as_its_model(folder, plain, tmp_path, capsys):
    nnsight = pytest.importorskip("nnsight")
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    model = hf(folder)
    wrapped = nnsight.LanguageModel(model, tokenizer=tokenizer)
    assert_same(geomlens.activations(wrapped, TEXTS, logits=True), plain)
    assert "inside nnsight's LanguageModel" in capsys.readouterr().err
    run = geomlens.decompose(model=wrapped, out=tmp_path / "wrapped", **SMALL)
    assert shares(run) == shares(geomlens.decompose(model=model, out=tmp_path / "plain", **SMALL))

    lazy = nnsight.LanguageModel(str(folder), tokenizer=tokenizer)  # weights not loaded
    with pytest.raises(GeomlensError, match=r"meta device.*dispatch=True"):
        geomlens.activations(lazy, TEXTS)


def test_transformer_lens_bridge_is_read_as_transformers_built_it(folder, tmp_path):
    bridges = pytest.importorskip("transformer_lens.model_bridge")
    bridge = bridges.TransformerBridge.boot_transformers(str(folder), device="cpu")
    # the bridge's own tokenizer (TransformerLens's: it adds the BOS token) goes with it
    tokenizer = bridge.tokenizer
    plain = geomlens.activations(hf(folder), TEXTS, logits=True, tokenizer=tokenizer)
    got = geomlens.activations(bridge, TEXTS, logits=True)
    assert got.input_ids[0][0] == tokenizer.bos_token_id
    assert_same(got, plain)
    run = geomlens.decompose(model=bridge, out=tmp_path / "bridge", **SMALL)
    want = geomlens.decompose(model=hf(folder), tokenizer=tokenizer, out=tmp_path / "hf", **SMALL)
    assert shares(run) == pytest.approx(shares(want), abs=1e-6)

    # the user's bridge is left as it was: its components in place, its hooks working
    assert hasattr(bridge.original_model.model.layers[0], "_original_component")
    logits, cache = bridge.run_with_cache(plain.input_ids[0][None])
    torch.testing.assert_close(logits[0], plain.logits[0], rtol=1e-5, atol=1e-5)
    assert any(name.startswith("blocks.0.") for name in cache)
