"""GGUF beyond Llama: tiny GGUF files of four more families, written here with the ``gguf``
package's writer as llama.cpp's converter lays them out (its tensor names, config keys and
a byte-level BPE vocabulary with merges), then loaded by ``load_model`` end to end: the
conversion to a float32 folder, the family's view and the on-load check against Hugging
Face. Each must equal the same weights saved as safetensors: every tensor, the tokenizer's
ids on real text and the logits.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gguf
import numpy as np
import pytest
import torch
import transformers
from tiny_models import small_tokenizer

import geomlens
from geomlens.errors import GeomlensError
from geomlens.models import ModelView, load_model


@dataclass(frozen=True)
class GgufCase:
    """One family: its HF model type, llama.cpp's architecture and the config it is built
    with (every option a GGUF carries or the reader's defaults give back)."""

    model_type: str
    arch: gguf.MODEL_ARCH
    options: dict[str, Any] = field(default_factory=dict)


SIZES: dict[str, Any] = dict(
    hidden_size=32,
    intermediate_size=48,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=64,
)

CASES = [
    GgufCase("qwen2", gguf.MODEL_ARCH.QWEN2, dict(rope_theta=1e6, tie_word_embeddings=True)),
    GgufCase("stablelm", gguf.MODEL_ARCH.STABLELM, dict(use_qkv_bias=True)),
    GgufCase("starcoder2", gguf.MODEL_ARCH.STARCODER2),
    GgufCase("phi3", gguf.MODEL_ARCH.PHI3, dict(rope_theta=1e4)),
]

TEXT = "The government said on Tuesday that the new rules would apply from next year."


def _tiny_model(case: GgufCase, tokenizer: Any, seed: int = 0) -> Any:
    eot = tokenizer.eos_token_id
    options = dict(bos_token_id=eot, eos_token_id=eot, pad_token_id=eot, **case.options)
    config = transformers.CONFIG_MAPPING[case.model_type](
        vocab_size=len(tokenizer), **SIZES, **options
    )
    torch.manual_seed(seed)
    model = transformers.AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    with torch.no_grad():  # move norm gains and biases off 1 and 0
        for p in model.parameters():
            if p.ndim == 1:
                p.add_(0.2 * torch.randn_like(p))
    return model.eval()


def _write_metadata(writer: gguf.GGUFWriter, config: Any, tokenizer: Any) -> None:
    """The hyperparameters and vocabulary as llama.cpp's converter writes them."""
    writer.add_name(config.model_type)
    writer.add_context_length(config.max_position_embeddings)
    writer.add_block_count(config.num_hidden_layers)
    writer.add_embedding_length(config.hidden_size)
    writer.add_feed_forward_length(config.intermediate_size)
    writer.add_head_count(config.num_attention_heads)
    writer.add_head_count_kv(config.num_key_value_heads)
    writer.add_vocab_size(config.vocab_size)
    theta = (config.rope_parameters or {}).get("rope_theta")
    if theta is not None:
        writer.add_rope_freq_base(float(theta))
    if hasattr(config, "rms_norm_eps"):
        writer.add_layer_norm_rms_eps(config.rms_norm_eps)
    else:
        eps = getattr(config, "layer_norm_eps", None) or config.norm_epsilon
        writer.add_layer_norm_eps(eps)
    vocab = tokenizer.get_vocab()
    tokens = sorted(vocab, key=vocab.__getitem__)
    special = set(tokenizer.all_special_ids)
    model = json.loads(tokenizer.backend_tokenizer.to_str())["model"]
    merges = [m if isinstance(m, str) else " ".join(m) for m in model["merges"]]
    writer.add_tokenizer_model("gpt2")
    writer.add_token_list(tokens)
    writer.add_token_types(
        [
            gguf.TokenType.CONTROL if i in special else gguf.TokenType.NORMAL
            for i in range(len(tokens))
        ]
    )
    writer.add_token_merges(merges)
    writer.add_bos_token_id(tokenizer.bos_token_id)
    writer.add_eos_token_id(tokenizer.eos_token_id)
    writer.add_pad_token_id(tokenizer.pad_token_id or tokenizer.eos_token_id)


def write_gguf(model: Any, tokenizer: Any, arch: gguf.MODEL_ARCH, path: Path) -> None:
    """``model``'s float32 weights under llama.cpp's tensor names for ``arch`` (names from
    the ``gguf`` package's own table, the one its converter uses), with its tokenizer."""
    config = model.config
    names = gguf.get_tensor_name_map(arch, config.num_hidden_layers)
    writer = gguf.GGUFWriter(path, gguf.MODEL_ARCH_NAMES[arch])
    _write_metadata(writer, config, tokenizer)
    for hf_name, tensor in model.state_dict().items():
        if hf_name == "lm_head.weight" and config.tie_word_embeddings:
            continue  # a tied head is the file's absent output.weight
        name = names.get_name(hf_name, try_suffixes=(".weight", ".bias"))
        assert name is not None, f"{arch.name}: no GGUF name for {hf_name}"
        writer.add_tensor(name, np.ascontiguousarray(tensor.numpy(), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


@pytest.fixture(scope="module")
def tokenizer() -> Any:
    return small_tokenizer(False)


@pytest.fixture(autouse=True)
def private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Conversions land in this test's own cache, not the user's."""
    monkeypatch.setenv("GEOMLENS_CACHE", str(tmp_path / "cache"))


def _logits(view: ModelView, ids: torch.Tensor) -> torch.Tensor:
    with torch.inference_mode():
        return view.model(input_ids=ids).logits


@pytest.mark.parametrize("case", CASES, ids=[c.model_type for c in CASES])
def test_gguf_loads_equal_to_the_same_weights_from_safetensors(
    case: GgufCase, tokenizer: Any, tmp_path: Path
) -> None:
    model = _tiny_model(case, tokenizer)
    folder = tmp_path / "safetensors"
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    path = tmp_path / f"tiny-{case.model_type}.gguf"
    write_gguf(model, tokenizer, case.arch, path)

    from_gguf = load_model(path)  # converted, viewed and checked against HF
    from_folder = load_model(folder)
    assert from_gguf.family == from_folder.family == case.model_type
    assert Path(from_gguf.source).parent == tmp_path / "cache" / "converted"
    assert from_gguf.load_check is not None and from_gguf.load_check.blocks == 2
    config = from_gguf.model.config
    assert config.tie_word_embeddings == model.config.tie_word_embeddings
    ours, theirs = from_gguf.model.state_dict(), from_folder.model.state_dict()
    assert ours.keys() == theirs.keys()
    for name, tensor in theirs.items():
        assert torch.equal(ours[name], tensor), f"{case.model_type}: {name} differs"
    ids = from_folder.tokenizer(TEXT)["input_ids"]
    assert from_gguf.tokenizer(TEXT)["input_ids"] == ids and len(ids) > 5
    batch = torch.tensor([ids])
    assert torch.equal(_logits(from_gguf, batch), _logits(from_folder, batch))


def test_a_gguf_edited_in_place_is_converted_again(tokenizer: Any, tmp_path: Path) -> None:
    """New bytes with the old size and modification time put back (``os.utime``): the
    conversion cache is keyed by content, so the new weights are read, and the finished run
    of the old file is not reused."""
    case = CASES[0]
    path, other = tmp_path / "tiny.gguf", tmp_path / "other.gguf"
    write_gguf(_tiny_model(case, tokenizer), tokenizer, case.arch, path)
    write_gguf(_tiny_model(case, tokenizer, seed=1), tokenizer, case.arch, other)
    small = dict(contexts=2, length=8, layers=[0, 2], progress=False, figures="none")
    out = tmp_path / "run"
    old = load_model(path)
    geomlens.capture(model=str(path), corpus=[TEXT, TEXT[::-1]], out=out, **small)

    was = path.stat()
    new_bytes = other.read_bytes()
    assert len(new_bytes) == was.st_size  # the same layout, other weights
    with open(path, "r+b") as f:  # in place: the same inode
        f.write(new_bytes)
    os.utime(path, ns=(was.st_atime_ns, was.st_mtime_ns))
    now = path.stat()
    assert (now.st_ino, now.st_size, now.st_mtime_ns) == (was.st_ino, was.st_size, was.st_mtime_ns)

    edited = load_model(path)
    assert edited.source != old.source
    assert torch.equal(edited.W_E, load_model(other).W_E)
    assert not torch.equal(edited.W_E, old.W_E)
    with pytest.raises(GeomlensError, match="its model changed since it finished"):
        geomlens.capture(model=str(path), corpus=[TEXT, TEXT[::-1]], out=out, **small)


def test_a_conversion_that_cannot_be_written_is_one_sentence(tokenizer: Any, tmp_path: Path):
    """The disk fills while the converted folder is written (here: a file-size limit on the
    process, so the write fails as a full disk does, from inside safetensors): one sentence
    naming the cache and the reason, exit 2, and no half-written conversion left."""
    case = CASES[0]
    path = tmp_path / "tiny.gguf"
    write_gguf(_tiny_model(case, tokenizer), tokenizer, case.arch, path)

    def small_files() -> None:  # in the child: writes past 64 KiB fail with EFBIG
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (64 << 10, 64 << 10))

    argv = ["capture", "--model", str(path), "--contexts", "2", "--length", "8", "--quiet"]
    done = subprocess.run(
        [sys.executable, "-m", "geomlens.cli", *argv, "--out", str(tmp_path / "run")],
        preexec_fn=small_files,
        capture_output=True,
        text=True,
        env={**os.environ, "GEOMLENS_CACHE": str(tmp_path / "cache")},
        timeout=300,
    )
    converted = tmp_path / "cache" / "converted"
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines()[-1] == (  # after the conversion's progress
        f"geomlens: error: cannot write the converted model under {converted} (File too large); "
        "free some space there, or set GEOMLENS_CACHE to a folder with room, and rerun."
    )
    assert not list(converted.iterdir())
