"""The on-disk activation store: one safetensors shard per captured batch.

Each shard holds ``input_ids`` [c, T], ``context_index`` [c], ``labels`` [c] and
``layer_{l}`` [c, T, d] for the same c contexts. Shards are written atomically, so an
interrupted capture never leaves a half-written shard behind. The folder is a local path
or an fsspec URL (``s3://...``, ``file://...``; needs ``fsspec`` and the filesystem's
package), so that workers on several machines can write into one store.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import load as load_bytes
from safetensors.torch import save as save_bytes
from safetensors.torch import save_file

from geomlens.errors import GeomlensError
from geomlens.io.files import temporary


def is_url(location: str | Path) -> bool:
    """Whether a store location is an fsspec URL rather than a local path."""
    return isinstance(location, str) and "://" in location


def url_fs(url: str) -> tuple[Any, str]:
    """The fsspec filesystem and path of a URL."""
    try:
        from fsspec.core import url_to_fs
    except ImportError:
        raise GeomlensError(
            f"{url} is a URL; reading or writing it needs fsspec: pip install fsspec"
        ) from None
    try:
        return url_to_fs(url)
    except ImportError as exc:  # the protocol's own package (s3fs, gcsfs, ...) is missing
        raise GeomlensError(
            f"{url} needs a package that is not installed ({exc}); install it, or give a "
            "local folder."
        ) from None
    except ValueError as exc:  # an unknown protocol
        raise GeomlensError(f"{url} is not a URL fsspec can open ({exc}).") from None


def save_atomic(tensors: dict[str, torch.Tensor], path: Path) -> Path:
    """Write a safetensors file so that readers see either nothing or the whole file.

    If the write fails (a full disk), nothing is left behind and an older file stays.
    """
    tmp = path.with_suffix(".tmp")
    try:
        with temporary(tmp):  # removed on an error, and on SIGTERM or SIGHUP
            save_file(tensors, str(tmp))
            os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        if exc.filename is None:
            raise OSError(exc.errno, exc.strerror, str(path)) from None
        raise
    except SafetensorError as exc:
        # safetensors reports a failed write (a full disk) as its own error type
        tmp.unlink(missing_ok=True)
        found = re.search(r"\(os error (\d+)\)", str(exc))
        if found is None:
            raise
        code = int(found.group(1))
        raise OSError(code, os.strerror(code), str(path)) from None
    return path


def save_file_atomic(tensors: dict[str, torch.Tensor], filename: str | Path) -> None:
    """``safetensors.torch.save_file``, written atomically (see ``save_atomic``)."""
    save_atomic(tensors, Path(filename))


def shard_path(folder: Path, batch: int) -> Path:
    return folder / f"shard_{batch:05d}.safetensors"


def write_shard(
    folder: Path | str,
    batch: int,
    input_ids: torch.Tensor,
    context_index: torch.Tensor,
    labels: torch.Tensor,
    hidden: dict[int, torch.Tensor],
    dtype: torch.dtype,
) -> Path | str:
    """Write one batch's activations (cast to ``dtype``) as a shard (folder: path or URL)."""
    tensors = {
        "input_ids": input_ids.cpu().contiguous(),
        "context_index": context_index.cpu().contiguous(),
        "labels": labels.cpu().contiguous(),
    }
    for layer, h in hidden.items():
        tensors[f"layer_{layer}"] = h.to(device="cpu", dtype=dtype).contiguous()
    if is_url(folder):
        fs, root = url_fs(str(folder))
        fs.makedirs(root, exist_ok=True)
        name = f"{root.rstrip('/')}/{shard_path(Path(), batch).name}"
        fs.pipe_file(name + ".tmp", save_bytes(tensors))
        fs.mv(name + ".tmp", name)
        return name
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    return save_atomic(tensors, shard_path(folder, batch))


class ActivationStore:
    """Lazy reader over a folder of shards (a local folder, or an fsspec URL)."""

    def __init__(self, folder: Path | str) -> None:
        self._fs: Any = None
        self.folder: Path | str
        if is_url(folder):
            self._fs, root = url_fs(str(folder))
            self.folder = str(folder)
            self.shards: list[Any] = sorted(
                self._fs.glob(f"{root.rstrip('/')}/shard_*.safetensors")
            )
        else:
            self.folder = Path(folder)
            self.shards = sorted(self.folder.glob("shard_*.safetensors"))

    def __len__(self) -> int:
        return len(self.shards)

    @property
    def layers(self) -> list[int]:
        if self._fs is not None:
            keys = list(load_bytes(self._fs.cat_file(self.shards[0])))
            return sorted(int(k.split("_")[1]) for k in keys if k.startswith("layer_"))
        with safe_open(str(self.shards[0]), "pt") as f:
            return sorted(int(k.split("_")[1]) for k in f.keys() if k.startswith("layer_"))  # noqa: SIM118

    def iter_shards(self, layers: list[int] | None = None) -> Iterator[dict[str, torch.Tensor]]:
        """Yield one shard at a time (only the requested layers are read)."""
        for path in self.shards:
            if self._fs is not None:  # a remote shard is fetched whole, then filtered
                shard = load_bytes(self._fs.cat_file(path))
                yield {
                    k: v
                    for k, v in shard.items()
                    if not k.startswith("layer_") or layers is None or int(k[6:]) in layers
                }
                continue
            with safe_open(str(path), "pt") as f:
                keys = [
                    k
                    for k in f.keys()  # noqa: SIM118
                    if not k.startswith("layer_") or layers is None or int(k[6:]) in layers
                ]
                yield {k: f.get_tensor(k) for k in keys}

    def layer(self, layer: int) -> torch.Tensor:
        """All contexts of one layer, in context order: [C, T, d] (loads that layer only)."""
        parts, order = [], []
        for shard in self.iter_shards([layer]):
            parts.append(shard[f"layer_{layer}"])
            order.append(shard["context_index"])
        index = torch.cat(order)
        out = torch.empty((len(index), *parts[0].shape[1:]), dtype=parts[0].dtype)
        out[index] = torch.cat(parts)
        return out
