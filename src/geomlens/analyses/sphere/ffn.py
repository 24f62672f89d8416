"""FFN sub-updates in vocabulary space (Geva et al. 2022, as Molina 2023 reads them).

The MLP's output is ``sum_i m_i w_i (+ b_out)`` with ``w_i`` the i-th row of W_out
[d_mlp, d] and ``m_i`` its activation coefficient. Each ``w_i`` is read through the
readout (linear part of the readout norm, then W_U): the tokens it promotes.

- Static: per chosen layer, the rows of largest norm |w_i| and their top tokens (the
  vocabulary read in chunks, ``analyses.common.vocab``: ties by ascending id among the promoted,
  descending id among the suppressed, the two ends of one order).
- Prompt: at the prompt's last position, the contribution of each sub-update to the
  predicted token's logit, ``m_i * s * (N_lin(w_i) . W_U[:, target])`` with ``s`` the
  final norm's scale ``sqrt(d) / sqrt(|x_c|^2 + d eps)`` at the last hidden state
  (pre-norm: the direct logit attribution with the norm's scale frozen; post-norm
  encoders: ``s = 1``, a direction-only reading, since later LayerNorms intervene).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from geomlens.analyses.common.vocab import Readout, matrix_scores, scan_vocab
from geomlens.analyses.sphere.compute import norm_linear, readout_norm
from geomlens.models.view import ModelView
from geomlens.stats.rounding import sig


def mlp_coefficients(view: ModelView, layer: int, x: torch.Tensor) -> torch.Tensor:
    """The activation coefficients m of block ``layer``'s MLP: [..., d] -> [..., d_mlp].

    Args:
        x: the MLP's input (after its norm for pre-norm blocks).
    """
    with torch.inference_mode():
        return view.blocks[layer].mlp().coefficients(x)


def final_scale(view: ModelView, h_last: torch.Tensor) -> float:
    """The readout norm's scale at a last hidden state ``h_last`` [d] (1 for post-norm)."""
    norm = view.final_norm
    if norm is None:
        return 1.0
    x = h_last.double()
    if norm.kind == "layernorm":
        x = x - x.mean()
    d = x.shape[-1]
    return float(math.sqrt(d) / torch.sqrt((x * x).sum() + d * norm.eps))


@dataclass(frozen=True)
class FfnResult:
    """Strongest sub-updates per layer, and the prompt's top contributions.

    Attributes:
        layers: blocks read.
        rows: layer -> list of {"row", "norm", "promoted", "suppressed"}.
        prompt: {"target", "target_id", "scale", "top": [{"layer", "row", "coef",
            "contribution", "promoted"}], "per_layer_total": {layer: sum}} or None.
    """

    layers: list[int]
    rows: dict[str, list[dict[str, Any]]]
    prompt: dict[str, Any] | None

    def to_dict(self) -> dict[str, Any]:
        """The compact part for metrics.json (side JSON gets ``tables_dict``)."""
        out: dict[str, Any] = {
            "layers": self.layers,
            "strongest": {
                layer: [
                    {"row": r["row"], "norm": r["norm"], "promoted": r["promoted"][:5]}
                    for r in rows[:3]
                ]
                for layer, rows in self.rows.items()
            },
        }
        if self.prompt is not None:
            p = dict(self.prompt)
            p["top"] = p["top"][:10]
            out["prompt"] = p
        return out

    def tables_dict(self) -> dict[str, Any]:
        return {"layers": self.layers, "rows": self.rows, "prompt": self.prompt}


def _read(view: ModelView, w: torch.Tensor, k: int, bottom: int = 0) -> Readout:
    """Rows w [n, d] read as ``N_lin(w) W_U`` over the vocabulary in chunks: the k promoted
    (highest) and ``bottom`` suppressed (lowest) tokens of each row."""
    _, norm = readout_norm(view)
    x = norm_linear(w.float(), norm)
    (got,) = scan_vocab(
        matrix_scores(x, view.W_U),
        x.shape[0],
        int(view.W_U.shape[1]),
        column_bytes=4 * (2 * x.shape[0] + view.d_model),
        k=k,
        bottom=bottom,
    )
    return got


def _strongest_rows(
    view: ModelView, layer: int, tok: Callable[[int], str], n_rows: int, k: int
) -> list[dict[str, Any]]:
    """The ``n_rows`` rows of block ``layer``'s W_out with the largest norm, each with its
    k promoted and k suppressed tokens (read in chunks of the vocabulary)."""
    W_out = view.blocks[layer].mlp().W_out
    norms = W_out.double().norm(dim=-1)
    order = torch.argsort(-norms, stable=True)[:n_rows]
    with torch.inference_mode():
        got = _read(view, W_out[order], k, k)
    up, down = got.top_ids, got.bottom_ids
    assert up is not None and down is not None
    return [
        {
            "row": int(i),
            "norm": sig(float(norms[i])),
            "promoted": [tok(int(j)) for j in up[r]],
            "suppressed": [tok(int(j)) for j in down[r]],
        }
        for r, i in enumerate(order)
    ]


def _prompt_contributions(
    view: ModelView,
    prompt_inputs: dict[int, torch.Tensor],
    target_id: int,
    h_last: torch.Tensor,
    tok: Callable[[int], str],
    n_top: int,
) -> dict[str, Any]:
    """Every row's direct contribution to the target's logit (``m_i * s * N_lin(w_i) .
    W_U[:, target]``); the ``n_top`` largest, with their promoted tokens, and each
    block's total."""
    scale = final_scale(view, h_last)
    entries = []
    totals = {}
    _, rnorm = readout_norm(view)
    u = view.W_U[:, target_id].double()
    for layer in sorted(prompt_inputs):
        W_out = view.blocks[layer].mlp().W_out.double()
        m = mlp_coefficients(view, layer, prompt_inputs[layer]).double().reshape(-1)
        direct = norm_linear(W_out, rnorm) @ u  # [d_mlp]
        contrib = m * direct * scale
        totals[str(layer)] = sig(float(contrib.sum()))
        for i in torch.argsort(-contrib, stable=True)[:n_top]:
            entries.append((float(contrib[i]), layer, int(i), float(m[i])))
    entries.sort(key=lambda e: (-e[0], e[1], e[2]))
    top = []
    for c, layer, i, coef in entries[:n_top]:
        W_out = view.blocks[layer].mlp().W_out
        with torch.inference_mode():
            best = _read(view, W_out[i : i + 1], 5).top_ids
        assert best is not None
        top.append(
            {
                "layer": layer,
                "row": i,
                "coef": sig(coef),
                "contribution": sig(c),
                "promoted": [tok(int(j)) for j in best[0]],
            }
        )
    return {
        "target": tok(target_id),
        "target_id": int(target_id),
        "scale": sig(scale),
        "top": top,
        "per_layer_total": totals,
        "attribution": "direct" if view.final_norm is not None else "direction only (post-norm)",
    }


def ffn_subupdates(
    view: ModelView,
    layers: Sequence[int],
    *,
    tokens: Sequence[str] | None = None,
    n_rows: int = 10,
    k: int = 10,
    prompt_inputs: dict[int, torch.Tensor] | None = None,
    target_id: int | None = None,
    h_last: torch.Tensor | None = None,
    n_top: int = 20,
    progress: Callable[[int], object] | None = None,
) -> FfnResult:
    """Strongest FFN rows of ``layers`` read through the unembedding; prompt contributions.

    Args:
        view: the model.
        layers: blocks whose strongest rows are listed.
        tokens: [vocab] token strings (None: ids as strings).
        n_rows: rows per layer; k: tokens per row.
        prompt_inputs: block -> [d] the MLP's input at the prompt's last position (every
            block wanted for contributions); None skips the prompt part.
        target_id: the token whose logit is explained.
        h_last: [d] the last hidden state at that position (for the norm's scale).
        n_top: contributions kept.
        progress: called with 1 after each layer's rows and after the prompt's
            contributions (a progress bar's ``update``; ``len(layers) + 1`` calls).
    """

    def tok(i: int) -> str:
        return str(i) if tokens is None else tokens[i]

    def tick() -> None:
        if progress is not None:
            progress(1)

    rows = {}
    for layer in layers:
        rows[str(layer)] = _strongest_rows(view, layer, tok, n_rows, k)
        tick()
    prompt = None
    if prompt_inputs is not None and target_id is not None and h_last is not None:
        prompt = _prompt_contributions(view, prompt_inputs, target_id, h_last, tok, n_top)
    tick()
    return FfnResult(layers=list(layers), rows=rows, prompt=prompt)
