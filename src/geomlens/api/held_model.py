"""``model=`` a model object: the API functions run a model the user already holds.

The object (a transformers ``PreTrainedModel``, or a wrapper around one) becomes a view
through ``load_model`` with its ``tokenizer=``; the run's config then names the model by
its own name and takes its device and dtype, and the run folder identifies it by its
weights (``models.identity``), so an edited model never reuses the numbers of another.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from geomlens.errors import GeomlensError
from geomlens.models.held import is_held_model
from geomlens.models.view import ModelView


def held_model(
    merged: dict[str, Any], explicit: Mapping[str, Any], where: str = "geomlens"
) -> tuple[dict[str, Any], ModelView | None]:
    """The arguments and view of a call: where ``model`` is a model object, its view
    (``load_model(model, tokenizer=...)``) and ``model``, ``device`` and ``dtype`` set to
    the model's own name, device and dtype (a device or dtype passed that the model does
    not have is refused); else the arguments and ``view`` as given.

    Args:
        merged: every argument of the call, defaults filled (``model``, ``tokenizer``,
            ``view``, ``device``, ``dtype``, ...).
        explicit: the arguments the caller passed.
        where: the function's name, for messages.
    """
    model, view, tokenizer = merged["model"], merged.get("view"), merged.get("tokenizer")
    if is_held_model(model):
        if view is not None:
            raise GeomlensError(f"{where}() takes a model object as model= or a view=, not both.")
        from geomlens.models.loading import load_model

        view = load_model(
            model,
            tokenizer=tokenizer,
            device=explicit.get("device"),
            dtype=explicit.get("dtype"),
        )
    elif tokenizer is not None:
        raise GeomlensError(
            f"{where}(): tokenizer= goes with a model object given as model=; a model named "
            "by a string or path loads its own tokenizer."
        )
    held = getattr(view, "identity", None)
    if view is None or held is None or not held.in_memory:
        return merged, view
    own = {"model": view.name, "device": str(view.device)}
    own["dtype"] = str(view.W_E.dtype).removeprefix("torch.")
    taken = {k: v for k, v in own.items() if k not in explicit}
    if is_held_model(model):
        taken["model"] = view.name
    return {**merged, **taken}, view


@contextmanager
def eager_while(view: ModelView | None) -> Iterator[None]:
    """A model given in memory under eager attention for the block (``walk`` reads attention
    weights), then back to the user's own implementation; any other view as it is."""
    held = getattr(view, "identity", None)
    if view is None or held is None or not held.in_memory:
        yield
        return
    from geomlens.models.check import eager_attention

    with eager_attention(view):
        yield
