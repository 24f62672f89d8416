"""A model's identity from what it holds: a streaming hash of its weights, with its config
and tokenizer.

A model loaded from files is identified by those files (``runs.runfolder.model_fingerprint``).
A model handed over in memory has no files, and a view whose weights were edited after
loading no longer matches its files: both are identified by their weights as they are now.
The hash reads one tensor at a time (a GPU tensor is copied to the CPU alone), so it never
holds a second copy of the model.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import torch

WEIGHTS_VERSION = "weights-v1"
"""Prefix of the fingerprint of a model identified by its weights in memory."""

IN_MEMORY = "model in memory"
"""What the manifest and the page say a model in memory was loaded from."""

VOLATILE_CONFIG = ("_name_or_path", "transformers_version", "_attn_implementation_autoset")
"""Config keys that say where or how a model was loaded, not what it computes."""


@dataclass(frozen=True)
class HeldIdentity:
    """What a view remembers of its weights from the moment it was made.

    Attributes:
        in_memory: the model was given as an object (no files identify it).
        weights_at_load: ``weights_hash`` of the model when the view was made; a later hash
            that differs means the weights were edited since.
        own_name: the model's own name (``name_or_path``), or "" when it has none.
        quantization: ``quantization(model)``: the method and bits, or None.
    """

    in_memory: bool
    weights_at_load: str
    own_name: str = ""
    quantization: dict[str, Any] | None = None


def tensor_bytes(tensor: torch.Tensor) -> Iterator[memoryview]:
    """The bytes of one tensor as stored, without copying a contiguous CPU tensor; a
    quantised tensor subclass (torchao) gives the bytes of the tensors it is made of."""
    flatten = getattr(tensor, "__tensor_flatten__", None)
    if type(tensor) not in (torch.Tensor, torch.nn.Parameter) and flatten is not None:
        names, _ = flatten()
        for name in names:
            yield memoryview(name.encode())
            yield from tensor_bytes(getattr(tensor, name))
        return
    data = tensor.detach()
    if data.device.type != "cpu":
        data = data.cpu()
    data = data.contiguous()
    if data.numel():
        array: Any = data.reshape(-1).view(torch.uint8).numpy()
        yield memoryview(array)


def weights_hash(model: torch.nn.Module) -> str:
    """sha256 over every entry of the model's state dict, by name: its name, shape, dtype
    and bytes. A tensor shared under several names (tied weights) is read once; an
    offloaded one (accelerate's ``device_map``) is read from where accelerate keeps it."""
    from geomlens.models.placement import offloaded_weights

    h = hashlib.sha256()
    first: dict[tuple[Any, ...], str] = {}
    state = model.state_dict()
    stored = offloaded_weights(model)  # weights accelerate keeps on disk or in host memory
    for name in sorted(state):
        tensor = state[name]
        h.update(f"{name}|{tuple(tensor.shape)}|{tensor.dtype}\n".encode())
        if tensor.device.type == "meta" and name in stored:
            weights_map, stored_as = stored[name]
            tensor = weights_map[stored_as]  # read one tensor at a time
        where: tuple[Any, ...] = (tensor.device, tensor.data_ptr(), tensor.dtype)
        where += (tuple(tensor.shape), tensor.stride())
        if tensor.data_ptr() and where in first:
            h.update(f"={first[where]}\n".encode())
            continue
        first[where] = name
        for part in tensor_bytes(tensor):
            h.update(part)
    return h.hexdigest()


def config_text(config: Any) -> str:
    """The model config as sorted JSON, without the keys that say where it was loaded from."""
    raw = config.to_dict() if hasattr(config, "to_dict") else dict(vars(config))
    kept = {k: v for k, v in raw.items() if k not in VOLATILE_CONFIG}
    return json.dumps(kept, sort_keys=True, default=str)


def tokenizer_text(tokenizer: Any) -> str:
    """What decides a tokenizer's ids: its full definition where it has one (a fast
    tokenizer's JSON), else its vocabulary; with its class and special tokens."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None:
        body = backend.to_str()
    else:
        body = json.dumps(sorted(tokenizer.get_vocab().items()))
    special = getattr(tokenizer, "special_tokens_map", {})
    return f"{type(tokenizer).__name__}|{json.dumps(special, sort_keys=True, default=str)}|{body}"


def held_fingerprint(model: Any, tokenizer: Any, weights: str | None = None) -> str:
    """The identity of a model by what it holds: its weights (``weights_hash``, or the one
    given), its config and its tokenizer."""
    h = hashlib.sha256()
    h.update(f"weights|{weights or weights_hash(model)}\n".encode())
    h.update(f"config|{config_text(model.config)}\n".encode())
    h.update(f"tokenizer|{tokenizer_text(tokenizer)}\n".encode())
    return f"{WEIGHTS_VERSION}:{h.hexdigest()}"


def _plain(value: Any) -> Any:
    """An enum's value (``QuantizationMethod.GPTQ`` -> "gptq"), else the value."""
    return getattr(value, "value", value)


def quantization(model: Any) -> dict[str, Any] | None:
    """How the model's weights are quantised, from its ``quantization_config`` (or its
    ``hf_quantizer``'s): {"method": "gptq", "bits": 4}; bits None where the config does not
    say. None for a model without a quantisation config."""
    config = getattr(getattr(model, "config", None), "quantization_config", None)
    if config is None:
        config = getattr(getattr(model, "hf_quantizer", None), "quantization_config", None)
    if config is None:
        return None
    if isinstance(config, Mapping):
        raw = dict(config)
    elif hasattr(config, "to_dict"):
        raw = config.to_dict()
    else:
        raw = dict(vars(config))
    method = _plain(raw.get("quant_method") or getattr(config, "quant_method", None))
    bits = raw.get("bits") or raw.get("w_bit") or raw.get("weight_bits")
    if bits is None and raw.get("load_in_4bit"):
        bits = 4
    elif bits is None and raw.get("load_in_8bit"):
        bits = 8
    if not isinstance(bits, (int, float)) or isinstance(bits, bool):
        bits = None
    return {"method": str(method or "unknown"), "bits": None if bits is None else int(bits)}


def quantization_words(quant: Mapping[str, Any]) -> str:
    """{"method": "gptq", "bits": 4} as words: "quantised weights (gptq, 4-bit)"."""
    bits = f", {quant['bits']}-bit" if quant.get("bits") else ""
    return f"quantised weights ({quant.get('method', 'unknown')}{bits})"
