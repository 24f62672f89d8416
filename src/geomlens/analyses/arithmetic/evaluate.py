"""Exact-match accuracy per operand length by batched greedy decoding.

Every problem of operand length n has an answer of exactly n + 1 tokens, so all prompts of
one length decode together: n + 1 greedy steps, each one forward pass over the batch with
position ids 0, 1, 2, ... A problem counts as right only when all n + 1 answer tokens are.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable

import numpy as np
import numpy.typing as npt
import torch

from geomlens.analyses.arithmetic.data import Problems, make_problems

EVAL_STREAM, CHECK_STREAM = 21, 41
"""Seed-sequence tags of the evaluation problems and of the held-out problems of the
stopping criterion (training uses other tags)."""


def exact_match(predicted: npt.ArrayLike, target: npt.ArrayLike) -> npt.NDArray[np.bool_]:
    """Whether each predicted answer equals its target in every token.

    Args:
        predicted: [N, A] answer tokens produced.
        target: [N, A] correct answer tokens.

    Returns:
        [N] bool.
    """
    p, t = np.asarray(predicted), np.asarray(target)
    if p.shape != t.shape:
        raise ValueError(f"predicted {p.shape} and target {t.shape} differ in shape")
    return np.asarray((p == t).all(axis=1), dtype=bool)


def eval_problems(
    seed: int,
    lengths: Iterable[int],
    count: int,
    *,
    reverse: bool,
    carry: bool,
    stream: int = EVAL_STREAM,
) -> dict[int, Problems]:
    """A fixed problem set: ``count`` problems per operand length, drawn from the seed and
    ``stream`` (``EVAL_STREAM`` for the evaluation, ``CHECK_STREAM`` for the criterion)."""
    return {
        n: make_problems(
            np.random.default_rng([seed, stream, n]), n, count, reverse=reverse, carry=carry
        )
        for n in lengths
    }


def in_float64(model: torch.nn.Module) -> torch.nn.Module:
    """The model itself when its weights are float64, else a float64 copy (the original is
    left as it is)."""
    if all(p.dtype == torch.float64 for p in model.parameters()):
        return model
    return copy.deepcopy(model).double()


def greedy_answers(
    model: torch.nn.Module, prompts: npt.ArrayLike, n_answer: int, batch_size: int = 512
) -> npt.NDArray[np.int64]:
    """Greedy continuation of equal-length prompts.

    Args:
        model: a causal LM returning ``.logits`` [B, L, vocab].
        prompts: [N, P] token ids, all of one length.
        n_answer: tokens to generate.
        batch_size: prompts decoded at once.

    Returns:
        [N, n_answer] the generated tokens.
    """
    device = next(model.parameters()).device
    ids = torch.as_tensor(np.asarray(prompts), dtype=torch.long)
    was_training = model.training
    model.eval()
    out = []
    with torch.inference_mode():
        for start in range(0, ids.shape[0], batch_size):
            x = ids[start : start + batch_size].to(device)
            for _ in range(n_answer):
                logits = model(input_ids=x, use_cache=False).logits[:, -1]
                x = torch.cat([x, logits.argmax(-1, keepdim=True)], dim=1)
            out.append(x[:, -n_answer:].cpu())
    model.train(was_training)
    return torch.cat(out).numpy().astype(np.int64)


def accuracy_by_length(
    model: torch.nn.Module,
    problems: dict[int, Problems],
    limit: int | None = None,
    batch_size: int = 512,
) -> dict[int, float]:
    """Exact-match accuracy of greedy answers for each operand length.

    The answers are decoded in float64 (``in_float64``): where two digits' logits are
    within float32 rounding of each other, every machine then picks the same one.

    Args:
        model: the trained model.
        problems: operand length -> evaluation problems.
        limit: use only the first ``limit`` problems of each length.
        batch_size: prompts decoded at once.
    """
    result = {}
    model = in_float64(model)
    for n, p in problems.items():
        prompts, answers = p.prompts[:limit], p.answers[:limit]
        predicted = greedy_answers(model, prompts, answers.shape[1], batch_size)
        result[n] = float(exact_match(predicted, answers).mean())
    return result


def range_means(
    accuracy: dict[int, float], train_lengths: range
) -> tuple[float | None, float | None]:
    """(mean accuracy over lengths inside the training range, mean over the others)."""
    inside = [a for n, a in accuracy.items() if n in train_lengths]
    outside = [a for n, a in accuracy.items() if n not in train_lengths]
    return (
        float(np.mean(inside)) if inside else None,
        float(np.mean(outside)) if outside else None,
    )
