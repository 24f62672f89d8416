"""Similarity maps between positions, per layer (Singh, 2023, section 2).

Every hidden vector of one text is compared with every other at the same layer, by inner
product and by cosine. The layers are the hidden-state layers 0..L of ``capturing.hooks``
(0 = embedding output, l = output of block l-1, no final norm) followed, for models with
a final norm, by the last layer after that norm ("final_norm"), which is what the
unembedding reads. For encoder-decoders ``layer_stack`` also gives the decoder stack, read
teacher-forced on the same text (``decoder_inputs``). See docs/walk.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import torch

from geomlens.capturing.hooks import hidden_states, recording_inputs
from geomlens.models.view import ModelView, NormView
from geomlens.stats.rounding import sig

Array = npt.NDArray[np.float64]

FINAL_NORM = "final_norm"


def readout_norm(view: ModelView, stack: str = "main") -> NormView | None:
    """The norm that puts hidden vectors of a stack where the unembedding reads them:
    ``ModelView.readout_norm`` for the main stack, the decoder's final norm (the view's
    ``final_norm``) for the decoder stack of an encoder-decoder."""
    return view.final_norm if stack == "decoder" else view.readout_norm


def decoder_inputs(view: ModelView, input_ids: torch.Tensor) -> torch.Tensor:
    """The teacher-forced decoder input of a text: the start token, then ``input_ids[..., :-1]``
    (Hugging Face's shift of the labels), [..., T] -> [..., T]."""
    first = torch.full_like(input_ids[..., :1], view.decoder_start())
    return torch.cat([first, input_ids[..., :-1]], dim=-1)


def seq2seq_forward(
    view: ModelView, input_ids: torch.Tensor, decoder_input_ids: torch.Tensor, **flags: Any
) -> Any:
    """One forward pass of an encoder-decoder through the top-level Hugging Face API.

    Args:
        view: an encoder-decoder.
        input_ids: [B, T] the encoder's input.
        decoder_input_ids: [B, T'] the decoder's input.
        **flags: e.g. ``output_hidden_states=True``, ``output_attentions=True``.

    Returns:
        The model's output (``encoder_hidden_states``, ``decoder_hidden_states``,
        ``decoder_attentions``, ``cross_attentions``, ``logits``, ... as requested).
    """
    with torch.inference_mode():
        return view.model(
            input_ids=input_ids.to(view.device),
            decoder_input_ids=decoder_input_ids.to(view.device),
            use_cache=False,
            **flags,
        )


def _decoder_hidden(view: ModelView, input_ids: torch.Tensor) -> list[torch.Tensor]:
    """The decoder's hidden-state layers 0..L_dec of one text read teacher-forced: [T, d] each.

    Hugging Face's last ``decoder_hidden_states`` entry is already through the final norm, so
    the last block's raw output is taken from the input of that norm (the view's
    ``final_norm``); a decoder without one (BART's) returns its last block's output as is.
    """
    decoder = decoder_inputs(view, input_ids)[None]
    if view.final_norm is None:
        out = seq2seq_forward(view, input_ids[None], decoder, output_hidden_states=True)
        return [h[0] for h in out.decoder_hidden_states]
    with recording_inputs({"final_norm": view.final_norm.module}) as raw:
        out = seq2seq_forward(view, input_ids[None], decoder, output_hidden_states=True)
    return [h[0] for h in out.decoder_hidden_states[:-1]] + [raw["final_norm"][0]]


def layer_stack(
    view: ModelView, input_ids: torch.Tensor, stack: str = "main"
) -> tuple[torch.Tensor, tuple[str, ...]]:
    """The hidden vectors of one text at every layer, plus the final-norm layer.

    Args:
        view: the model.
        input_ids: [T] token ids.
        stack: "main" (the view's blocks; the encoder of an encoder-decoder) or "decoder"
            (an encoder-decoder's decoder, reading ``decoder_inputs`` of the text while its
            cross-attention reads the encoder's output of the text).

    Returns:
        hidden [n, T, d] float32 (n = L + 2 with a final norm, else L + 1) and the layer
        names ("0".."L", then "final_norm" where there is one).
    """
    if stack == "decoder":
        record = dict(enumerate(h[None] for h in _decoder_hidden(view, input_ids)))
    else:
        record = hidden_states(view, input_ids[None], list(range(view.n_layers + 1)))
    L = len(record) - 1
    layers = [record[l][0].float().cpu() for l in range(L + 1)]
    names = [str(l) for l in range(L + 1)]
    norm = readout_norm(view, stack)
    if norm is not None:
        with torch.inference_mode():
            last = norm(record[L].to(view.W_E.dtype))[0].float().cpu()
        layers.append(last)
        names.append(FINAL_NORM)
    return torch.stack(layers), tuple(names)


@dataclass(frozen=True)
class SimilarityMaps:
    """T x T similarity matrices of one text at every layer.

    Attributes:
        layer_names: n names ("0".."L", "final_norm").
        dot: [n, T, T] float32 inner products h_i . h_j.
        cos: [n, T, T] float32 cosine similarities.
        mean_cos: [n] mean cosine over pairs i != j.
        mean_cos_skip_first: [n] the same over pairs of positions >= 1 (position 0 carries
            a massive activation in some models, e.g. SmolLM2).
        mean_cos_adjacent: [n] mean cos(h_t, h_{t+1}).
        section_contrast: [n] mean cosine within sections minus across sections (pairs of
            positions >= 1, i != j), or None without sections.
        mean_norm: [n] mean |h_t|.
    """

    layer_names: tuple[str, ...]
    dot: npt.NDArray[np.float32]
    cos: npt.NDArray[np.float32]
    mean_cos: Array
    mean_cos_skip_first: Array
    mean_cos_adjacent: Array
    section_contrast: Array | None
    mean_norm: Array

    def to_dict(self) -> dict[str, Any]:
        """Per-layer summary numbers (the matrices go to similarity.safetensors)."""
        rows = []
        for i, name in enumerate(self.layer_names):
            row: dict[str, Any] = {
                "layer": name,
                "mean_cos": sig(self.mean_cos[i]),
                "mean_cos_skip_first": sig(self.mean_cos_skip_first[i]),
                "mean_cos_adjacent": sig(self.mean_cos_adjacent[i]),
                "mean_norm": sig(self.mean_norm[i]),
            }
            if self.section_contrast is not None:
                row["section_contrast"] = sig(self.section_contrast[i])
            rows.append(row)
        return {"n_positions": int(self.dot.shape[1]), "layers": rows}


def similarity_maps(
    hidden: torch.Tensor,
    layer_names: tuple[str, ...],
    sections: npt.NDArray[np.integer] | None = None,
) -> SimilarityMaps:
    """Inner products and cosines between all positions, per layer (computed in float64).

    Args:
        hidden: [n, T, d] hidden vectors (``layer_stack``).
        layer_names: n names.
        sections: [T] section index of each position (e.g. the blocks of a few-shot
            prompt), or None.

    Returns:
        The maps and per-layer summaries.
    """
    h = hidden.double()
    dot = h @ h.transpose(-1, -2)
    norms = h.norm(dim=-1)
    cos = dot / (norms[:, :, None] * norms[:, None, :]).clamp(min=1e-30)
    T = h.shape[1]
    off = ~torch.eye(T, dtype=torch.bool)
    later = off.clone()
    later[0, :] = False
    later[:, 0] = False
    contrast = None
    if sections is not None:
        s = torch.as_tensor(np.asarray(sections))
        same = (s[:, None] == s[None, :]) & later
        across = (s[:, None] != s[None, :]) & later
        if same.any() and across.any():
            contrast = (cos[:, same].mean(-1) - cos[:, across].mean(-1)).numpy()
    return SimilarityMaps(
        layer_names=tuple(layer_names),
        dot=dot.float().numpy(),
        cos=cos.float().numpy(),
        mean_cos=cos[:, off].mean(-1).numpy(),
        mean_cos_skip_first=cos[:, later].mean(-1).numpy(),
        mean_cos_adjacent=torch.diagonal(cos, offset=1, dim1=1, dim2=2).mean(-1).numpy(),
        section_contrast=contrast,
        mean_norm=norms.mean(-1).numpy(),
    )
