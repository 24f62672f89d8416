"""Floors: the time of the bare forward passes a command makes, or must make.

Used by ``benchmarks/report.py``. ``PassLog`` records every forward pass of a model's base
(decoder-only models: every pass, since the LM-head model calls its base) with its batch,
length, cached length and the deepest block it reached; ``replay`` runs the same passes
again as bare Hugging Face forwards (random token ids of the same shapes, no hooks, no
outputs kept, the model's default attention) and returns their seconds: the floor of the
code that made them. ``concept_floor`` builds the passes the concept-space tests *must*
make (each context once with its choices, each choice without context, each scheme's own
inputs where they differ from the context) and times them the same way.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch

from geomlens.capturing.hooks import hidden_states
from geomlens.models.view import ModelView


@dataclass(frozen=True)
class Pass:
    """One forward pass: when it started, [batch, length] of its inputs, the tokens already
    in its KV cache, and the deepest block it ran (``n_layers - 1``: all of them)."""

    at: float
    batch: int
    length: int
    past: int
    depth: int


def _shape(args: tuple, kwargs: dict) -> tuple[int, int]:
    x = kwargs.get("input_ids")
    if x is None:
        x = kwargs.get("inputs_embeds")
    if x is None and args:
        x = args[0]
    return int(x.shape[0]), int(x.shape[1])


def _past(kwargs: dict) -> int:
    for name in ("cache", "past_key_values"):
        cache = kwargs.get(name)
        if cache is not None and hasattr(cache, "get_seq_length"):
            return int(cache.get_seq_length())
    return 0


@contextmanager
def pass_log(view: ModelView) -> Iterator[list[Pass]]:
    """While open, every forward of ``view.base`` is appended to the yielded list."""
    log: list[Pass] = []
    current: dict[str, Any] = {}

    def start(module: Any, args: tuple, kwargs: dict) -> None:
        batch, length = _shape(args, kwargs)
        current.update(at=time.perf_counter(), batch=batch, length=length, past=_past(kwargs))
        current["depth"] = -1
        log.append(Pass(**current))

    def reached(index: int) -> Any:
        def hook(module: Any, args: tuple) -> None:
            if log and index > log[-1].depth:
                last = log[-1]
                log[-1] = Pass(last.at, last.batch, last.length, last.past, index)

        return hook

    handles = [view.base.register_forward_pre_hook(start, with_kwargs=True)]
    handles += [b.module.register_forward_pre_hook(reached(b.index)) for b in view.blocks]
    try:
        yield log
    finally:
        for h in handles:
            h.remove()


def _ids(view: ModelView, batch: int, length: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    vocab = min(int(view.W_E.shape[0]), len(view.tokenizer))
    return torch.randint(0, vocab, (batch, length), generator=g)


def bare(view: ModelView, p: Pass, seed: int = 0) -> float:
    """Seconds of one bare forward of ``p``'s shape (its cache built first, not timed)."""
    ids = _ids(view, p.batch, p.length, seed).to(view.device)
    with torch.inference_mode():
        if p.past:
            from geomlens.capturing.hooks import cache_keyword

            prefix = _ids(view, p.batch, p.past, seed + 1).to(view.device)
            out = view.base(input_ids=prefix, use_cache=True)
            past = getattr(out, "cache", None)
            past = out.past_key_values if past is None else past
            t0 = time.perf_counter()
            view.base(input_ids=ids, use_cache=True, **{cache_keyword(view): past})
            return time.perf_counter() - t0
        t0 = time.perf_counter()
        if 0 <= p.depth < view.n_layers - 1:
            hidden_states(view, ids, [p.depth + 1])
        else:
            view.base(input_ids=ids, use_cache=False)
        return time.perf_counter() - t0


def replay(view: ModelView, passes: Sequence[Pass]) -> float:
    """Seconds of bare forwards of the same shapes as ``passes``."""
    return sum(bare(view, p, i) for i, p in enumerate(passes))


def between(passes: Sequence[Pass], start: float, end: float) -> list[Pass]:
    return [p for p in passes if start <= p.at < end]


def bare_lengths(view: ModelView, lengths: Sequence[int], budget: int) -> float:
    """Seconds of bare forwards over sequences of ``lengths``, right-padded in
    length-sorted batches of at most ``budget`` padded tokens (as lm-eval batches)."""
    from geomlens.analyses.concepts.baseline import batches

    seconds = 0.0
    for i, group in enumerate(batches(list(lengths), budget)):
        p = Pass(0.0, len(group), max(lengths[g] for g in group), 0, view.n_layers - 1)
        seconds += bare(view, p, i)
    return seconds


def concept_lengths(view: ModelView, task: Any, limit: int, seed: int) -> list[int]:
    """The sequences the default concept stage must run through the model.

    Per item: its context followed by its choices (the baseline reads each context once);
    each choice after the beginning-of-text token (the no-context control); for each
    default scheme, its own inputs where they are not the context's tokens: the segments
    encoded alone (at a layer other than E), the concept vectors followed by the choices
    (test 1; the ``sanity`` scheme's vectors are the context's own embeddings, so it needs
    nothing), each choice encoded alone (test 2 at a layer other than E). A ``concat_*``
    scheme reads the whole context's hidden states, which the baseline's pass computes.
    """
    from geomlens.analyses.concepts.baseline import prepare
    from geomlens.analyses.concepts.encode import aggregate_context, segments_for
    from geomlens.analyses.concepts.schemes import (
        DEFAULT_SCHEMES,
        PRESETS,
        parse_scheme,
        resolve_layer,
    )

    prepared = prepare(view, task, task.take(limit), 0, seed)
    lengths: list[int] = []
    for p in prepared:
        conts = sum(len(c) for c in p.enc.continuations)
        lengths += [len(p.enc.context) + conts, 1 + conts]
    for spec in DEFAULT_SCHEMES:
        scheme = parse_scheme(spec)
        layer = resolve_layer(scheme.layer, view.n_layers)
        for p in prepared:
            spans = segments_for(view, scheme, p.enc, p.prompt.blocks, p.prompt.completions)
            if not scheme.segment.startswith("concat_") and not layer.embedding:
                lengths += [b - a for block in spans for a, b in block]
            if scheme.test == "pyramidal" and scheme.key != PRESETS["sanity"].key:
                dummy = [[torch.ones(b - a, 2) for a, b in block] for block in spans]
                m = int(aggregate_context(scheme, dummy, torch.relu).shape[0])
                lengths.append(m + sum(len(c) for c in p.enc.continuations))
            if scheme.test == "similarity" and (scheme.out_layer or "E") != "E":
                lengths += [len(c) for c in p.enc.continuations]
    return lengths
