"""The on-disk activation store: one safetensors shard per captured batch.

Each shard holds ``input_ids`` [c, T], ``context_index`` [c], ``labels`` [c] and
``layer_{l}`` [c, T, d] for the same c contexts. Shards are written atomically, so an
interrupted capture never leaves a half-written shard behind.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import save_file


def save_atomic(tensors: dict[str, torch.Tensor], path: Path) -> Path:
    """Write a safetensors file so that readers see either nothing or the whole file."""
    tmp = path.with_suffix(".tmp")
    save_file(tensors, str(tmp))
    os.replace(tmp, path)
    return path


def shard_path(folder: Path, batch: int) -> Path:
    return folder / f"shard_{batch:05d}.safetensors"


def write_shard(
    folder: Path,
    batch: int,
    input_ids: torch.Tensor,
    context_index: torch.Tensor,
    labels: torch.Tensor,
    hidden: dict[int, torch.Tensor],
    dtype: torch.dtype,
) -> Path:
    """Write one batch's activations (cast to ``dtype``) as a shard."""
    folder.mkdir(parents=True, exist_ok=True)
    tensors = {
        "input_ids": input_ids.cpu().contiguous(),
        "context_index": context_index.cpu().contiguous(),
        "labels": labels.cpu().contiguous(),
    }
    for layer, h in hidden.items():
        tensors[f"layer_{layer}"] = h.to(device="cpu", dtype=dtype).contiguous()
    return save_atomic(tensors, shard_path(folder, batch))


class ActivationStore:
    """Lazy reader over a folder of shards."""

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)
        self.shards = sorted(self.folder.glob("shard_*.safetensors"))

    def __len__(self) -> int:
        return len(self.shards)

    @property
    def layers(self) -> list[int]:
        with safe_open(str(self.shards[0]), "pt") as f:
            return sorted(int(k.split("_")[1]) for k in f.keys() if k.startswith("layer_"))  # noqa: SIM118

    def iter_shards(self, layers: list[int] | None = None) -> Iterator[dict[str, torch.Tensor]]:
        """Yield one shard at a time (only the requested layers are read)."""
        for path in self.shards:
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
