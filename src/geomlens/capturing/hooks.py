"""Every hook geomlens puts on a model: read what an unmodified Hugging Face forward pass
computes (hidden states, what named modules receive and return, what attention sees).

Hidden-state layer 0 is the input of block 0 (the embedding output, after any embedding
norm or scale the model applies); layer l is the output of block l-1. The final norm of
decoders is not applied (Hugging Face's last ``hidden_states`` entry has it).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager, suppress
from dataclasses import dataclass
from typing import Any, TypeVar

import torch

from geomlens.models.threads import own_thread
from geomlens.models.view import ModelView

K = TypeVar("K")


class _StopForward(Exception):
    """Raised by a hook once every requested layer is recorded: the rest is not needed."""


def _first_tensor(value: Any) -> torch.Tensor:
    return value if isinstance(value, torch.Tensor) else value[0]


def _first_input(args: tuple, kwargs: dict) -> torch.Tensor:
    """A module's first input: its first positional argument, else ``hidden_states`` (or
    its first keyword argument)."""
    if args:
        return args[0]
    return kwargs["hidden_states"] if "hidden_states" in kwargs else next(iter(kwargs.values()))


@contextmanager
def on_inputs(
    modules: Mapping[K, torch.nn.Module], fn: Callable[[K, torch.Tensor], None]
) -> Iterator[None]:
    """While open, every forward of ``modules[key]`` first calls ``fn(key, input)`` with
    its first input (detached)."""
    with ExitStack() as stack:
        for key, module in modules.items():

            def pre(module: Any, args: tuple, kwargs: dict, key: K = key) -> None:
                fn(key, _first_input(args, kwargs).detach())

            stack.callback(
                module.register_forward_pre_hook(own_thread(pre), with_kwargs=True).remove
            )
        yield


@contextmanager
def on_outputs(
    modules: Mapping[K, torch.nn.Module], fn: Callable[[K, torch.Tensor, torch.Tensor], None]
) -> Iterator[None]:
    """While open, every forward of ``modules[key]`` ends with ``fn(key, input, output)``:
    its first input and its (first) output tensor, detached."""
    with ExitStack() as stack:
        for key, module in modules.items():

            def post(module: Any, args: tuple, kwargs: dict, output: Any, key: K = key) -> None:
                fn(key, _first_input(args, kwargs).detach(), _first_tensor(output).detach())

            stack.callback(module.register_forward_hook(own_thread(post), with_kwargs=True).remove)
        yield


@contextmanager
def on_calls(
    modules: Mapping[K, torch.nn.Module], fn: Callable[[K, tuple, dict, Any], None]
) -> Iterator[None]:
    """While open, every forward of ``modules[key]`` ends with ``fn(key, args, kwargs,
    output)``: the call as the module received it and what it returned, untouched (for
    readers that need a keyword input or a tuple member other than the first)."""
    with ExitStack() as stack:
        for key, module in modules.items():

            def post(module: Any, args: tuple, kwargs: dict, output: Any, key: K = key) -> None:
                fn(key, args, kwargs, output)

            stack.callback(module.register_forward_hook(own_thread(post), with_kwargs=True).remove)
        yield


@contextmanager
def recording_inputs(modules: Mapping[K, torch.nn.Module]) -> Iterator[dict[K, torch.Tensor]]:
    """A dict key -> the first input each module received during the forward passes run
    while open (the last pass's, where a module runs more than once)."""
    record: dict[K, torch.Tensor] = {}
    with on_inputs(modules, record.__setitem__):
        yield record


@dataclass(frozen=True)
class AttentionRecord:
    """What one forward pass fed each block's attention, and what it produced.

    Attributes:
        block_in: [L, B, T, d] the residual stream entering each block.
        x: [L, B, T, d] the value projection's input (the normalised stream for pre-norm).
        out: [L, B, T, d] the output projection's output (before any residual or norm).
        attn: L tensors [B, H, T, T], each block's attention probabilities (not stacked:
            at long T they are the largest thing recorded).
    """

    block_in: torch.Tensor
    x: torch.Tensor
    out: torch.Tensor
    attn: tuple[torch.Tensor, ...]


@contextmanager
def attention_sites(view: ModelView) -> Iterator[dict[str, dict[int, torch.Tensor]]]:
    """Hooks on every block of the view's main stack: "block_in" (the block's input),
    "x" (the value projection's input) and "out" (the output projection's output), each
    block index -> [B, T, d] float32 on the CPU."""
    rec: dict[str, dict[int, torch.Tensor]] = {"block_in": {}, "x": {}, "out": {}}

    def keep(kind: str) -> Callable[[int, torch.Tensor], None]:
        return lambda i, value: rec[kind].__setitem__(i, value.float().cpu())

    blocks = {b.index: b.module for b in view.blocks}
    values = {b.index: b.attn.value_in for b in view.blocks}
    outputs = {b.index: b.attn.output for b in view.blocks}
    keep_out = keep("out")
    with (
        view.lock,
        on_inputs(blocks, keep("block_in")),
        on_inputs(values, keep("x")),
        on_outputs(outputs, lambda i, _, y: keep_out(i, y)),
    ):
        yield rec


def attention_record(
    sites: dict[str, dict[int, torch.Tensor]], attentions: Sequence[torch.Tensor], n_layers: int
) -> AttentionRecord:
    """The ``AttentionRecord`` of one pass: what ``attention_sites`` kept, and the pass's
    attention probabilities (one [B, H, T, T] per block, made float32 on the CPU)."""
    return AttentionRecord(
        block_in=torch.stack([sites["block_in"][i] for i in range(n_layers)]),
        x=torch.stack([sites["x"][i] for i in range(n_layers)]),
        out=torch.stack([sites["out"][i] for i in range(n_layers)]),
        attn=tuple(a.float().cpu() for a in attentions),
    )


@contextmanager
def recording(
    view: ModelView, layers: Sequence[int], stop: bool = True, tokens: int | None = None
) -> Iterator[dict[int, torch.Tensor]]:
    """Hooks that fill a dict layer -> hidden states [B, T, d] during a forward pass, each
    on the view's device (where the accumulators are, whichever device a placed model's
    block ran on); with ``stop`` the pass ends (``_StopForward``) once the last wanted
    layer is recorded. The view's lock is held while open (threads sharing the view take
    turns). ``tokens``: the T of the pass's input; a model that pads its input on the right
    to a multiple of its chunk length (Reformer) runs its blocks on more positions, and
    only the first T, the tokens', are kept."""
    wanted = set(layers)
    last = max(wanted)
    record: dict[int, torch.Tensor] = {}

    def keep(layer: int, h: torch.Tensor) -> None:
        if tokens is not None and h.dim() >= 2 and h.shape[-2] > tokens:
            h = h[..., :tokens, :]  # the model's own right-padding, not a token
        record[layer] = h.detach().to(view.device)  # a placed model's blocks: several devices
        if stop and layer == last:
            raise _StopForward

    with view.lock, ExitStack() as stack:
        if 0 in wanted:

            def pre_hook(module: Any, args: tuple, kwargs: dict) -> None:
                keep(0, _first_input(args, kwargs))

            first = view.blocks[0].module
            handle = first.register_forward_pre_hook(own_thread(pre_hook), with_kwargs=True)
            stack.callback(handle.remove)
        for block in view.blocks:
            layer = block.index + 1
            if layer in wanted:

                def hook(module: Any, args: Any, output: Any, layer: int = layer) -> None:
                    keep(layer, _first_tensor(output))

                stack.callback(block.module.register_forward_hook(own_thread(hook)).remove)
        yield record


def base_kwargs(view: ModelView) -> dict[str, Any]:
    """Keyword arguments that keep the base forward lean (no KV cache) where accepted."""
    params = inspect.signature(view.base.forward).parameters
    accepts_any = any(p.kind is p.VAR_KEYWORD for p in params.values())
    return {"use_cache": False} if "use_cache" in params or accepts_any else {}


def cache_keyword(view: ModelView) -> str:
    """The forward's name for the KV cache: ``cache`` in recent transformers releases,
    ``past_key_values`` in earlier ones (the output field has the same name)."""
    params = inspect.signature(view.base.forward).parameters
    return "cache" if "cache" in params else "past_key_values"


def hidden_states(
    view: ModelView,
    input_ids: torch.Tensor,
    layers: Sequence[int],
    attention_mask: torch.Tensor | None = None,
) -> dict[int, torch.Tensor]:
    """One forward pass of the base model; returns layer -> [B, T, d] for the given layers.

    The pass stops after the last requested block, so early layers cost only their share.
    ``attention_mask`` [B, T] (1 = token, 0 = padding) keeps a bidirectional stack from
    reading right-padding; causal stacks never read it, so they need none.
    """
    kwargs = base_kwargs(view)
    if attention_mask is not None:
        kwargs["attention_mask"] = attention_mask.to(view.device)
    tokens = int(input_ids.shape[-1])
    with (
        torch.inference_mode(),
        recording(view, layers, tokens=tokens) as record,
        suppress(_StopForward),
    ):
        view.base(input_ids=input_ids.to(view.device), **kwargs)
    return record
