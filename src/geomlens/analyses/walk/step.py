"""Movement through embedding space (Singh, 2023): the analysis step of ``geomlens walk``
and of the report's walk stage.

Joins the pure analyses and the figures. After the capture of the corpus windows, on the
given text (default: the package's few-shot prompt): similarity maps and the encoding walk;
with ``generate`` the greedy and seeded sampled decoding walks; on the first
``kernel_windows`` corpus windows the empirical position kernels, the refactoring check and
the per-head output norms (T5: also the learned bias
kernels). Numbers go to ``metrics.json`` under "walk"; arrays to safetensors side files.

Encoder-decoders: the main stack is the encoder (``"stack": "encoder"``); the decoder
stack, read teacher-forced on the text, gets its own encoding walk, the decoding walks
(its decoder generating from the start token) and the kernels of its self- and
cross-attention, under ``"decoder"``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, replace
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import torch

from geomlens.analyses.attention.parts import self_scores
from geomlens.analyses.base import StageRequest
from geomlens.analyses.common.applicable import not_applicable, readout_missing
from geomlens.analyses.walk import figures as figs
from geomlens.analyses.walk.kernels import (
    EmpiricalKernel,
    KernelAccumulator,
    bias_kernels,
    cross_scores,
)
from geomlens.analyses.walk.refactor import AttentionTap, RefactorResult, record_seq2seq_attention
from geomlens.analyses.walk.schema import (
    DecoderStack,
    Decoding,
    Encoding,
    Kernels,
    Refactor,
    Similarity,
    TextRecord,
    WalkMetrics,
)
from geomlens.analyses.walk.similarity import (
    FINAL_NORM,
    decoder_inputs,
    layer_stack,
    sig,
    similarity_maps,
)
from geomlens.analyses.walk.walks import (
    DecodingWalk,
    EncodingWalk,
    TokenSpace,
    control_summary,
    decoding_walk,
    encoding_walk,
    shuffled_ids,
    walk_projection,
)
from geomlens.capturing.store import save_file_atomic as save_file
from geomlens.capturing.taps import TAP_CHUNK, Taps, attention_chunk, fill_taps
from geomlens.corpus import Windows
from geomlens.errors import FILE_LIMITS, GeomlensError
from geomlens.io.files import read_user_text, write_text_atomic
from geomlens.io.progress import Step, quiet, step_bar
from geomlens.models.loading import eager_attention
from geomlens.models.view import ModelView
from geomlens.pipeline.taps import filled_tap
from geomlens.reporting.figures import rendered_in_background, save_later
from geomlens.runs.runfolder import Run, RunFolder, write_json
from geomlens.stats import DecompositionAccumulator

KERNEL_WINDOWS = 16
WALK_GENERATE = 8
"""Tokens generated in the report's decoding walks (models that generate)."""


def kernel_windows() -> int:
    """The windows whose attention the report's capture records (its "attention" tap)."""
    return KERNEL_WINDOWS


TOP_K = 10


def default_text() -> str:
    """The package's few-shot prompt (five Q/A sections, about 300 tokens)."""
    return (resources.files("geomlens") / "data" / "walk_prompt.txt").read_text(encoding="utf-8")


def _fits(view: ModelView, positions: int, text: str, generate: int) -> bool:
    """Whether ``text`` (and ``generate`` generated tokens after it, on a decoder) fits the
    model's ``positions``, with the 2 tokens a walk needs."""
    n = len(view.tokenizer(text)["input_ids"])
    room = positions if view.is_seq2seq else positions - n + 1
    return 2 <= n <= positions and (generate <= 0 or generate <= room)


def fitted_default_text(view: ModelView, generate: int = 0) -> tuple[str, str | None]:
    """The packaged walk text, cut to its leading lines that fit the model's positions (a
    model with fewer positions than the text's tokens), and the sentence the page shows
    when it was cut (None: it fits whole, or not even its first line fits, which
    ``encode_text`` then refuses)."""
    text, positions = default_text(), view.n_ctx
    if positions is None or _fits(view, positions, text, generate):
        return text, None
    lines = text.rstrip("\n").split("\n")
    lo, hi = 0, len(lines)  # the most lines that fit: lo fits (0: none), hi does not
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if _fits(view, positions, "\n".join(lines[:mid]).rstrip() + "\n", generate):
            lo = mid
        else:
            hi = mid
    if lo == 0:
        return text, None
    cut = "\n".join(lines[:lo]).rstrip() + "\n"
    n_tokens = len(view.tokenizer(cut)["input_ids"])
    return cut, (
        f"The packaged walk text was cut to its first {lo} of {len(lines)} lines "
        f"({n_tokens} tokens) to fit the {positions} positions of {view.name}."
    )


def read_text_file(path: str | Path) -> str:
    """The text of ``path``; a GeomlensError in one sentence when it cannot be read."""
    return read_user_text(path, f"--text-file {path}", FILE_LIMITS["--text-file"])


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
    """Refuse decoding walks that would run past the model's positions.

    A decoder-only model reads the text's ``n_tokens`` and all but the last generated
    token; an encoder-decoder's decoder reads its start token and all but the last
    generated token (the text goes to the encoder, which ``encode_text`` checks).
    """
    if generate <= 0 or view.n_ctx is None:
        return
    room = view.n_ctx if view.is_seq2seq else view.n_ctx - n_tokens + 1
    if generate > room:
        takes = (
            "its decoder reads the start token and the generated tokens"
            if view.is_seq2seq
            else f"the walk text takes {n_tokens}"
        )
        shorter = "" if view.is_seq2seq else ", or a shorter text"
        raise GeomlensError(
            f"--generate {generate} runs past the {view.n_ctx} positions {view.name} allows "
            f"({takes}); use --generate {max(room, 0)} or less{shorter}."
        )


def token_labels(view: ModelView, ids: Any) -> list[str]:
    """One readable label per token id (whitespace escaped)."""
    out = []
    for i in np.asarray(ids).reshape(-1):
        s = view.tokenizer.decode([int(i)]) if view.tokenizer is not None else str(int(i))
        out.append(s.replace("\n", "\\n").replace("\t", "\\t"))
    return out


def _save_similarity(path: Path, ids: torch.Tensor, dot: Any) -> None:
    """The inner-product maps only: each cosine map is ``dot / sqrt(outer(diag, diag))``
    of its own (the diagonal holds the squared norms), so storing it too doubled the file."""
    tensors = {"input_ids": ids.clone().long()}
    for l in range(dot.shape[0]):
        tensors[f"dot_{l}"] = torch.from_numpy(np.ascontiguousarray(dot[l]))
    save_file(tensors, str(path))


def _kernel_ids(windows: Windows, n_windows: int) -> torch.Tensor:
    """[B, T] the first ``n_windows`` corpus windows (at least one)."""
    return torch.tensor(windows.input_ids[: max(1, min(n_windows, windows.n_contexts))])


def kernels_and_refactor(
    view: ModelView, windows: Windows, n_windows: int
) -> tuple[EmpiricalKernel, RefactorResult]:
    """Empirical kernels and the refactoring check of the main stack (an encoder-decoder's
    encoder) over the first ``n_windows`` windows alone: the capture's "attention" tap,
    filled without a capture.

    Returns:
        (EmpiricalKernel, RefactorResult); the pre-softmax kernels come from the view's
        scores, which every family has.
    """
    tap = AttentionTap(view, max(1, min(n_windows, windows.n_contexts)))
    fill_taps(view, _kernel_ids(windows, n_windows), Taps({"attention": tap}))
    return tap.finalize()


def decoder_kernels(
    view: ModelView, windows: Windows, n_windows: int, batch: int = TAP_CHUNK
) -> tuple[EmpiricalKernel, EmpiricalKernel]:
    """An encoder-decoder's decoder self-attention and cross-attention kernels.

    The encoder reads each window, the decoder its ``decoder_inputs`` (start token, then
    the window without its last token). Cross-attention offsets are delta = i - j with i the
    decoder query and j the encoder key, both signs.

    Returns:
        (decoder self-attention kernel (causal), cross-attention kernel), both [L_dec, H, n].
    """
    ids = _kernel_ids(windows, n_windows)
    batch = attention_chunk(view, ids.shape[1], stacks=2, batch=batch)  # self and cross
    L, H = len(view.decoder_blocks), view.n_heads
    own = KernelAccumulator(L, H, causal=True)
    cross = KernelAccumulator(L, H, causal=False)
    for start in range(0, len(ids), batch):
        chunk = ids[start : start + batch]
        rec = record_seq2seq_attention(view, chunk, decoder_inputs(view, chunk))
        for l, block in enumerate(view.decoder_blocks):
            own.update(l, rec.self_attn[l], self_scores(block, rec.decoder_in[l]))
            cross.update(l, rec.cross_attn[l], cross_scores(block, rec.cross_x[l], rec.encoded))
    return own.finalize(), cross.finalize()


def _save_encoding(folder: RunFolder, view: ModelView, enc: EncodingWalk, suffix: str) -> None:
    """An encoding walk's arrays, top-3 table and figures (``suffix``: "" or "_decoder")."""
    out, fig_dir = folder.path, folder.path / "figures"
    labels = token_labels(view, enc.input_ids)
    names = [
        f"{a}_{m}"
        for a in ("top", "own_rank", "next_rank", "leave", "arrive")
        for m in ("dot", "cos")
    ]
    save_file(
        {n: torch.from_numpy(np.ascontiguousarray(getattr(enc, n))) for n in ["input_ids", *names]},
        str(out / f"encoding_walk{suffix}.safetensors"),
    )
    write_json(
        out / f"encoding_walk{suffix}.json",
        {
            "tokens": labels,
            "layers": list(enc.layer_names),
            "top3_cos": [
                [token_labels(view, enc.top_cos[l, t, :3]) for t in range(len(labels))]
                for l in range(len(enc.layer_names))
            ],
        },
    )
    save_later(figs.walk_ranks_figure(enc), fig_dir / f"walk_encoding_ranks{suffix}.png")
    save_later(
        figs.walk_table_figure(enc, labels, lambda x: token_labels(view, x)),
        fig_dir / f"walk_encoding_table{suffix}.png",
    )


def _decoding(
    folder: RunFolder,
    view: ModelView,
    ids: torch.Tensor,
    generate: int,
    top_k: int,
    seed: int,
    progress: Callable[[int], object] | None = None,
) -> dict[str, Any]:
    """Greedy and seeded sampled decoding walks: side files, figure, metrics
    (``progress`` hears 1 after each walk)."""
    space = TokenSpace.of(view)
    walks: list[DecodingWalk] = []
    for mode in ("greedy", "sample"):
        walks.append(decoding_walk(view, ids, generate, mode, seed=seed, k=top_k, space=space))
        if progress is not None:
            progress(1)
    decoding = {w.mode: w.to_dict() for w in walks}
    for w in walks:
        decoding[w.mode]["text"] = view.tokenizer.decode(w.tokens.tolist())
    write_json(
        folder.path / "decoding_walk.json",
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
        str(folder.path / "decoding_walk.safetensors"),
    )
    proj = walk_projection(space, walks, ids)
    save_later(
        figs.decoding_figure(proj, token_labels(view, proj.token_ids)),
        folder.path / "figures" / "walk_decoding.png",
    )
    return decoding


def _kernel_tensors(prefix: str, kernel: EmpiricalKernel) -> dict[str, torch.Tensor]:
    """A kernel's arrays for kernels.safetensors: ``{prefix}offsets``, ``attn``, ``logits``."""
    tensors = {
        f"{prefix}offsets": torch.from_numpy(kernel.offsets),
        f"{prefix}attn": torch.from_numpy(kernel.attn),
    }
    if kernel.logits is not None:
        tensors[f"{prefix}logits"] = torch.from_numpy(kernel.logits)
    return tensors


def _kernel_metrics(kernel: EmpiricalKernel, windows: Windows, far: bool) -> dict[str, Any]:
    """A kernel's metrics, with the far-position test when ``far`` (encoder-decoders)."""
    out = kernel.to_dict()
    out["windows_used"] = f"first {kernel.n_windows} of {windows.n_contexts}"
    if far:
        out["far_position"] = kernel.far_position()
    return out


def _kernels(
    folder: RunFolder, view: ModelView, windows: Windows, kernel_windows: int
) -> dict[str, Any]:
    """Position kernels of every attention and the refactoring check: side files, figures
    and the metrics ("kernels", "refactor"; an encoder-decoder's also "decoder_kernels")."""
    skipped = not_applicable(view, "the position kernels and the per-head refactoring")
    if skipped is not None:  # the hidden-state tier: no attention weights to read
        return {
            "kernels": {"negative_self_bias_fraction": None, "not_applicable": skipped},
            "refactor": {"max_rel_err": None, "not_applicable": skipped},
        }
    fig_dir = folder.path / "figures"
    n = max(1, min(kernel_windows, windows.n_contexts))
    tap = filled_tap(folder, "attention", AttentionTap(view, n))
    kernel, refactor = tap.finalize()
    biases = bias_kernels(view)
    tensors = _kernel_tensors("", kernel)
    for k in biases:
        tensors[f"bias_offsets_{k.stack}"] = torch.from_numpy(k.offsets)
        tensors[f"bias_buckets_{k.stack}"] = torch.from_numpy(k.buckets)
        tensors[f"bias_{k.stack}"] = torch.from_numpy(k.bias)
    tensors["head_norm"] = torch.from_numpy(refactor.head_norm)
    tensors["head_norm_rel"] = torch.from_numpy(refactor.head_norm_rel)
    seq2seq = view.is_seq2seq
    main = _kernel_metrics(kernel, windows, seq2seq)
    main["position_bias"] = [k.to_dict() for k in biases]
    out: dict[str, Any] = {"kernels": main, "refactor": refactor.to_dict()}
    if seq2seq:  # filled with the encoder's kernels, in the same passes
        own, cross = tap.decoder_finalize()
        tensors |= _kernel_tensors("decoder_", own) | _kernel_tensors("cross_", cross)
        tables = {k.stack: k.scores() for k in biases}
        main["bias_table"] = tables.get("encoder")
        decoder = _kernel_metrics(own, windows, True)
        decoder["bias_table"] = tables.get("decoder")
        crossed = _kernel_metrics(cross, windows, True)
        crossed["position_bias"] = None  # T5's cross-attention adds none
        out["decoder_kernels"] = {"kernels": decoder, "cross_attention": crossed}
        own_bias = [k for k in biases if k.stack == "decoder"]
        save_later(
            figs.kernels_figure(own, own_bias, "decoder"), fig_dir / "walk_kernels_decoder.png"
        )
        save_later(figs.kernels_figure(cross, (), "cross"), fig_dir / "walk_kernels_cross.png")
    save_file(tensors, str(folder.path / "kernels.safetensors"))
    label = "encoder" if seq2seq else "main"
    save_later(figs.kernels_figure(kernel, biases, label), fig_dir / "walk_kernels.png")
    save_later(figs.refactor_figure(refactor), fig_dir / "walk_head_norms.png")
    return out


def _similarity(folder: RunFolder, view: ModelView, ids: torch.Tensor, sections: Any) -> Any:
    """Similarity maps of the main stack: side file, figures; returns (maps, hidden, names)."""
    fig_dir = folder.path / "figures"
    labels = token_labels(view, ids)
    hidden, names = layer_stack(view, ids)
    maps = similarity_maps(hidden, names, sections)
    _save_similarity(folder.path / "similarity.safetensors", ids, maps.dot)
    for metric in ("cos", "dot"):
        save_later(figs.similarity_grid(maps, metric), fig_dir / f"walk_similarity_{metric}.png")
    for metric in ("cos", "dot"):
        save_later(
            figs.similarity_interactive(maps, labels, metric),
            fig_dir / f"walk_similarity_{metric}.html",
        )
    return maps, hidden, names


def _control(
    view: ModelView,
    ids: torch.Tensor,
    names: tuple[str, ...],
    top_k: int,
    space: TokenSpace,
    seed: int,
) -> dict[str, Any]:
    """The walk claims' control: the encoding walk of the same tokens shuffled
    (``walks.shuffled_ids``), summarised as the walk's own never-leave fraction."""
    shuffled = shuffled_ids(ids, seed)
    hidden, _ = layer_stack(view, shuffled)
    walk = encoding_walk(view, hidden, names, shuffled, k=top_k, space=space)
    return control_summary(walk, seed)


def _decoder_stack(
    folder: RunFolder, view: ModelView, ids: torch.Tensor, top_k: int, space: TokenSpace
) -> dict[str, Any]:
    """An encoder-decoder's decoder stack read teacher-forced on the text: its encoding walk
    (side files with the suffix "_decoder") and its metrics."""
    hidden, names = layer_stack(view, ids, "decoder")
    dec_ids = decoder_inputs(view, ids)
    enc = encoding_walk(
        view, hidden, names, dec_ids, k=top_k, space=space, next_ids=ids, stack="decoder"
    )
    _save_encoding(folder, view, enc, "_decoder")
    return {
        "stack": "decoder",
        "input": "the decoder start token, then the text without its last token (teacher-forced)",
        "decoder_start_token_id": view.decoder_start(),
        "layer_names": list(names),
        "readout": f"decoder final norm, times the output scale {sig(view.unembedding_scale)}, "
        "then W_U^T rows",
        "encoding": enc.to_dict(),
    }


@dataclass(frozen=True)
class WalkAnalysis:
    """The walk's analysis step (an ``Analysis``): similarity maps, the encoding walk, the
    decoding walks (``generate`` tokens), the position kernels and the refactoring check;
    ``step`` hears each step start."""

    text: str
    generate: int
    top_k: int
    kernel_windows: int
    seed: int
    step: Step = quiet
    shortened: str | None = None
    """Why the packaged text was cut (``fitted_default_text``), for the page."""

    def __call__(
        self, folder: RunFolder, view: ModelView, windows: Windows, acc: DecompositionAccumulator
    ) -> None:
        text, generate, top_k, kernel_windows, seed, step = (
            self.text,
            self.generate,
            self.top_k,
            self.kernel_windows,
            self.seed,
            self.step,
        )
        # Figures are drawn in a forked process once the numbers are in (see
        # rendered_in_background); the report draws them while its next stage runs.
        with rendered_in_background():
            ids, sections = encode_text(view, text)
            check_generate(view, len(ids), generate)
            write_text_atomic(folder.path / "walk_text.txt", text)
            space = TokenSpace.of(view)

            step("similarity maps")
            maps, hidden, names = _similarity(folder, view, ids, sections)

            # a readout that is not the model's own: no walk among its tokens is claimed
            no_readout = readout_missing(view)
            enc = decoder = control = None
            if no_readout is None:
                step("encoding walk")
                stack = "encoder" if view.is_seq2seq else "main"
                with step_bar(step, sum(n != FINAL_NORM for n in names), "layer") as bar:
                    enc = encoding_walk(
                        view, hidden, names, ids, k=top_k, space=space, stack=stack,
                        progress=bar.update,
                    )  # fmt: skip
                _save_encoding(folder, view, enc, "")
                if view.generates and not view.is_seq2seq:
                    step("encoding walk of the shuffled text (the control)")
                    control = _control(view, ids, names, top_k, space, self.seed)
                if view.is_seq2seq:
                    decoder = _decoder_stack(folder, view, ids, top_k, space)

            decoding: dict[str, Any] | None = None
            if generate > 0 and no_readout is None:
                step("decoding walks")
                with step_bar(step, 2, "walk") as bar:
                    decoding = _decoding(folder, view, ids, generate, top_k, seed, bar.update)

            step("position kernels and the refactoring check")
            kernels = _kernels(folder, view, windows, kernel_windows)
            block = WalkMetrics(
                text=TextRecord(
                    sha256=hashlib.sha256(text.encode()).hexdigest(),
                    n_tokens=int(len(ids)),
                    n_sections=None if sections is None else int(sections.max() + 1),
                    shortened=self.shortened,
                ),
                layer_names=list(names),
                readout="final norm, then W_U^T rows"
                if names[-1] == "final_norm"
                else "hidden vector as is, then W_U^T rows",
                similarity=Similarity.from_dict(maps.to_dict()),
                encoding=None
                if enc is None
                else Encoding.from_dict(
                    enc.to_dict() | ({} if control is None else {"control": control})
                ),
                decoding=read_decodings(decoding),
                kernels=Kernels.from_dict(kernels["kernels"]),
                refactor=Refactor.from_dict(kernels["refactor"]),
                not_available=no_readout,
            )
            if decoder is not None:
                decoder.update(decoding=decoding, **kernels["decoder_kernels"])
                block = replace(
                    block, stack="encoder", decoding=None, decoder=DecoderStack.from_dict(decoder)
                )
            folder.merge_metrics("walk", block.to_dict())


@dataclass(frozen=True)
class WalkStage:
    """The report's walk stage (an ``Analysis``): the walk under eager attention (its
    kernels read attention weights), on ``text`` (None: the packaged prompt)."""

    seed: int
    generate: int
    step: Step
    text: str | None = None

    def __call__(
        self, folder: RunFolder, view: ModelView, windows: Windows, acc: DecompositionAccumulator
    ) -> None:
        n = self.generate if view.generates else 0
        text, shortened = (self.text, None) if self.text else fitted_default_text(view, n)
        with eager_attention(view):
            walk = WalkAnalysis(text, n, TOP_K, KERNEL_WINDOWS, self.seed, self.step, shortened)
            walk(folder, view, windows, acc)


def walk_stage(request: StageRequest, step: Step) -> WalkStage:
    """The report's movement stage."""
    return WalkStage(request.config.seed, WALK_GENERATE, step, request.text)


def _stack_lines(
    enc: Encoding | None, kern: Kernels, label: str, absent: str | None = None
) -> list[str]:
    """The encoding-walk and negative self-bias lines of one stack (``label``: "" or
    "encoder: ", "decoder: "; ``absent``: why there is no encoding walk)."""
    neg = kern.negative_self_bias_fraction
    walked = (
        [f"  {label}encoding walk: {absent or 'not computed'}"]
        if enc is None
        else [
            f"  {label}own token leaves its top-{enc.k} (cos) at layer "
            f"{enc.cos.leave_layer_median} (median); {enc.cos.frac_never_leave:.2f} of "
            "positions never leave",
            f"  {label}next token enters its top-{enc.k} (cos) from layer "
            f"{enc.cos.arrive_layer_median} (median)",
        ]
    )
    return [
        *walked,
        f"  {label}negative self-bias: {neg:.3f} of heads ({kern.windows_used} windows)"
        if neg is not None
        else f"  {label}negative self-bias: not applicable (no attention weights read)",
    ]


def summary_lines(run: Run) -> list[str]:
    """A few lines for the terminal (encoder-decoders: the walk lines once per stack)."""
    w = WalkMetrics.of(run.metrics)
    if w is None:
        return []
    decoder = w.decoder
    lines = [
        f"  text: {w.text.n_tokens} tokens; layers {w.layer_names[0]}..{w.layer_names[-1]}",
        *_stack_lines(w.encoding, w.kernels, "encoder: " if decoder else "", w.not_available),
    ]
    decoding = w.decoding
    if decoder:
        lines += _stack_lines(decoder.encoding, decoder.kernels, "decoder: ")
        cross = decoder.cross_attention
        lines.append(
            f"  cross-attention: negative self-bias {cross.negative_self_bias_fraction:.3f} "
            "of heads"
        )
        decoding = decoder.decoding
    err = w.refactor.max_rel_err
    lines.append(
        f"  refactoring O = sum_h A_h X W_vo,h: max rel err {err:.2e}"
        if err is not None
        else "  refactoring O = sum_h A_h X W_vo,h: not applicable (no attention weights read)"
    )
    if decoding:
        for mode, d in decoding.items():
            lines.append(f"  {mode}: {json.dumps(d.text)}")
    return lines


def read_decodings(decoding: dict[str, Any] | None) -> dict[str, Decoding] | None:
    """The decoding walks' records by mode (None when none was run)."""
    return None if decoding is None else {m: Decoding.from_dict(d) for m, d in decoding.items()}
