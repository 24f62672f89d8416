"""``load_model``: a bundled name, an HF id in the local cache, a folder or a GGUF file."""

from __future__ import annotations

import difflib
import json
import os
import re
import sys
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any, Protocol

import torch
from safetensors import SafetensorError

from geomlens.errors import GeomlensError, one_line
from geomlens.io.files import check_weight_headers
from geomlens.models.bundled import BUNDLED, BundledModel
from geomlens.models.cache import converted_dir, file_key, publish
from geomlens.models.check import (  # noqa: F401 (eager_attention re-exported)
    CheckFailed,
    check_view,
    eager_attention,
)
from geomlens.models.families import REFUSED, UndeclaredType, family_for, layouts_for
from geomlens.models.families.base import Family
from geomlens.models.families.wrappers import TEXT_WRAPPERS
from geomlens.models.hub import hub_folder, is_hub_id, shown
from geomlens.models.identity import IN_MEMORY, HeldIdentity, quantization, weights_hash
from geomlens.models.placement import (
    check_placement,
    materialised,
    offload_refused,
    on_demand,
    placement,
)
from geomlens.models.view import ModelView
from geomlens.stats.finite import require_finite_weights

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def quiet_transformers() -> None:
    """Keep Hugging Face's progress bars and advice out of the user's terminal (and
    accelerate's notice that offloaded parameters sit on the meta device: the manifest
    records the placement)."""
    import logging as std_logging

    from transformers.utils import logging

    logging.set_verbosity_error()
    logging.disable_progress_bar()
    std_logging.getLogger("accelerate.big_modeling").setLevel(std_logging.ERROR)


def resolve_dtype(dtype: str | torch.dtype) -> torch.dtype:
    if isinstance(dtype, torch.dtype):
        return dtype
    if dtype not in DTYPES:
        raise GeomlensError(f"unknown dtype {dtype!r}; use one of {', '.join(DTYPES)}.")
    return DTYPES[dtype]


class LoadOptions(Protocol):
    """What a command's config says about loading its model (every config has these)."""

    @property
    def model(self) -> str: ...
    @property
    def device(self) -> str: ...
    @property
    def dtype(self) -> str: ...
    @property
    def trust_remote_code(self) -> bool: ...


def load_configured(config: LoadOptions, attention: str = "sdpa") -> ModelView:
    """``load_model`` with a command config's model, device, dtype and trust setting: the
    one place a command loads its model."""
    return load_named(
        config.model,
        device=config.device,
        dtype=config.dtype,
        attention=attention,
        trust_remote_code=config.trust_remote_code,
        revision=getattr(config, "revision", None),  # a config that declares them
        device_map=getattr(config, "device_map", None),
        max_memory=getattr(config, "max_memory", None),
        offload_folder=getattr(config, "offload_folder", None),
    )


def load_model(
    name_or_path: str | os.PathLike[str] | Any,
    *,
    tokenizer: Any = None,
    device: str | torch.device | None = None,
    dtype: str | torch.dtype | None = None,
    attention: str = "sdpa",
    trust_remote_code: bool = False,
    revision: str | None = None,
    device_map: str | dict[str, Any] | None = None,
    max_memory: dict[str, Any] | None = None,
    offload_folder: str | os.PathLike[str] | None = None,
) -> ModelView:
    """Load a model and return its ``ModelView``.

    Nothing in a model's files runs as code: weights load from safetensors or GGUF only
    (never from pickled ``.bin`` files), and a folder whose config asks for its own Python
    code (``auto_map``) is refused unless ``trust_remote_code`` is set.

    The view remembers the hash of its weights at load (``models.identity``): a run given
    this view after its weights were edited in memory is identified by the weights, not
    by the files they were loaded from.

    Args:
        name_or_path: a bundled name (``geomlens models``), a local folder with
            ``config.json``, a ``.gguf`` file (converted once to a cached float32 folder),
            a Hugging Face id (``owner/name``: downloaded once into Hugging Face's
            cache, config, tokenizer and safetensors only; ``HF_HUB_OFFLINE=1``: the cache
            alone), or a model already in memory (``load_held``).
        tokenizer: for a model in memory, its tokenizer (found locally from the model's
            ``name_or_path`` when not given).
        device: where the model runs (default "cpu", without ``device_map``; a model in
            memory stays where it is).
        dtype: "float32", "bfloat16" or "float16" (default "float32"; a model in memory
            keeps its own).
        attention: the HF attention implementation; "eager" is needed for attention weights.
        trust_remote_code: let Hugging Face import Python code shipped with the model
            (``--trust-remote-code``); off by default.
        revision: a hub id's branch, tag or commit (default: its main branch).
        device_map: "auto", "balanced", "balanced_low_0", "sequential" or a dict of module
            names to devices ("cpu", "disk", "cuda:1", ...): accelerate spreads the model
            over several devices or offloads part of it (``models.placement``).
        max_memory: with ``device_map``, the most each device may hold ({"0": "20GiB",
            "cpu": "64GiB"}).
        offload_folder: with ``device_map``, where modules placed on "disk" are kept.
    """
    if not isinstance(name_or_path, (str, os.PathLike)):
        return load_held(
            name_or_path, tokenizer=tokenizer, device=device, dtype=dtype, attention=attention
        )
    view = load_named(
        name_or_path,
        device=device or "cpu",
        dtype=dtype or "float32",
        attention=attention,
        trust_remote_code=trust_remote_code,
        revision=revision,
        device_map=device_map,
        max_memory=max_memory,
        offload_folder=offload_folder,
    )
    identity = HeldIdentity(in_memory=False, weights_at_load=weights_hash(view.model))
    return replace(view, identity=identity)


def load_named(
    name_or_path: str | os.PathLike[str],
    *,
    device: str | torch.device = "cpu",
    dtype: str | torch.dtype = "float32",
    attention: str = "sdpa",
    trust_remote_code: bool = False,
    revision: str | None = None,
    device_map: str | dict[str, Any] | None = None,
    max_memory: dict[str, Any] | None = None,
    offload_folder: str | os.PathLike[str] | None = None,
) -> ModelView:
    """``load_model`` of a name, folder, GGUF file or hub id (what a command loads: no
    weights hash, since nothing but the command holds the view)."""
    quiet_transformers()
    check_device_and_attention(device, attention)
    check_placement(device_map, max_memory, offload_folder)
    name = str(name_or_path)
    folder = resolve_folder(name, revision, trust_remote_code)
    return load_folder(
        folder,
        name,
        device=device,
        dtype=resolve_dtype(dtype),
        attention=attention,
        trust_remote_code=trust_remote_code,
        placed=placement(device_map, max_memory, offload_folder),
    )


QUANTISED_TOLERANCE = 6e-2
"""The on-load check's tolerance for a model with quantised weights: their kernels
dequantise into a 16-bit compute dtype and accumulate there (bitsandbytes, GPTQ and AWQ
default to float16, torchao to the activations' dtype), so the view's rebuild in the
weights' own dtype agrees to 16-bit rounding at best; the bfloat16 bound (8 bits of
mantissa over a few dozen operations) covers both 16-bit types."""


def load_held(
    obj: Any,
    *,
    tokenizer: Any = None,
    device: str | torch.device | None = None,
    dtype: str | torch.dtype | None = None,
    attention: str = "sdpa",
) -> ModelView:
    """The view of a model already in memory: a transformers ``PreTrainedModel`` (or a
    wrapper around one, ``models.held.unwrap``), seen as a folder's model is.

    The model is used where it is and as it is: not moved, not cast, its
    ``quantization_config`` kept; it is put in eval mode. It goes through the same family
    route (``candidate_layouts``: the options allowlist; ``through_layouts``; the hidden-state
    tier), the same tokenizer and finite-weights checks and the same on-load check
    (``QUANTISED_TOLERANCE`` for quantised weights) as a folder's.

    Raises:
        GeomlensError: an object geomlens does not read, no tokenizer, weights not loaded,
            a device or dtype asked for that the model does not have, an option its family
            does not handle, or an on-load check that fails.
    """
    from geomlens.models.held import check_materialised, find_tokenizer, own_name, unwrap

    quiet_transformers()
    model, wrapped_tokenizer, wrapper = unwrap(obj)
    check_materialised(model)
    tokenizer = find_tokenizer(model, tokenizer if tokenizer is not None else wrapped_tokenizer)
    name = own_name(model)
    label = f"the model in memory ({name})"
    check_held_placement(model, device, dtype)
    check_sub_configs(Path(label), model.config)  # multimodal: read through its text model
    layouts = candidate_layouts(model.config)  # unhandled options, by name
    check_tokenizer(Path(label), tokenizer, embedding_rows(model))
    require_finite_weights(model, label)
    if attention == "eager" and model.config._attn_implementation != "eager":
        model.set_attn_implementation("eager")  # the analyses that read attention weights
    model.eval()
    quant = quantization(model)
    identity = HeldIdentity(True, weights_hash(model), name, quant)
    tolerance = QUANTISED_TOLERANCE if quant is not None else None
    if len(layouts) == 1 and family_declares(layouts[0], model.config):
        try:
            view = on_demand(layouts[0].build(model, tokenizer, name, IN_MEMORY))
        except LAYOUT_ERRORS as exc:
            raise GeomlensError(
                f"{label} is of the {layouts[0].name} family, but its modules do not have the "
                f"shapes that family reads ({layout_mismatch(exc)}); give the model loaded "
                f"with {auto_class(layouts[0].auto_class).__name__}, its weights in a "
                "floating-point dtype."
            ) from None
        view = replace(view, load_check=check_view(view, tolerance=tolerance))
    else:
        view = through_layouts(layouts, model, tokenizer, name, IN_MEMORY, tolerance)
    if wrapper:
        print(f"geomlens: reading the transformers model inside {wrapper}.", file=sys.stderr)
    return replace(view, identity=identity)


def check_held_placement(
    model: Any, device: str | torch.device | None, dtype: str | torch.dtype | None
) -> None:
    """Refuse a device or dtype asked for that a model in memory does not have: geomlens
    neither moves nor casts a model it is given."""
    weight = next(iter(model.parameters()), None)
    if weight is None:
        raise GeomlensError("the model in memory has no weights; pass a model with weights.")
    asked = None if device is None else torch.device(device)
    if asked is not None and (
        asked.type != weight.device.type or asked.index not in (None, weight.device.index)
    ):
        raise GeomlensError(
            f"the model in memory is on {weight.device}, not {device}; geomlens does not "
            "move a model it is given: move it first, or leave device out."
        )
    if dtype is not None and weight.is_floating_point() and resolve_dtype(dtype) != weight.dtype:
        have = str(weight.dtype).removeprefix("torch.")
        raise GeomlensError(
            f"the model in memory holds {have} weights, not {dtype}; geomlens does not cast "
            f"a model it is given: cast it first, or leave dtype out (or pass {have!r})."
        )


def check_device_and_attention(device: str | torch.device, attention: str) -> None:
    """Refuse a device torch does not know or this machine lacks, and an attention
    implementation Hugging Face does not have, naming the allowed values."""
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

    try:
        kind = torch.device(device).type
    except (RuntimeError, TypeError):
        kind = None
    available = {"cpu": True, "cuda": torch.cuda.is_available()}
    available["mps"] = torch.backends.mps.is_available()
    if not available.get(kind or "", False):
        usable = ", ".join(k for k, ok in available.items() if ok)
        raise GeomlensError(f"device {str(device)!r} is not available here; use one of: {usable}.")
    allowed = sorted({"eager", *ALL_ATTENTION_FUNCTIONS.valid_keys()})
    if attention not in allowed:
        raise GeomlensError(
            f"attention {attention!r} is not an attention implementation; use one of: "
            f"{', '.join(allowed)}."
        )


def resolve_folder(name: str, revision: str | None = None, code: bool = False) -> Path:
    """A local folder holding an HF model (config.json, weights, tokenizer) for ``name``;
    a hub id's at ``revision`` (downloaded into Hugging Face's cache where missing, with its
    Python files when ``code``: ``models.hub``)."""
    if name in BUNDLED:
        return bundled_folder(BUNDLED[name])
    path = Path(name).expanduser()
    if path.exists():
        if path.is_file() and path.suffix == ".gguf":
            return convert_gguf([path], path.stem)
        if path.is_dir() and (path / "config.json").exists():
            return path
        ggufs = sorted(path.glob("*.gguf")) if path.is_dir() else []
        if len(ggufs) == 1:
            return convert_gguf(ggufs, ggufs[0].stem)
        raise GeomlensError(
            f"{name!r} holds no model: give a folder with config.json, a .gguf file, "
            "or a bundled name (see `geomlens models`)."
        )
    return hub_cache_folder(name, revision, code)


def hub_cache_folder(model_id: str, revision: str | None = None, code: bool = False) -> Path:
    """The HF-cache snapshot of hub id ``model_id`` (``models.hub.hub_folder``)."""
    close = difflib.get_close_matches(model_id, list(BUNDLED), n=2, cutoff=0.4)
    hint = (
        f"did you mean {' or '.join(repr(c) for c in close)}?"
        if close
        else f"bundled names: {', '.join(BUNDLED)}."
    )
    if "/" not in model_id:
        raise GeomlensError(
            f"unknown model {shown(model_id)} (not bundled, not a folder or .gguf file): a "
            f"Hugging Face model loads by its full id, --model OWNER/NAME (downloaded once "
            f"into the Hugging Face cache), or from its folder with config.json; {hint}"
        )
    if not is_hub_id(model_id):
        raise GeomlensError(
            f"model {shown(model_id)} is neither a bundled name, a local path, nor a Hugging "
            f"Face id (OWNER/NAME); {hint}"
        )
    return hub_folder(model_id, revision, code)


def bundled_folder(model: BundledModel) -> Path:
    paths = model.part_paths()
    if paths is None:
        raise GeomlensError(
            f"model {model.name!r} is not installed; install it with: {model.install}"
        )
    return convert_gguf(paths, model.name) if model.gguf else paths[0]


def convert_gguf(parts: list[Path], stem: str) -> Path:
    """Convert a GGUF file (or its concatenated parts) once to a cached float32 HF folder."""
    final = converted_dir(stem, file_key(parts))
    if (final / "config.json").exists():
        return final
    with open(parts[0], "rb") as f:
        if f.read(4) != b"GGUF":
            raise GeomlensError(
                f"{parts[0]} is not a GGUF file (it does not start with the GGUF magic bytes); "
                "give an intact .gguf file."
            )
    final.parent.mkdir(parents=True, exist_ok=True)
    from transformers import AutoConfig, AutoTokenizer

    with tempfile.TemporaryDirectory(dir=final.parent) as scratch:
        gguf = parts[0]
        if len(parts) > 1:
            gguf = Path(scratch) / f"{stem}.gguf"
            with open(gguf, "wb") as out:
                for part in parts:
                    out.write(part.read_bytes())
        # No code runs: a GGUF names none, and the folder around it is not asked.
        kwargs: dict[str, Any] = {"gguf_file": gguf.name, "trust_remote_code": False}
        try:
            kind = auto_class_of(AutoConfig.from_pretrained(gguf.parent, **kwargs))
            print(  # only once the file proved readable: an error stays one line
                f"converting {parts[0].name} to a float32 folder once (under a minute); "
                f"cached in {final}",
                file=sys.stderr,
            )
            tokenizer = AutoTokenizer.from_pretrained(gguf.parent, **kwargs)
            model = auto_class(kind).from_pretrained(gguf.parent, dtype=torch.float32, **kwargs)
        except GeomlensError:
            raise
        except Exception as exc:
            raise GeomlensError(
                f"could not read GGUF file {gguf} ({exc}); it may be truncated or corrupt: "
                "copy it again."
            ) from None
        model.hf_quantizer = None  # type: ignore[assignment]
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
        tmp = Path(scratch) / "out"
        try:
            model.save_pretrained(tmp)
            tokenizer.save_pretrained(tmp)
        except (OSError, SafetensorError) as exc:
            raise GeomlensError(
                f"cannot write the converted model under {final.parent} ({write_failure(exc)}); "
                "free some space there, or set GEOMLENS_CACHE to a folder with room, and rerun."
            ) from None
        publish(tmp, final)
    return final


def write_failure(exc: OSError | SafetensorError) -> str:
    """The operating system's reason a write failed ("No space left on device"), also from
    a ``SafetensorError`` that carries it in its text."""
    if isinstance(exc, OSError):
        return exc.strerror or type(exc).__name__
    found = re.search(r"([A-Z][^:()]*) \(os error \d+\)", str(exc))
    return found.group(1) if found else one_line(str(exc))[:80]


def attention_for(loader: Any, config: Any, attention: str) -> str:
    """``attention``, or "eager" for model classes that cannot run it or cannot switch to
    eager attention later (BLOOM has no SDPA; Falcon cannot switch once loaded), so that
    the analyses that need attention weights still get them."""
    if attention == "eager":
        return attention
    try:
        cls = loader._model_mapping[type(config)]
    except (AttributeError, KeyError):
        return attention
    can_switch = getattr(cls, "_can_set_attn_implementation", lambda: True)()
    supported = attention != "sdpa" or getattr(cls, "_supports_sdpa", True)
    return attention if can_switch and supported else "eager"


def gguf_architectures() -> set[str]:
    """Architectures transformers reads from GGUF files (each loads like SmolLM2's)."""
    try:
        from transformers.modeling_gguf_pytorch_utils import GGUF_SUPPORTED_ARCHITECTURES
    except ImportError:
        return set()
    return set(GGUF_SUPPORTED_ARCHITECTURES)


def fallback_auto_class(config: Any) -> str:
    """The Auto class Hugging Face would load an undeclared model type with: "causal-lm"
    where it has a causal LM head, "seq2seq-lm" for an encoder-decoder, else "base"."""
    from transformers.models.auto.modeling_auto import (
        MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
        MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES,
    )

    model_type = getattr(config, "model_type", None)
    remote = set(getattr(config, "auto_map", None) or ())
    if model_type in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES or "AutoModelForCausalLM" in remote:
        return "causal-lm"
    if model_type in MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES:
        return "seq2seq-lm"
    return "base"


def auto_class_of(config: Any) -> str:
    """The Auto class a config loads with: its family's, or (undeclared type) Hugging Face's
    own choice; refused model types and unhandled options raise here."""
    if getattr(config, "model_type", None) in REFUSED:
        return fallback_auto_class(config)
    try:
        return family_for(config).auto_class
    except UndeclaredType:
        return fallback_auto_class(config)


def auto_class(kind: str) -> Any:
    import transformers

    return {
        "causal-lm": transformers.AutoModelForCausalLM,
        "seq2seq-lm": transformers.AutoModelForSeq2SeqLM,
        "base": transformers.AutoModel,
        "image-text-to-text": transformers.AutoModelForImageTextToText,
    }[kind]


CODE_FILES = (
    "config.json",
    "tokenizer_config.json",
    "processor_config.json",
    "preprocessor_config.json",
    "video_preprocessor_config.json",
    "audio_tokenizer_config.json",
    "generation_config.json",
)
"""The files Hugging Face reads a class to import from (config.json must exist; the others
are read where present)."""


def check_no_code(folder: Path, trust_remote_code: bool = False) -> None:
    """Refuse a folder whose files name their own Python code, unless that is allowed.

    Every file of ``CODE_FILES`` is read before anything loads: an ``auto_map`` or
    ``custom_pipelines`` anywhere in it, or a ``*_class`` / ``*_processor_type`` /
    ``*_extractor_type`` naming a module (``module.Class``, ``repo--module.Class``) rather
    than one of Hugging Face's own classes, is code Hugging Face would import (or ask about,
    at an interactive prompt).

    Raises:
        GeomlensError: if config.json (or another of these files) is unreadable, or one
            names code while ``trust_remote_code`` is off.
    """
    for name in CODE_FILES:
        path = folder / name
        if name != "config.json" and not path.exists():
            continue
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError, RecursionError) as exc:
            what = "JSON model config" if name == "config.json" else "JSON file"
            raise GeomlensError(
                f"{path} is not a readable {what} ({one_line(str(exc))[:80]}); replace it "
                f"with the model's own {name}."
            ) from None
        key = names_code(raw)
        if key is not None and not trust_remote_code:
            raise GeomlensError(
                f"the model in {folder} asks to run its own Python code ({key} in {name}), "
                "which geomlens does not do unless you pass --trust-remote-code."
            )


def names_code(value: Any, depth: int = 0) -> str | None:
    """The first key of a JSON value that names Python code to import, or None."""
    if depth > 32:
        return None  # deeper than any config Hugging Face writes; no class is read there
    if isinstance(value, dict):
        items: list[tuple[Any, Any]] = list(value.items())
    elif isinstance(value, list):
        items = list(enumerate(value))
    else:
        return None
    for key, item in items:
        if key in ("auto_map", "custom_pipelines"):
            return str(key)
        if isinstance(key, str) and key.endswith(CLASS_KEYS) and module_path(item):
            return key
        found = names_code(item, depth + 1)
        if found is not None:
            return found
    return None


CLASS_KEYS = ("_class", "_processor_type", "_extractor_type")
"""Keys whose value is a class Hugging Face looks up by name."""


def module_path(value: Any) -> bool:
    """Whether a class name is a path into a module (``module.Class``, ``repo--module.Class``),
    as custom code is named, rather than a bare class name of Hugging Face's own."""
    names = value if isinstance(value, list) else [value]
    return any(isinstance(v, str) and ("." in v or "--" in v) for v in names)


def check_safetensors(folder: Path) -> None:
    """Refuse a folder without safetensors weights: pickled ``.bin`` files can run code.

    Raises:
        GeomlensError: naming the pickle files found instead, if any.
    """
    if not any(folder.glob("*.safetensors")):
        found = sorted(p.name for p in folder.iterdir() if p.suffix in (".bin", ".pt", ".pth"))
        also = f" (it has {', '.join(found)}, pickle files that can run code)" if found else ""
        raise GeomlensError(
            f"{folder} holds no .safetensors weights{also}; geomlens loads weights only from "
            "safetensors or GGUF, so convert them to safetensors first."
        )


SIZE_FIELDS = (
    "vocab_size",
    "hidden_size",
    "n_embd",
    "d_model",
    "num_hidden_layers",
    "n_layer",
    "num_layers",
    "num_attention_heads",
    "n_head",
    "num_heads",
    "num_key_value_heads",
    "num_kv_heads",
    "head_dim",
    "d_kv",
    "intermediate_size",
    "n_inner",
    "d_ff",
    "ffn_dim",
    "max_position_embeddings",
    "n_positions",
)
"""Sizes in a config.json that must be whole numbers of at least 1 where given (None is
"derive it"): Hugging Face divides by them or builds tensors of them, and crashes later."""

KEYS_SHOWN = 3
"""How many weight names a loading error quotes."""


def some_keys(keys: Any, n: int = KEYS_SHOWN) -> str:
    """The first ``n`` names, each cut to 80 characters, then how many more (one short phrase)."""
    names = sorted(str(k) for k in keys)
    shown = [k if len(k) <= 80 else k[:77] + "..." for k in names[:n]]
    more = f" and {len(names) - n} more" if len(names) > n else ""
    return ", ".join(shown) + more


def check_config_sizes(folder: Path) -> None:
    """Refuse sizes no model can have (zero heads, negative widths) before Hugging Face
    reads the config: it divides by some of them while reading and crashes on others later.

    Raises:
        GeomlensError: naming the field and its value.
    """
    try:
        raw = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError):
        return  # check_no_code has reported an unreadable config already
    if not isinstance(raw, dict):
        raise GeomlensError(
            f"{folder / 'config.json'} is not a JSON object; replace it with the model's own "
            "config.json."
        )
    parts = [("", raw)] + [
        (f"{key}.", raw[key])
        for key in ("text_config", "decoder", "encoder")
        if isinstance(raw.get(key), dict)
    ]
    for prefix, section in parts:
        for field in SIZE_FIELDS:
            value = section.get(field)
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:37] + "..."
                raise GeomlensError(
                    f"{folder / 'config.json'} has {prefix}{field} = {shown}, which no model can "
                    "have (it must be a whole number of at least 1); use the model's own "
                    "config.json."
                )


SUB_CONFIGS = ("text_config", "vision_config", "audio_config", "decoder", "encoder")
"""Keys that hold a nested model config in the configs of multimodal or composite models."""


def check_sub_configs(folder: Path, config: Any) -> None:
    """Refuse a nested config (``text_config``, ...) that the model type does not have: its
    config class leaves it a plain dict, on which Hugging Face's own loading crashes.

    Raises:
        GeomlensError: naming the key and the model type.
    """
    for key in SUB_CONFIGS:
        if isinstance(getattr(config, key, None), dict):
            raise GeomlensError(
                f"{folder / 'config.json'} holds a {key}, which a {config.model_type} config "
                "does not have; use the model's own config.json (or the folder of the model "
                f"that {key} describes)."
            )
    other = [key for key in ("vision_config", "audio_config") if getattr(config, key, None)]
    if other and config.model_type not in TEXT_WRAPPERS:  # a wrapper: read through its text
        raise GeomlensError(
            f"{folder} holds a multimodal {config.model_type} model (its config has a "
            f"{' and '.join(other)}); geomlens reads text-only models: use the text model "
            "alone (its own folder, with a text-only config.json)."
        )


def check_config_shape(folder: Path, config: Any) -> None:
    """Refuse head counts that do not divide the model (what crashes a forward pass later).

    Raises:
        GeomlensError: naming the sizes that do not fit.
    """
    sub = getattr(config, "text_config", None) or config
    heads = getattr(sub, "num_attention_heads", None)
    hidden = getattr(sub, "hidden_size", None)
    kv = getattr(sub, "num_key_value_heads", None)
    head_dim = getattr(sub, "head_dim", None) or getattr(sub, "d_kv", None)
    if not isinstance(heads, int) or heads < 1:
        return
    where = folder / "config.json"
    if head_dim is None and isinstance(hidden, int) and hidden % heads:
        raise GeomlensError(
            f"{where} has a hidden size of {hidden}, which {heads} attention heads do not "
            "divide; use the model's own config.json."
        )
    if isinstance(kv, int) and kv >= 1 and heads % kv:
        raise GeomlensError(
            f"{where} has {heads} attention heads, which {kv} key/value heads do not divide; "
            "use the model's own config.json."
        )


def embedding_rows(model: Any) -> int | None:
    """Rows of the model's input embedding (None when it has no single embedding matrix)."""
    try:
        weight = model.get_input_embeddings().weight
    except (AttributeError, NotImplementedError):
        return None
    return int(weight.shape[0])


UNUSED_MODULES = ("pooler.",)
"""Modules of a base model no hidden state passes through (BERT's pooler reads [CLS] for
classification): checkpoints trained as masked LMs lack them, and geomlens never runs them."""


def check_weights(folder: Path, model: Any, info: dict[str, Any]) -> None:
    """Refuse a model whose files did not fill it: a weight missing, of another shape, or
    weights the config has no place for inside the model's own modules.

    Keys Hugging Face itself accepts as absent (tied weights, non-persistent buffers, the
    model's own ignore lists) are already dropped from ``info``; weights of heads this
    model does not have (``cls.*`` of a masked-LM checkpoint loaded as a base model) are
    not in its modules and are ignored, and so is a missing pooler (``UNUSED_MODULES``).

    Raises:
        GeomlensError: naming the first few keys.
    """
    missing = {k for k in info.get("missing_keys") or () if not k.startswith(UNUSED_MODULES)}
    mismatched = sorted(info.get("mismatched_keys") or (), key=lambda m: str(m[0]))
    tied = set(getattr(model, "all_tied_weights_keys", None) or {})
    expected = [k for k in model.state_dict() if k not in tied]
    if expected and all(k in missing for k in expected):
        raise GeomlensError(
            f"the .safetensors files in {folder} hold none of the {len(expected)} weights its "
            f"config.json describes (missing {some_keys(missing)}); they belong to another "
            "model: put the model's own weights and config.json together."
        )
    unexpected = set(info.get("unexpected_keys") or ())
    if missing and unexpected:
        kind = getattr(model.config, "model_type", None) or type(model).__name__
        raise GeomlensError(
            f"the weights in {folder} do not fit its config.json (a {kind} model): "
            f"{len(missing)} of its {len(expected)} tensors are missing ({some_keys(missing)}) "
            f"and the files hold {len(unexpected)} others ({some_keys(unexpected)}); the config "
            "and the weights are of different models: use the config.json that came with them."
        )
    if missing:
        raise GeomlensError(
            f"the weights in {folder} lack {len(missing)} of the {len(expected)} tensors its "
            f"config.json describes ({some_keys(missing)}); geomlens does not fill them with "
            "random values: copy or convert the model again."
        )
    if mismatched:
        key, found, wanted = mismatched[0]
        more = f" (and {len(mismatched) - 1} more)" if len(mismatched) > 1 else ""
        raise GeomlensError(
            f"the weights in {folder} do not match its config.json: {some_keys([key], 1)} has "
            f"shape {list(found)} in the files but {list(wanted)} in the config{more}; use the "
            "config.json that came with these weights."
        )
    modules = {name for name, _ in model.named_modules() if name}
    foreign = [
        key
        for key in unexpected
        if any(".".join(key.split(".")[:i]) in modules for i in range(1, key.count(".") + 1))
    ]
    if foreign:
        raise GeomlensError(
            f"the weights in {folder} hold {len(foreign)} tensors its config.json has no place "
            f"for ({some_keys(foreign)}); the config describes a different model than the "
            "weights: use the config.json that came with them."
        )


TOKENIZER_PROBE = "the cat sat on the mat and the dog ran to the old house by the river"
"""Ordinary words every real tokenizer splits into several distinct ids."""


def check_tokenizer(folder: Path | str, tokenizer: Any, rows: int | None) -> None:
    """Refuse a tokenizer that is empty, maps ordinary words to one id, or has ids beyond
    the model's embedding rows (the embedding does not cover it).

    Raises:
        GeomlensError: saying which, with the numbers.
    """
    advice = "put the model's own tokenizer files (tokenizer.json or its vocabulary) in the folder"
    try:
        ids = list(tokenizer(TOKENIZER_PROBE, add_special_tokens=False)["input_ids"])
        vocab = tokenizer.get_vocab()
    except Exception as exc:  # a broken tokenizer fails in its own ways
        raise GeomlensError(
            f"the tokenizer in {folder} cannot encode text ({type(exc).__name__}: "
            f"{str(exc)[:120]}); {advice}."
        ) from None
    if not ids or not vocab:
        raise GeomlensError(
            f"the tokenizer in {folder} is empty (it turns ordinary words into no tokens); "
            f"{advice}."
        )
    if len(set(ids)) == 1:
        raise GeomlensError(
            f"the tokenizer in {folder} maps ordinary words all to one id ({ids[0]}); its "
            f"vocabulary is missing or of another model: {advice}."
        )
    top = max(max(vocab.values()), max(ids))
    if rows is not None and top >= rows:
        raise GeomlensError(
            f"the tokenizer in {folder} has ids up to {top}, but the model's embedding has "
            f"only {rows} rows, so it does not cover the tokenizer; {advice}, or the weights "
            "of the model this tokenizer belongs to."
        )


def load_folder(
    folder: Path,
    name: str,
    *,
    device: str | torch.device,
    dtype: torch.dtype,
    attention: str,
    trust_remote_code: bool = False,
    placed: dict[str, Any] | None = None,
) -> ModelView:
    """Load an HF folder through its family mapping, whole or not at all (on ``device``,
    or where ``placed``, ``from_pretrained``'s device-map arguments, puts each module).

    Options, the config's sizes and the tokenizer are checked before the weights load; a
    weight missing from the files, of another shape, or left over from a different config
    is refused rather than filled with random values. The loaded view then passes the
    on-load check (``models.check``) against Hugging Face's own forward pass, or is refused.
    """
    from transformers import AutoConfig, AutoTokenizer

    check_no_code(folder, trust_remote_code)
    check_config_sizes(folder)
    # Said explicitly either way: left unset, Hugging Face may ask at a prompt whether to run
    # code check_no_code did not foresee.
    remote: dict[str, Any] = {"trust_remote_code": trust_remote_code}
    try:
        config = AutoConfig.from_pretrained(folder, local_files_only=True, **remote)
    except Exception as exc:
        text = " ".join(str(exc).split())
        text = text if len(text) <= 300 else text[:297] + "..."
        raise GeomlensError(f"could not read the model config in {folder}: {text}") from None
    check_sub_configs(folder, config)  # a multimodal model named as such, not as a type
    layouts = candidate_layouts(config)  # unhandled options reported before missing weights
    refuse_undeclared_seq2seq(config, layouts)
    check_config_shape(folder, config)
    check_safetensors(folder)
    check_weight_headers(folder)
    try:
        tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True, **remote)
    except (OSError, ValueError) as exc:
        raise GeomlensError(
            f"could not load the tokenizer in {folder} ({exc}); the folder needs the model's "
            "tokenizer files."
        ) from None
    vocab_size = getattr(getattr(config, "text_config", None) or config, "vocab_size", None)
    check_tokenizer(folder, tokenizer, vocab_size if isinstance(vocab_size, int) else None)
    loader = auto_class(layouts[0].auto_class if layouts else fallback_auto_class(config))
    try:
        model, info = loader.from_pretrained(
            folder,
            dtype=dtype,
            attn_implementation=attention_for(loader, config, attention),
            local_files_only=True,
            use_safetensors=True,
            output_loading_info=True,
            ignore_mismatched_sizes=True,  # reported below, in one sentence
            **remote,
            **(placed or {}),
        )
    except (SafetensorError, OSError, ValueError, RuntimeError) as exc:
        text = " ".join(str(exc).split())
        text = text if len(text) <= 300 else text[:297] + "..."
        raise GeomlensError(
            f"could not load the weights in {folder} ({text}); the files may be truncated or "
            "corrupt: copy or convert the model again."
        ) from None
    check_weights(folder, model, info)
    model.eval().requires_grad_(False)
    if not placed:
        model.to(device)
    with materialised(model), offload_refused(model):  # offloaded weights read back
        require_finite_weights(model, str(folder))  # before the on-load check compares NaN
        check_tokenizer(folder, tokenizer, embedding_rows(model))
        if len(layouts) == 1 and family_declares(layouts[0], config):
            view = on_demand(layouts[0].build(model, tokenizer, name, str(folder)))
            return replace(view, load_check=check_view(view))
        return through_layouts(layouts, model, tokenizer, name, folder)


def refuse_undeclared_seq2seq(config: Any, layouts: list[Family]) -> None:
    """Refuse an encoder-decoder no family declares, saying what it is, before its weights
    load (Hugging Face's causal-LM class of such a type builds its decoder alone, whose
    weights would not fit, and the decoder-only layouts that accept its config read one
    stack)."""
    declared = any(family_declares(f, config) for f in layouts)
    if declared or not getattr(config, "is_encoder_decoder", False):
        return  # a declared family reads both stacks (T5, BART); a decoder-only layout does not
    model_type = getattr(config, "model_type", None)
    raise GeomlensError(
        f"model type {model_type!r} is an encoder-decoder that no family declares; the "
        "hidden-state tier reads one stack, not an encoder and a decoder that reads it "
        "through cross-attention: use a model of a supported family (geomlens models "
        "--families)."
    )


def family_declares(family: Family, config: Any) -> bool:
    return getattr(config, "model_type", None) in family.model_types


def candidate_layouts(config: Any) -> list[Family]:
    """The config's family; for an undeclared model type, the declared layouts it may load
    through (``families.layouts_for``). Empty: no declared family or layout takes it, and it
    loads in the hidden-state tier (``models.hidden_tier``). A declared type whose options
    its family refuses is refused here: it never falls to the hidden-state tier."""
    if getattr(config, "model_type", None) in REFUSED:
        return []  # its mixing is known not to be a bilinear softmax attention
    try:
        return [family_for(config)]
    except UndeclaredType:
        return layouts_for(config, fallback_auto_class(config))


LAYOUT_ERRORS = (AttributeError, KeyError, IndexError, TypeError, ValueError, RuntimeError)
"""What building a view through a layout whose paths or shapes do not fit raises."""


def through_layouts(
    layouts: list[Family],
    model: Any,
    tokenizer: Any,
    name: str,
    folder: Path | str,
    tolerance: float | None = None,
) -> ModelView:
    """An undeclared model type through the first declared layout whose view builds and
    passes the on-load check, with a notice naming it; when none does (or none accepts its
    config), in the hidden-state tier, with a notice naming each layout's first mismatch.
    ``tolerance``: the on-load check's, where not the dtype's (quantised weights)."""
    model_type = getattr(model.config, "model_type", None)
    failed: list[tuple[str, BaseException]] = []
    for family in layouts:
        try:
            view = on_demand(family.build(model, tokenizer, name, str(folder)))
            check = check_view(view, tolerance=tolerance)
        except (GeomlensError, *LAYOUT_ERRORS) as exc:
            failed.append((family.name, exc))
            continue
        print(
            f"geomlens: model type {model_type!r} is not declared; it loads through the "
            f"{family.name} layout, whose view reproduced Hugging Face's forward pass on "
            "the on-load check.",
            file=sys.stderr,
        )
        return replace(view, load_check=check)
    if model_type in REFUSED:
        why = f"{REFUSED[model_type]}"
    elif failed:
        why = (
            "none of the declared layouts that accept its config reproduces its forward "
            "pass on the on-load check (extend the closest into a family of its own, "
            "docs/models.md, Adding a family; first mismatch of each: "
            f"{layout_mismatches(failed)})"
        )
    else:
        why = "no declared family or layout takes its config"
    return hidden_state_view(model, tokenizer, name, folder, why)


def hidden_state_view(
    model: Any, tokenizer: Any, name: str, folder: Path | str, why: str
) -> ModelView:
    """The model in the hidden-state tier (``models.hidden_tier``), checked against Hugging
    Face's hidden states, with a notice saying why and what it reads; refused in one
    sentence when even its hidden states cannot be read."""
    from geomlens.models.hidden_tier import (
        HiddenStatesUnreadable,
        build_hidden_view,
        check_hidden_view,
    )

    model_type = getattr(model.config, "model_type", None)
    try:
        view = build_hidden_view(model, tokenizer, name, str(folder), is_encoder_model(model))
        check = check_hidden_view(view)
    except (HiddenStatesUnreadable, CheckFailed) as exc:
        raise GeomlensError(
            f"model type {model_type!r} is refused: {why}, and {str(exc).rstrip('.')}; use a "
            "model of a supported family (geomlens models --families)."
        ) from None
    print(
        f"geomlens: model type {model_type!r} loads in the hidden-state tier: {why}. Its "
        f"hidden states, embeddings and readout are read ({readout_said(check)}); the "
        "attention-level analyses say per layer that they do not apply.",
        file=sys.stderr,
    )
    return replace(view, load_check=check)


def readout_said(check: Any) -> str:
    """What the hidden-state notice says of the readout, from the on-load check."""
    if check.readout_equal is None:
        return "hidden states equal to Hugging Face's; it gives no logits to compare"
    if check.readout_equal:
        return "equal to Hugging Face's hidden states and logits"
    return (
        "hidden states equal to Hugging Face's; its logits differ from the readout's by "
        f"{check.max_error['logits']:.2g}, so the readouts are W_U's, not the model's"
    )


def is_encoder_model(model: Any) -> bool:
    """Whether an undeclared model attends both ways: it has no causal LM head in Hugging
    Face's tables and its config is not a decoder's."""
    config = model.config
    if getattr(config, "is_decoder", False):
        return False
    return fallback_auto_class(config) == "base"


def layout_mismatches(failed: list[tuple[str, BaseException]]) -> str:
    """Each tried layout with its first mismatch, the closest first: those whose view built
    but differed on the on-load check (smallest difference first), then those whose module
    paths, weight shapes or config options did not fit (layouts with one reason grouped)."""
    checked = sorted(
        ((n, e) for n, e in failed if isinstance(e, CheckFailed)),
        key=lambda item: item[1].error,  # type: ignore[attr-defined]
    )
    parts = [f"{n} ({layout_mismatch(e)})" for n, e in checked]
    grouped: dict[str, list[str]] = {}
    for n, e in failed:
        if not isinstance(e, CheckFailed):
            grouped.setdefault(layout_mismatch(e), []).append(n)
    parts += [f"{', '.join(names)} ({why})" for why, names in grouped.items()]
    return "; ".join(parts)


def layout_mismatch(exc: BaseException) -> str:
    """Why a declared layout did not take a model, in a few words: the module path or
    weight shape that did not fit, the config option it reads that the config lacks, or the
    on-load check's first difference."""
    if isinstance(exc, CheckFailed):
        return exc.short()
    text = " ".join(str(exc).split()).rstrip(".")
    if isinstance(exc, AttributeError):  # a module path, or a config option the layout reads
        return re.sub(r"'(\w+)' object has no attribute '(\w+)'", r"\1 has no \2", text)
    text = text if len(text) <= 120 else text[:117] + "..."
    return f"{type(exc).__name__}: {text}"
