"""``geomlens walk``: movement through embedding space (Singh, 2023) on one model.

Joins the pure analyses and the figures. The corpus windows are captured as every
command captures them; then, on the given text (default: the package's few-shot prompt),
similarity maps and the encoding walk; with ``generate`` the greedy and seeded sampled
decoding walks; on the first ``kernel_windows`` corpus windows the empirical position
kernels, the refactoring check and the per-head output norms (T5: also the learned bias
kernels). Numbers go to ``metrics.json`` under "walk"; arrays to safetensors side files.
"""

from __future__ import annotations

import hashlib
import json
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import torch

from geomlens.analyses.attention_parts import block_scores
from geomlens.analyses.kernels import N_OFFSETS, KernelAccumulator, bias_kernels
from geomlens.analyses.refactor import RefactorAccumulator, record_attention
from geomlens.analyses.similarity import layer_stack, similarity_maps
from geomlens.analyses.walks import (
    DecodingWalk,
    TokenSpace,
    decoding_walk,
    encoding_walk,
    walk_projection,
)
from geomlens.capture.capture import CaptureConfig
from geomlens.capture.store import save_file_atomic as save_file
from geomlens.corpus import Windows
from geomlens.errors import GeomlensError
from geomlens.files import write_text_atomic
from geomlens.models import load_model
from geomlens.models.view import ModelView
from geomlens.pipeline import run_command
from geomlens.progress import Step, StepLines, quiet
from geomlens.report import walk_figures as figs
from geomlens.report.figures import save
from geomlens.runfolder import Run, RunFolder, write_json
from geomlens.stats import DecompositionAccumulator

KERNEL_WINDOWS = 16
KERNEL_BATCH = 4
TOP_K = 10


def default_text() -> str:
    """The package's few-shot prompt (five Q/A sections, about 300 tokens)."""
    return (resources.files("geomlens") / "data" / "walk_prompt.txt").read_text(encoding="utf-8")


def read_text_file(path: str | Path) -> str:
    """The text of ``path``; a GeomlensError in one sentence when it cannot be read."""
    try:
        return Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else type(exc).__name__
        raise GeomlensError(f"cannot read --text-file {path}: {reason}.") from None


def encode_text(view: ModelView, text: str) -> tuple[torch.Tensor, npt.NDArray[np.int64] | None]:
    """Token ids [T] of the text (with the tokenizer's special tokens) and section ids [T].

    Sections are the text's blocks separated by blank lines; a token belongs to the block
    its first character is in (special tokens: the nearest block). None without offsets.
    """
    if not text.strip():
        raise GeomlensError("the walk text is empty; give --text or --text-file with some text.")
    try:
        enc = view.tokenizer(text, return_offsets_mapping=True)
        offsets = enc["offset_mapping"]
    except (NotImplementedError, ValueError, KeyError, TypeError):
        enc, offsets = view.tokenizer(text), None
    ids = torch.tensor(enc["input_ids"], dtype=torch.long)
    if len(ids) < 2:
        raise GeomlensError("the walk text has fewer than 2 tokens; give a longer text.")
    if view.n_ctx is not None and len(ids) > view.n_ctx:
        raise GeomlensError(
            f"the walk text has {len(ids)} tokens, more than {view.name} accepts "
            f"({view.n_ctx}); give a shorter text."
        )
    if offsets is None:
        return ids, None
    starts = [i for i, ch in enumerate(text) if ch == "\n" and text[i + 1 : i + 2] == "\n"]
    sections = np.array([sum(s < a for s in starts) for a, _ in offsets], dtype=np.int64)
    return ids, sections


def check_generate(view: ModelView, n_tokens: int, generate: int) -> None:
    """Refuse decoding walks that would run past the model's positions: the text's
    ``n_tokens`` and all but the last generated token pass through the model."""
    if generate <= 0 or view.n_ctx is None:
        return
    room = view.n_ctx - n_tokens + 1
    if generate > room:
        raise GeomlensError(
            f"--generate {generate} runs past the {view.n_ctx} positions {view.name} allows "
            f"(the walk text takes {n_tokens}); use --generate {max(room, 0)} or less, or a "
            "shorter text."
        )


def token_labels(view: ModelView, ids: Any) -> list[str]:
    """One readable label per token id (whitespace escaped)."""
    out = []
    for i in np.asarray(ids).reshape(-1):
        s = view.tokenizer.decode([int(i)]) if view.tokenizer is not None else str(int(i))
        out.append(s.replace("\n", "\\n").replace("\t", "\\t"))
    return out


def _save_similarity(path: Path, ids: torch.Tensor, dot: Any, cos: Any) -> None:
    tensors = {"input_ids": ids.clone().long()}
    for l in range(dot.shape[0]):
        tensors[f"dot_{l}"] = torch.from_numpy(np.ascontiguousarray(dot[l]))
        tensors[f"cos_{l}"] = torch.from_numpy(np.ascontiguousarray(cos[l]))
    save_file(tensors, str(path))


def kernels_and_refactor(
    view: ModelView, windows: Windows, n_windows: int, batch: int = KERNEL_BATCH
) -> tuple[Any, Any]:
    """Empirical kernels and the refactoring check over the first ``n_windows`` windows.

    Returns:
        (EmpiricalKernel, RefactorResult); the pre-softmax kernels come from the view's
        scores, which every family has.
    """
    ids = torch.tensor(windows.input_ids[: max(1, min(n_windows, windows.n_contexts))])
    kern = KernelAccumulator(view.n_layers, view.n_heads, causal=not view.is_encoder)
    refac = RefactorAccumulator(view)
    for start in range(0, len(ids), batch):
        rec = record_attention(view, ids[start : start + batch])
        refac.update(rec)
        for l in range(view.n_layers):
            kern.update(l, rec.attn[l], block_scores(view, l, rec.block_in[l]))
    return kern.finalize(), refac.finalize()


def analyse_walk(  # type: ignore[no-untyped-def]
    text: str, generate: int, top_k: int, kernel_windows: int, seed: int, step: Step = quiet
):
    """The analysis step of ``run_command`` for ``walk``; ``step`` hears each step start."""

    def analyse(
        folder: RunFolder, view: ModelView, windows: Windows, acc: DecompositionAccumulator
    ) -> None:
        out = folder.path
        fig_dir = out / "figures"
        ids, sections = encode_text(view, text)
        check_generate(view, len(ids), generate)
        labels = token_labels(view, ids)
        write_text_atomic(out / "walk_text.txt", text)
        space = TokenSpace.of(view)

        step("similarity maps")
        hidden, names = layer_stack(view, ids)
        maps = similarity_maps(hidden, names, sections)
        _save_similarity(out / "similarity.safetensors", ids, maps.dot, maps.cos)
        save(figs.similarity_grid(maps, "cos"), fig_dir / "walk_similarity_cos.png", dpi=100)
        save(figs.similarity_grid(maps, "dot"), fig_dir / "walk_similarity_dot.png", dpi=100)
        for metric in ("cos", "dot"):
            save(
                figs.similarity_interactive(maps, labels, metric),
                fig_dir / f"walk_similarity_{metric}.html",
            )

        step("encoding walk")
        enc = encoding_walk(view, hidden, names, ids, k=top_k, space=space)
        save_file(
            {
                name: torch.from_numpy(np.ascontiguousarray(getattr(enc, name)))
                for name in (
                    "input_ids",
                    "top_dot",
                    "top_cos",
                    "own_rank_dot",
                    "own_rank_cos",
                    "next_rank_dot",
                    "next_rank_cos",
                    "leave_dot",
                    "leave_cos",
                    "arrive_dot",
                    "arrive_cos",
                )
            },
            str(out / "encoding_walk.safetensors"),
        )
        write_json(
            out / "encoding_walk.json",
            {
                "tokens": labels,
                "layers": list(enc.layer_names),
                "top3_cos": [
                    [token_labels(view, enc.top_cos[l, t, :3]) for t in range(len(labels))]
                    for l in range(len(enc.layer_names))
                ],
            },
        )
        save(figs.walk_ranks_figure(enc), fig_dir / "walk_encoding_ranks.png")
        save(
            figs.walk_table_figure(enc, labels, lambda x: token_labels(view, x)),
            fig_dir / "walk_encoding_table.png",
        )

        decoding: dict[str, Any] | None = None
        if generate > 0:
            step("decoding walks")
            walks: list[DecodingWalk] = [
                decoding_walk(view, ids, generate, "greedy", k=top_k, space=space),
                decoding_walk(view, ids, generate, "sample", seed=seed, k=top_k, space=space),
            ]
            decoding = {w.mode: w.to_dict() for w in walks}
            for w in walks:
                decoding[w.mode]["text"] = view.tokenizer.decode(w.tokens.tolist())
            write_json(
                out / "decoding_walk.json",
                {
                    w.mode: {
                        "tokens": token_labels(view, w.tokens),
                        "top_dot": [token_labels(view, row) for row in w.top_dot],
                        "top_cos": [token_labels(view, row) for row in w.top_cos],
                    }
                    for w in walks
                },
            )
            save_file(
                {f"vectors_{w.mode}": torch.from_numpy(w.vectors) for w in walks},
                str(out / "decoding_walk.safetensors"),
            )
            proj = walk_projection(space, walks, ids)
            save(
                figs.decoding_figure(proj, token_labels(view, proj.token_ids)),
                fig_dir / "walk_decoding.png",
            )

        step("position kernels and the refactoring check")
        kernel, refactor = kernels_and_refactor(view, windows, kernel_windows)
        biases = bias_kernels(view)
        tensors = {
            "offsets": torch.from_numpy(kernel.offsets),
            "attn": torch.from_numpy(kernel.attn),
        }
        if kernel.logits is not None:
            tensors["logits"] = torch.from_numpy(kernel.logits)
        for k in biases:
            tensors[f"bias_offsets_{k.stack}"] = torch.from_numpy(k.offsets)
            tensors[f"bias_buckets_{k.stack}"] = torch.from_numpy(k.buckets)
            tensors[f"bias_{k.stack}"] = torch.from_numpy(k.bias)
        tensors["head_norm"] = torch.from_numpy(refactor.head_norm)
        tensors["head_norm_rel"] = torch.from_numpy(refactor.head_norm_rel)
        save_file(tensors, str(out / "kernels.safetensors"))
        save(figs.kernels_figure(kernel, biases), fig_dir / "walk_kernels.png")
        save(figs.refactor_figure(refactor), fig_dir / "walk_head_norms.png")

        kernel_dict = kernel.to_dict()
        kernel_dict["windows_used"] = f"first {kernel.n_windows} of {windows.n_contexts}"
        kernel_dict["position_bias"] = [k.to_dict() for k in biases]
        folder.merge_metrics(
            "walk",
            {
                "text": {
                    "sha256": hashlib.sha256(text.encode()).hexdigest(),
                    "n_tokens": int(len(ids)),
                    "n_sections": None if sections is None else int(sections.max() + 1),
                },
                "layer_names": list(names),
                "readout": "final norm, then W_U^T rows"
                if names[-1] == "final_norm"
                else "hidden vector as is, then W_U^T rows",
                "similarity": maps.to_dict(),
                "encoding": enc.to_dict(),
                "decoding": decoding,
                "kernels": kernel_dict,
                "refactor": refactor.to_dict(),
            },
        )

    return analyse


def run_walk(
    config: CaptureConfig,
    out: str | Path,
    *,
    text: str | None = None,
    generate: int = 0,
    top_k: int = TOP_K,
    kernel_windows: int = KERNEL_WINDOWS,
    view: ModelView | None = None,
    **kwargs: Any,
) -> Run:
    """Capture, then similarity maps, walks, kernels and the refactoring check.

    Args:
        config: the capture config (its seed also seeds sampled decoding).
        out: the run folder.
        text: the text walked (default: ``default_text()``).
        generate: tokens to generate in the decoding walks (0: none; decoders only).
        top_k: neighbours of each vector kept.
        kernel_windows: corpus windows for kernels and the refactoring check.
        view: a model already loaded for ``config.model`` with eager attention.
        **kwargs: passed to ``run_command`` (progress, checkpoint_every_s).
    """
    if generate < 0:
        raise GeomlensError(f"--generate must be 0 or more (got {generate}).")
    if top_k < 1 or kernel_windows < 1:
        raise GeomlensError("top_k and kernel_windows must be at least 1.")
    source = "given" if text is not None else "default"
    text = default_text() if text is None else text
    if view is None:
        config.validate()
        view = load_model(
            config.model,
            device=config.device,
            dtype=config.dtype,
            attention="eager",
            trust_remote_code=config.trust_remote_code,
        )
    if generate and view.is_encoder:
        raise GeomlensError(
            f"--generate needs a decoder-only model; {view.name} is an encoder (drop --generate)."
        )
    ids, _ = encode_text(view, text)  # refuse a bad text before the capture
    check_generate(view, len(ids), generate)
    options = {
        "text_source": source,
        "text_sha256": hashlib.sha256(text.encode()).hexdigest(),
        "generate": generate,
        "top_k": top_k,
        "kernel_windows": kernel_windows,
        "kernel_offsets": N_OFFSETS,
    }
    return run_command(
        "walk",
        config,
        out,
        options=options,
        analyse=analyse_walk(
            text,
            generate,
            top_k,
            kernel_windows,
            config.seed,
            StepLines("walk", kwargs.get("progress", True)),
        ),
        view=view,
        **kwargs,
    )


def summary_lines(run: Run) -> list[str]:
    """A few lines for the terminal."""
    w = run.metrics["walk"]
    enc, kern, ref = w["encoding"], w["kernels"], w["refactor"]
    lines = [
        f"  text: {w['text']['n_tokens']} tokens; layers {w['layer_names'][0]}.."
        f"{w['layer_names'][-1]}",
        f"  own token leaves its top-{enc['k']} (cos) at layer {enc['cos']['leave_layer_median']}"
        f" (median); {enc['cos']['frac_never_leave']:.2f} of positions never leave",
        f"  next token enters its top-{enc['k']} (cos) from layer "
        f"{enc['cos']['arrive_layer_median']} (median)",
        f"  negative self-bias: {kern['negative_self_bias_fraction']:.3f} of heads "
        f"({kern['windows_used']} windows)",
        f"  refactoring O = sum_h A_h X W_vo,h: max rel err {ref['max_rel_err']:.2e}",
    ]
    if w["decoding"]:
        for mode, d in w["decoding"].items():
            lines.append(f"  {mode}: {json.dumps(d['text'])}")
    return lines
