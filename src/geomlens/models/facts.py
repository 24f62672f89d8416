"""What a model's own files say before its weights load: its position limit, its layers,
whether it is an encoder, and its tokenizer, read from ``config.json`` and
``tokenizer.json`` alone.

Loading a model imports its Hugging Face modelling code, reads every weight and runs the
on-load check (a forward pass): seconds. The commands check a walk text, a prompt, concept
items, generation lengths, ``--length`` and ``--layers`` against these facts first, with
the same check functions they apply to the loaded model, so a text the model cannot take
is refused at once and leaves no run folder behind.

The facts are exact or absent: ``model_facts`` gives None where the files do not settle
them as Hugging Face would (no ``tokenizer.json``, a tokenizer class that rebuilds its
pipeline, a config that leaves a size to its class's default or names it otherwise, an
encoder-decoder, a model with its own code); the commands then check the loaded model, as
they always do after loading. A wrong early refusal is impossible where the facts exist:
``tests/models/test_facts.py`` compares them with the loaded views and tokenizers.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from tokenizers import Tokenizer

    from geomlens.models.view import ModelView

PLAIN_TOKENIZERS = frozenset(
    {
        "TokenizersBackend",
        "PreTrainedTokenizerFast",
        "BertTokenizer",
        "BertTokenizerFast",
        "GPT2Tokenizer",
        "GPT2TokenizerFast",
    }
)
"""Tokenizer classes whose Hugging Face tokenizer runs ``tokenizer.json`` as it is (with
truncation and padding off); others may rebuild their normaliser or special tokens."""


NESTED_CONFIGS = ("text_config", "vision_config", "audio_config", "decoder", "encoder")
"""Keys of composite configs, whose sizes lie in a nested config the loader reads."""


class FileTokenizer:
    """A model's ``tokenizer.json`` called as its Hugging Face tokenizer is by the checks:
    ``tok(text, add_special_tokens=..., return_offsets_mapping=...)["input_ids"]``."""

    def __init__(self, backend: Tokenizer, bos_token_id: int | None, eos_token_id: int | None):
        backend.no_truncation()
        backend.no_padding()
        self.backend = backend
        self.bos_token_id = bos_token_id
        self.eos_token_id = eos_token_id

    def __call__(
        self, text: str, add_special_tokens: bool = True, return_offsets_mapping: bool = False
    ) -> dict[str, list[Any]]:
        encoding = self.backend.encode(text, add_special_tokens=add_special_tokens)
        out: dict[str, list[Any]] = {"input_ids": list(encoding.ids)}
        if return_offsets_mapping:
            out["offset_mapping"] = [tuple(o) for o in encoding.offsets]
        return out

    def decode(self, ids: Sequence[int]) -> str:
        return str(self.backend.decode(list(ids), skip_special_tokens=False))


@dataclass(frozen=True)
class ModelFacts:
    """The fields of a ``ModelView`` that the checks before a run read (see ``as_view``).

    Attributes:
        name: what the user asked for; source: the model's folder.
        n_layers: blocks of the main stack; n_ctx: positions it accepts (None: unbounded).
        is_encoder: an encoder-only model; tokenizer: a ``FileTokenizer``.
    """

    name: str
    source: str
    family: str
    n_layers: int
    n_ctx: int | None
    is_encoder: bool
    tokenizer: FileTokenizer

    @property
    def is_seq2seq(self) -> bool:
        return False  # encoder-decoders are read from the loaded model (see model_facts)

    @property
    def kind(self) -> str:
        return "encoder" if self.is_encoder else "decoder"

    @property
    def generates(self) -> bool:
        return not self.is_encoder


def as_view(facts: ModelFacts) -> ModelView:
    """``facts`` where a check takes a ``ModelView``: the checks before a run read only the
    name, positions, layers, kind and tokenizer, which ``ModelFacts`` has."""
    return cast("ModelView", facts)


class ConfigFields:
    """A raw config.json read by attribute, as the families' ``dims`` read a config: a
    missing field is missing (AttributeError), never a class default."""

    ALIASES = {
        "max_position_embeddings": "n_positions",
        "num_hidden_layers": "n_layer",
        "hidden_size": "n_embd",
        "num_attention_heads": "n_head",
    }
    """Hugging Face's ``attribute_map`` of the GPT-2-style configs (GPT-2, GPT-J, CodeGen,
    BigCode), used only where the standard name is absent."""

    def __init__(self, raw: dict[str, Any]):
        self._raw = raw

    def __getattr__(self, name: str) -> Any:
        raw = self.__dict__["_raw"]
        if name in raw:
            return raw[name]
        alias = ConfigFields.ALIASES.get(name)
        if alias is not None and alias in raw:
            return raw[alias]
        raise AttributeError(name)


def read_json(path: Path) -> dict[str, Any] | None:
    """A JSON object from ``path``, or None when it is missing or not one."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError):
        return None
    return data if isinstance(data, dict) else None


def token_id(backend: Tokenizer, value: Any) -> int | None:
    """The id of a special token as tokenizer_config.json names it (a string or a dict)."""
    text = value.get("content") if isinstance(value, dict) else value
    return backend.token_to_id(text) if isinstance(text, str) else None


def file_tokenizer(folder: Path) -> FileTokenizer | None:
    """The folder's ``tokenizer.json`` when its Hugging Face tokenizer runs it unchanged."""
    path = folder / "tokenizer.json"
    settings = read_json(folder / "tokenizer_config.json") or {}
    if not path.exists() or settings.get("tokenizer_class") not in PLAIN_TOKENIZERS:
        return None
    if "add_bos_token" in settings or "add_eos_token" in settings:
        return None  # Hugging Face rebuilds the post-processor from these
    from tokenizers import Tokenizer

    try:
        backend = Tokenizer.from_file(str(path))
    except Exception:  # the loader reports a broken tokenizer in its own words
        return None
    special = read_json(folder / "special_tokens_map.json") or {}
    ids = {
        key: token_id(backend, settings.get(key, special.get(key)))
        for key in ("bos_token", "eos_token")
    }
    return FileTokenizer(backend, ids["bos_token"], ids["eos_token"])


def size(value: Any) -> bool:
    """Whether ``value`` is a size a model can have: a whole number of at least 1."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def model_facts(name: str, revision: str | None = None) -> ModelFacts | None:
    """The facts of the model ``name`` names (as ``load_model`` takes it), or None where
    its files do not settle them exactly.

    A name that is no model (not bundled, no such folder, nothing in the local cache) is
    refused here, in the loader's words. A bundled GGUF model not yet converted is
    converted first (once), as loading it would.

    Raises:
        GeomlensError: for a name or folder that holds no model.
    """
    from geomlens.models.families import FAMILIES
    from geomlens.models.families.base import Dims
    from geomlens.models.loading import resolve_folder

    folder = resolve_folder(name, revision)
    raw = read_json(folder / "config.json")
    if raw is None or "auto_map" in raw or any(key in raw for key in NESTED_CONFIGS):
        return None  # the loader reports it, runs the model's own code, or reads the nesting
    model_type = raw.get("model_type")
    family = next((f for f in FAMILIES if model_type in f.model_types), None)
    if family is None or family.builder is not None:
        return None
    try:
        dims: Dims = family.dims(ConfigFields(raw))
    except (AttributeError, TypeError, KeyError, ValueError, ZeroDivisionError):
        return None
    if not size(dims.n_layers) or not (dims.n_ctx is None or size(dims.n_ctx)):
        return None  # the loader refuses sizes no model can have, in its own words
    tokenizer = file_tokenizer(folder)
    if tokenizer is None:
        return None
    if not family.is_encoder and tokenizer.bos_token_id is None and tokenizer.eos_token_id is None:
        return None  # the class may name them: the loaded tokenizer decides
    return ModelFacts(
        name=name,
        source=str(folder),
        family=family.name,
        n_layers=dims.n_layers,
        n_ctx=dims.n_ctx,
        is_encoder=family.is_encoder,
        tokenizer=tokenizer,
    )


def check_before_loading(
    model: str, check: Callable[[ModelView], object], revision: str | None = None
) -> None:
    """Run ``check`` on the facts of ``model`` (a hub id's at ``revision``) where its files
    settle them; a name that is no model is refused here. The same check runs on the loaded
    model later."""
    facts = model_facts(model, revision)
    if facts is not None:
        check(as_view(facts))


__all__ = [
    "FileTokenizer",
    "ModelFacts",
    "as_view",
    "check_before_loading",
    "model_facts",
]
