"""Forward passes the baseline and the schemes of one run would otherwise repeat.

Within one ``geomlens concepts`` run several computations recur: the ``sanity`` scheme
feeds the model exactly the context's own token embeddings, so its rows are the
baseline's rows; a ``concat_*`` scheme reads the hidden states of the whole context at
a layer, which the baseline's context pass computes anyway; two schemes with the same
segmentation and layer (or the same choice encoding) encode the same token sequences.

``Reuse`` keeps the results of such calls under a digest of everything that determines
them (the rows or sequences, the layer, the batch budget). Each call it answers is a
deterministic function of its key (the same sequences are batched the same way), so a
result read back here is bit for bit what recomputing it gives: a run resumed without
this memory writes the same numbers. Vectors are kept up to ``REUSE_BYTES``; past that
they are recomputed where needed.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence

import torch

REUSE_BYTES = 256 * 2**20
"""Hidden-state vectors kept for reuse (float32 [tokens, d] per sequence)."""


def digest(parts: Iterable[bytes | str]) -> bytes:
    """A sha256 over the given parts, each length-prefixed (so concatenations differ)."""
    h = hashlib.sha256()
    for part in parts:
        data = part.encode() if isinstance(part, str) else part
        h.update(len(data).to_bytes(8, "little"))
        h.update(data)
    return h.digest()


def tensor_bytes(x: torch.Tensor) -> bytes:
    """The exact bytes of a tensor, with its dtype and shape."""
    x = x.detach().cpu().contiguous()
    head = f"{x.dtype}{tuple(x.shape)}".encode()
    return head + x.view(torch.uint8).numpy().tobytes() if x.numel() else head


def sequences_key(seqs: Sequence[Sequence[int]], *extra: str) -> bytes:
    """The digest of token sequences (in order) and a description of what is computed."""
    return digest([*extra, *(",".join(map(str, s)) for s in seqs)])


class Reuse:
    """Results of scoring and encoding calls of one run, by the digest of their inputs.

    Attributes:
        vectors: key -> per-sequence hidden states [n_i, d] (``encode.layer_vectors``).
        scores: key -> per-row, per-continuation log-likelihoods (``baseline.score_rows``).
        hits, misses: how many calls were answered here, and how many computed.
    """

    def __init__(self, budget_bytes: int = REUSE_BYTES) -> None:
        self.budget = budget_bytes
        self.vectors: dict[bytes, list[torch.Tensor]] = {}
        self.scores: dict[bytes, list[list[float]]] = {}
        self.held = 0
        self.hits = 0
        self.misses = 0

    def get_vectors(self, key: bytes) -> list[torch.Tensor] | None:
        found = self.vectors.get(key)
        self._count(found is not None)
        return found

    def put_vectors(self, key: bytes, vectors: list[torch.Tensor]) -> None:
        """Keep ``vectors`` under ``key`` unless that would pass the byte budget."""
        size = sum(v.numel() * v.element_size() for v in vectors)
        if key in self.vectors or self.held + size > self.budget:
            return
        self.vectors[key] = vectors
        self.held += size

    def get_scores(self, key: bytes) -> list[list[float]] | None:
        found = self.scores.get(key)
        self._count(found is not None)
        return None if found is None else [list(row) for row in found]

    def put_scores(self, key: bytes, scores: list[list[float]]) -> None:
        self.scores[key] = [list(row) for row in scores]

    def _count(self, hit: bool) -> None:
        if hit:
            self.hits += 1
        else:
            self.misses += 1
