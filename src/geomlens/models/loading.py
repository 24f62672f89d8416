"""``load_model``: a bundled name, an HF id in the local cache, a folder or a GGUF file."""

from __future__ import annotations

import difflib
import json
import os
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError

from geomlens.errors import GeomlensError
from geomlens.models.bundled import BUNDLED, BundledModel
from geomlens.models.cache import converted_dir, file_key, publish
from geomlens.models.families import family_for
from geomlens.models.view import ModelView

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def quiet_transformers() -> None:
    """Keep Hugging Face's progress bars and advice out of the user's terminal."""
    from transformers.utils import logging

    logging.set_verbosity_error()
    logging.disable_progress_bar()


def resolve_dtype(dtype: str | torch.dtype) -> torch.dtype:
    if isinstance(dtype, torch.dtype):
        return dtype
    if dtype not in DTYPES:
        raise GeomlensError(f"unknown dtype {dtype!r}; use one of {', '.join(DTYPES)}.")
    return DTYPES[dtype]


def load_model(
    name_or_path: str | os.PathLike[str],
    *,
    device: str | torch.device = "cpu",
    dtype: str | torch.dtype = "float32",
    attention: str = "sdpa",
    trust_remote_code: bool = False,
) -> ModelView:
    """Load a model and return its ``ModelView``.

    Nothing in a model's files runs as code: weights load from safetensors or GGUF only
    (never from pickled ``.bin`` files), and a folder whose config asks for its own Python
    code (``auto_map``) is refused unless ``trust_remote_code`` is set.

    Args:
        name_or_path: a bundled name (``geomlens models``), a local folder with
            ``config.json``, a ``.gguf`` file (converted once to a cached float32 folder),
            or a Hugging Face id already in the local HF cache (nothing is downloaded).
        device: where the model runs.
        dtype: "float32", "bfloat16" or "float16".
        attention: the HF attention implementation; "eager" is needed for attention weights.
        trust_remote_code: let Hugging Face import Python code shipped with the model
            (``--trust-remote-code``); off by default.
    """
    quiet_transformers()
    name = str(name_or_path)
    folder = resolve_folder(name)
    return load_folder(
        folder,
        name,
        device=device,
        dtype=resolve_dtype(dtype),
        attention=attention,
        trust_remote_code=trust_remote_code,
    )


def resolve_folder(name: str) -> Path:
    """A local folder holding an HF model (config.json, weights, tokenizer) for ``name``."""
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
    return hub_cache_folder(name)


def hub_cache_folder(model_id: str) -> Path:
    """The local HF-cache snapshot of ``model_id``; never downloads."""
    close = difflib.get_close_matches(model_id, list(BUNDLED), n=2, cutoff=0.4)
    hint = (
        f"did you mean {' or '.join(repr(c) for c in close)}?"
        if close
        else f"bundled names: {', '.join(BUNDLED)}."
    )
    if "/" not in model_id:
        raise GeomlensError(f"unknown model {model_id!r}; {hint}")
    try:
        from huggingface_hub import snapshot_download

        return Path(snapshot_download(model_id, local_files_only=True))
    except Exception:
        raise GeomlensError(
            f"model {model_id!r} is neither a bundled name, a local path, nor in the local "
            f"Hugging Face cache (nothing is downloaded); {hint}"
        ) from None


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
        kwargs: dict[str, Any] = {"gguf_file": gguf.name}
        try:
            family = family_for(AutoConfig.from_pretrained(gguf.parent, **kwargs))
            print(  # only once the file proved readable: an error stays one line
                f"converting {parts[0].name} to a float32 folder once (under a minute); "
                f"cached in {final}",
                file=sys.stderr,
            )
            tokenizer = AutoTokenizer.from_pretrained(gguf.parent, **kwargs)
            model = auto_class(family.auto_class).from_pretrained(
                gguf.parent, dtype=torch.float32, **kwargs
            )
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
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        publish(tmp, final)
    return final


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


def auto_class(kind: str) -> Any:
    import transformers

    return {
        "causal-lm": transformers.AutoModelForCausalLM,
        "seq2seq-lm": transformers.AutoModelForSeq2SeqLM,
        "base": transformers.AutoModel,
    }[kind]


def check_no_code(folder: Path, trust_remote_code: bool = False) -> None:
    """Refuse a folder whose config names its own Python code, unless that is allowed.

    Raises:
        GeomlensError: if config.json is unreadable, or names code (``auto_map``) while
            ``trust_remote_code`` is off.
    """
    try:
        raw = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise GeomlensError(
            f"{folder / 'config.json'} is not a readable JSON model config ({exc}); "
            "replace it with the model's own config.json."
        ) from None
    if isinstance(raw, dict) and "auto_map" in raw and not trust_remote_code:
        raise GeomlensError(
            f"the model in {folder} asks to run its own Python code (auto_map in config.json), "
            "which geomlens does not do unless you pass --trust-remote-code."
        )


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


def load_folder(
    folder: Path,
    name: str,
    *,
    device: str | torch.device,
    dtype: torch.dtype,
    attention: str,
    trust_remote_code: bool = False,
) -> ModelView:
    """Load an HF folder through its family mapping (options are checked before weights load)."""
    from transformers import AutoConfig, AutoTokenizer

    check_no_code(folder, trust_remote_code)
    # Hugging Face sees trust_remote_code only when the user asked for it.
    remote: dict[str, Any] = {"trust_remote_code": trust_remote_code} if trust_remote_code else {}
    try:
        config = AutoConfig.from_pretrained(folder, local_files_only=True, **remote)
    except Exception as exc:
        raise GeomlensError(f"could not read the model config in {folder}: {exc}") from None
    family = family_for(config)  # unhandled options are reported before missing weights
    check_safetensors(folder)
    loader = auto_class(family.auto_class)
    try:
        model = loader.from_pretrained(
            folder,
            dtype=dtype,
            attn_implementation=attention_for(loader, config, attention),
            local_files_only=True,
            use_safetensors=True,
            **remote,
        )
    except (SafetensorError, OSError, ValueError) as exc:
        raise GeomlensError(
            f"could not load the weights in {folder} ({exc}); the files may be truncated or "
            "corrupt: copy or convert the model again."
        ) from None
    model.eval().requires_grad_(False)
    model.to(device)
    try:
        tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True, **remote)
    except (OSError, ValueError) as exc:
        raise GeomlensError(
            f"could not load the tokenizer in {folder} ({exc}); the folder needs the model's "
            "tokenizer files."
        ) from None
    return family.build(model, tokenizer, name, str(folder))


@contextmanager
def eager_attention(view: ModelView) -> Iterator[None]:
    """Switch a loaded model to eager attention (attention weights) and back."""
    model: Any = view.model
    previous = view.config._attn_implementation
    if previous == "eager":
        yield
        return
    model.set_attn_implementation("eager")
    try:
        yield
    finally:
        model.set_attn_implementation(previous)
