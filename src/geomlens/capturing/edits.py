"""Edits of the residual stream while a Hugging Face model runs: the one place geomlens
changes what a forward pass computes (every other hook in ``capturing/hooks.py`` only reads).

An ``Edit`` names hidden-state layers of one stack and what to do to the residual stream
there: project out a subspace, subtract a vector, or set chosen coordinates to values.
Hidden-state layer 0 is the input of block 0 (edited by a pre-hook on block 0); layer
l >= 1 is the output of block l-1 (edited by a forward hook on that block, which returns the
changed output). The blocks after it read the changed stream through the model's own
forward: nothing of the forward is rewritten. ``editing(view, edits)`` puts the hooks on
while open; they run before any other hook on the block, so Hugging Face's own
``output_hidden_states`` records the edited stream. The stack is the view's main one (a
decoder, an encoder, or an encoder-decoder's encoder) or, with ``stack="decoder"``, an
encoder-decoder's decoder.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from typing import Any, Literal

import torch

from geomlens.errors import GeomlensError
from geomlens.models.threads import own_thread
from geomlens.models.view import ModelView

Stack = Literal["main", "decoder"]


class EditError(GeomlensError):
    """An edit that does not fit the model (a layer it lacks, a basis of the wrong size)."""


@dataclass(frozen=True)
class Edit:
    """One change to the residual stream at chosen hidden-state layers.

    Exactly one of ``basis``, ``vector`` and ``coords`` is set:

    - ``basis`` [d, k] orthonormal columns B: ``h <- h - (h B) B^T`` (the part of h in
      span(B) removed; k = 0 changes nothing);
    - ``vector`` [d] v: ``h <- h - v``;
    - ``coords`` (indices i) with ``values`` [len(i)]: ``h[..., i] <- values``.

    Attributes:
        layers: hidden-state layers edited (0 = the input of block 0, l = block l-1's output).
        basis, vector, coords, values: the edit (above).
        positions: the token positions edited (None: every position).
        stack: "main" (the view's ``blocks``) or "decoder" (an encoder-decoder's
            ``decoder_blocks``).
    """

    layers: tuple[int, ...]
    basis: torch.Tensor | None = None
    vector: torch.Tensor | None = None
    coords: tuple[int, ...] = ()
    values: torch.Tensor | None = None
    positions: tuple[int, ...] | None = None
    stack: Stack = "main"

    def __post_init__(self) -> None:
        kinds = (self.basis is not None) + (self.vector is not None) + bool(self.coords)
        if kinds != 1:
            raise EditError("an edit is exactly one of: a basis, a vector, coordinates.")
        if self.coords and (self.values is None or self.values.numel() != len(self.coords)):
            raise EditError("an edit of coordinates needs one value per coordinate.")

    def apply(self, h: torch.Tensor) -> torch.Tensor:
        """The edited stream: [..., T, d] -> [..., T, d], in ``h``'s dtype and device."""
        if self.positions is None:
            return self._edit(h)
        where = list(self.positions)
        out = h.clone()
        out[..., where, :] = self._edit(h[..., where, :])
        return out

    def _edit(self, h: torch.Tensor) -> torch.Tensor:
        if self.basis is not None:
            B = self.basis.to(device=h.device, dtype=h.dtype)
            return h - (h @ B) @ B.T
        if self.vector is not None:
            return h - self.vector.to(device=h.device, dtype=h.dtype)
        assert self.values is not None
        out = h.clone()
        out[..., list(self.coords)] = self.values.to(device=h.device, dtype=h.dtype)
        return out

    def check(self, d_model: int, n_hidden_layers: int) -> None:
        """Refuse, in one sentence, an edit that does not fit a stack of ``n_hidden_layers``
        hidden-state layers of width ``d_model``."""
        bad = [layer for layer in self.layers if not 0 <= layer < n_hidden_layers]
        if bad:
            raise EditError(f"layer {bad[0]} is not one of the stack's 0..{n_hidden_layers - 1}.")
        width = None
        if self.basis is not None:
            width = self.basis.shape[0]
        elif self.vector is not None:
            width = self.vector.shape[-1]
        if width is not None and width != d_model:
            raise EditError(f"the edit is {width} wide; the residual stream is {d_model}.")
        if any(not 0 <= i < d_model for i in self.coords):
            raise EditError(f"a coordinate of the edit is outside 0..{d_model - 1}.")


def project_out(basis: torch.Tensor, layers: Sequence[int], **kw: Any) -> Edit:
    """Remove span(``basis``) [d, k] (orthonormalised here) at ``layers``."""
    q = torch.linalg.qr(basis.double())[0] if basis.shape[1] else basis.double()
    return Edit(tuple(layers), basis=q, **kw)


def subtract(vector: torch.Tensor, layers: Sequence[int], **kw: Any) -> Edit:
    """Subtract ``vector`` [d] at ``layers``."""
    return Edit(tuple(layers), vector=vector, **kw)


def set_coordinates(
    coords: Sequence[int], values: torch.Tensor | float, layers: Sequence[int], **kw: Any
) -> Edit:
    """Set coordinates ``coords`` to ``values`` (one each, or one for all) at ``layers``."""
    vals = torch.as_tensor(values, dtype=torch.float64).reshape(-1)
    if vals.numel() == 1:
        vals = vals.expand(len(coords)).clone()
    return Edit(tuple(layers), coords=tuple(int(i) for i in coords), values=vals, **kw)


def _blocks(view: ModelView, stack: Stack) -> tuple[Any, ...]:
    if stack == "decoder":
        if not view.is_seq2seq:
            raise EditError(f"{view.name} has no decoder stack to edit.")
        return view.decoder_blocks
    return view.blocks


def _replace_first(output: Any, edited: torch.Tensor) -> Any:
    """A block's output with its hidden states replaced (a tensor, or a tuple's first)."""
    if isinstance(output, torch.Tensor):
        return edited
    return (edited, *output[1:])


@contextmanager
def editing(view: ModelView, edits: Sequence[Edit]) -> Iterator[None]:
    """While open, every forward pass of the view's model applies ``edits`` (in order, at
    each edit's layers). The view's lock is held, so another thread's pass waits rather
    than running edited."""
    for edit in edits:
        edit.check(view.d_model, len(_blocks(view, edit.stack)) + 1)
    with view.lock, ExitStack() as stack:
        for edit in edits:
            blocks = _blocks(view, edit.stack)
            for layer in edit.layers:
                if layer == 0:

                    def pre(module: Any, args: tuple, kwargs: dict, edit: Edit = edit) -> Any:
                        if args:
                            return (edit.apply(args[0]), *args[1:]), kwargs
                        return args, {
                            **kwargs,
                            "hidden_states": edit.apply(kwargs["hidden_states"]),
                        }

                    first = blocks[0].module
                    handle = first.register_forward_pre_hook(
                        own_thread(pre), with_kwargs=True, prepend=True
                    )
                else:

                    def post(module: Any, args: Any, output: Any, edit: Edit = edit) -> Any:
                        h = output if isinstance(output, torch.Tensor) else output[0]
                        return _replace_first(output, edit.apply(h))

                    handle = blocks[layer - 1].module.register_forward_hook(
                        own_thread(post), prepend=True
                    )
                stack.callback(handle.remove)
        yield
