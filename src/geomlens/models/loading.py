"""``load_model``: a bundled name, an HF id in the local cache, a folder or a GGUF file."""

from __future__ import annotations

import difflib
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import torch

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
) -> ModelView:
    """Load a model and return its ``ModelView``.

    Args:
        name_or_path: a bundled name (``geomlens models``), a local folder with
            ``config.json``, a ``.gguf`` file (converted once to a cached float32 folder),
            or a Hugging Face id already in the local HF cache (nothing is downloaded).
        device: where the model runs.
        dtype: "float32", "bfloat16" or "float16".
        attention: the HF attention implementation; "eager" is needed for attention weights.
    """
    quiet_transformers()
    name = str(name_or_path)
    folder = resolve_folder(name)
    return load_folder(folder, name, device=device, dtype=resolve_dtype(dtype), attention=attention)


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
    final.parent.mkdir(parents=True, exist_ok=True)
    print(
        f"converting {parts[0].name} to a float32 folder once (under a minute); cached in {final}",
        file=sys.stderr,
    )
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    with tempfile.TemporaryDirectory(dir=final.parent) as scratch:
        gguf = parts[0]
        if len(parts) > 1:
            gguf = Path(scratch) / f"{stem}.gguf"
            with open(gguf, "wb") as out:
                for part in parts:
                    out.write(part.read_bytes())
        kwargs: dict[str, Any] = {"gguf_file": gguf.name}
        try:
            family_for(AutoConfig.from_pretrained(gguf.parent, **kwargs))
            tokenizer = AutoTokenizer.from_pretrained(gguf.parent, **kwargs)
            model = AutoModelForCausalLM.from_pretrained(gguf.parent, dtype=torch.float32, **kwargs)
        except GeomlensError:
            raise
        except Exception as exc:
            raise GeomlensError(f"could not read GGUF file {gguf}: {exc}") from None
        model.hf_quantizer = None  # type: ignore[assignment]
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
        tmp = Path(scratch) / "out"
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        publish(tmp, final)
    return final


def auto_class(kind: str) -> Any:
    import transformers

    return {
        "causal-lm": transformers.AutoModelForCausalLM,
        "seq2seq-lm": transformers.AutoModelForSeq2SeqLM,
        "base": transformers.AutoModel,
    }[kind]


def load_folder(
    folder: Path, name: str, *, device: str | torch.device, dtype: torch.dtype, attention: str
) -> ModelView:
    """Load an HF folder through its family mapping (options are checked before weights load)."""
    from transformers import AutoConfig, AutoTokenizer

    try:
        config = AutoConfig.from_pretrained(folder, local_files_only=True)
    except Exception as exc:
        raise GeomlensError(f"could not read the model config in {folder}: {exc}") from None
    family = family_for(config)
    model = auto_class(family.auto_class).from_pretrained(
        folder, dtype=dtype, attn_implementation=attention, local_files_only=True
    )
    model.eval().requires_grad_(False)
    model.to(device)
    tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
    return family.build(model, tokenizer, name, str(folder))
