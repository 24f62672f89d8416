"""The hidden-state tier: any transformers text model that no declared family takes.

A model type no family declares (and no declared layout reproduces) is loaded with Hugging
Face's own Auto class and viewed as far as its hidden states allow:

- the token table (``get_input_embeddings``) as ``W_E``, and block 0's exact input, read by
  a hook on the first block (``ModelView.input_fn``);
- every layer's residual stream, read by hooks on the blocks (the list of modules the
  hidden states pass through, found by matching them with ``output_hidden_states``);
- the final norm, where a module of the model turns the last block's output into Hugging
  Face's last hidden state and a LayerNorm or RMSNorm construction reproduces it (else the
  sphere radii are not known);
- the readout: ``get_output_embeddings``, else the token table (tied), with the constant
  factor some models put on their logits (Falcon-H1's, Granite's) read from the logits.

Each block says why its mixing is not modelled (``BlockView.mixing``); the analyses that
read attention weights report those layers "not applicable". The on-load check
(``check_hidden_view``) compares the view's hidden states, read as the capture reads them,
with Hugging Face's ``output_hidden_states``: they must be equal.
"""

from __future__ import annotations

import inspect
import re
import time
from collections.abc import Callable
from contextlib import ExitStack, suppress
from dataclasses import dataclass, replace
from typing import Any

import torch
from torch import nn

from geomlens.errors import GeomlensError
from geomlens.models.threads import own_thread
from geomlens.models.view import (
    AttentionView,
    BlockView,
    ModelView,
    NormKind,
    NormView,
    PositionScheme,
    Tier,
    identity_norm,
)

TIER: Tier = "hidden-state"
PROBE = 12
"""Tokens of the probe that finds the blocks and the final norm, and of the on-load check."""

FINAL_NORM_NAMES = (
    "norm",
    "final_layernorm",
    "final_layer_norm",
    "ln_f",
    "norm_f",
    "final_norm",
    "embedding_norm",
    "layer_norm",
    "LayerNorm",
)
"""Module names a final norm has in transformers' models (LFM2 calls its ``embedding_norm``);
tried first, then any other child of the stack; each is kept only if it reproduces the last
hidden state."""

MIXERS: tuple[tuple[tuple[str, ...], str], ...] = (
    (("mamba", "ssm", "mixer"), "a state-space scan"),
    (("gateddelta", "linear_attn", "linearattention", "deltanet"), "a linear attention"),
    (("shortconv", "conv"), "a short convolution"),
    (("rwkv", "recurrent", "rglru", "xlstm", "mlstm", "slstm"), "a recurrence"),
    (("kv_a_proj", "kv_b_proj", "latent"), "multi-head latent attention"),
    (("disentangled", "rel_embeddings", "pos_key_proj", "pos_proj"), "disentangled attention"),
    (("diff", "lambda_q"), "differential attention"),
)
"""Words in a block's module names or classes -> how that block mixes tokens."""


class HiddenStatesUnreadable(GeomlensError):
    """Even the hidden states of this model cannot be read (no per-layer hidden states, or
    no list of blocks they pass through): the model is refused."""


def mixing_of(block: nn.Module, model_type: str) -> str:
    """How ``block`` mixes tokens, in words that follow "layer 3 ...": "mixes tokens by a
    state-space scan, not a bilinear softmax attention" (read from its modules' names and
    classes)."""
    words = " ".join(f"{n} {type(m).__name__}" for n, m in block.named_modules()).lower()
    found = [what for keys, what in MIXERS if any(k in words for k in keys)]
    attention = any(
        re.fullmatch(r"(self_)?att(n|ention)", name) for name, _ in block.named_children()
    )
    if found and found[0] in ("multi-head latent attention", "disentangled attention"):
        return f"mixes tokens by {found[0]}, not a bilinear softmax attention"
    if found and attention:
        return f"mixes tokens by {found[0]} beside its attention, not by a softmax attention alone"
    if found:
        return f"mixes tokens by {found[0]}, not a bilinear softmax attention"
    return (
        f"mixes tokens by {model_type}'s attention, which no declared family describes, so "
        "its weights are not read"
    )


def forward_kwargs(base: nn.Module) -> dict[str, Any]:
    """``use_cache=False`` where the forward takes it: no cache is built (xLSTM's tiny
    model cannot build its cache)."""
    params = inspect.signature(base.forward).parameters
    loose = any(p.kind is p.VAR_KEYWORD for p in params.values())
    return {"use_cache": False} if "use_cache" in params or loose else {}


def _first(value: Any) -> torch.Tensor | None:
    if isinstance(value, torch.Tensor):
        return value
    if isinstance(value, (tuple, list)) and value and isinstance(value[0], torch.Tensor):
        return value[0]
    return None


def _input_of(args: tuple, kwargs: dict) -> torch.Tensor | None:
    if args and isinstance(args[0], torch.Tensor):
        return args[0]
    value = kwargs.get("hidden_states")
    return value if isinstance(value, torch.Tensor) else None


@dataclass
class _Pass:
    """One probe pass: Hugging Face's hidden states, and what each candidate list's modules
    received (the first) and returned."""

    hidden: tuple[torch.Tensor, ...]
    logits: torch.Tensor | None
    first_in: dict[str, torch.Tensor]
    outputs: dict[str, list[torch.Tensor | None]]


def _probe(model: nn.Module, base: nn.Module, ids: torch.Tensor, lists: dict[str, Any]) -> _Pass:
    first_in: dict[str, torch.Tensor] = {}
    outputs: dict[str, list[torch.Tensor | None]] = {k: [None] * len(v) for k, v in lists.items()}
    with ExitStack() as stack, torch.inference_mode():
        for key, modules in lists.items():

            def pre(mod: Any, args: tuple, kwargs: dict, key: str = key) -> None:
                x = _input_of(args, kwargs)
                if x is not None and key not in first_in:
                    first_in[key] = x.detach()

            stack.callback(
                modules[0].register_forward_pre_hook(own_thread(pre), with_kwargs=True).remove
            )
            for i, module in enumerate(modules):

                def post(mod: Any, args: Any, out: Any, key: str = key, i: int = i) -> None:
                    y = _first(out)
                    outputs[key][i] = None if y is None else y.detach()

                stack.callback(module.register_forward_hook(own_thread(post)).remove)
        out = model(input_ids=ids, output_hidden_states=True, **forward_kwargs(model))
    hidden = getattr(out, "hidden_states", None)
    if hidden is None:
        hidden = getattr(out, "encoder_hidden_states", None)
    if not hidden:
        raise HiddenStatesUnreadable(
            f"{type(model).__name__} returns no hidden states (output_hidden_states), so not "
            "even its residual stream can be read"
        )
    return _Pass(tuple(h.detach() for h in hidden), getattr(out, "logits", None), first_in, outputs)


def _same(a: torch.Tensor | None, b: torch.Tensor) -> bool:
    return a is not None and a.shape == b.shape and torch.equal(a, b)


def _norm_kind_and_view(module: nn.Module, x: torch.Tensor, y: torch.Tensor) -> NormView | None:
    """The LayerNorm or RMSNorm construction (gain w or 1 + w) that turns ``x`` into ``y``
    as ``module`` does, or None when none does."""
    from geomlens.models.check import TOLERANCE, construction
    from geomlens.models.view import norm_view

    tol = TOLERANCE.get(x.dtype, 1e-2)
    kinds: tuple[NormKind, ...] = ("rmsnorm", "layernorm")
    for kind in kinds:
        for offset in (0.0, 1.0):
            try:
                view = norm_view(module, kind, offset=offset, default_eps=1e-6)
            except (AttributeError, TypeError, ValueError):
                return None
            if view.weight.shape[-1] != x.shape[-1]:
                return None
            built = construction(view, x)
            err = float((built - y.double()).abs().max() / max(1.0, float(y.abs().max())))
            if err <= tol:
                return view
    return None


def _final_norm(
    base: nn.Module, blocks: list[nn.Module], last: torch.Tensor, hidden_last: torch.Tensor
) -> tuple[NormView | None, bool]:
    """The final norm (None where none is found) and whether the model applies one to its
    last hidden state (True with no norm found: the radii are not known)."""
    if torch.equal(last, hidden_last):
        return None, False
    inside = {id(m) for b in blocks for m in b.modules()}
    for module in _final_norm_candidates(base, blocks[0]):
        if id(module) in inside or isinstance(module, (nn.ModuleList, nn.Embedding)):
            continue
        try:
            with torch.inference_mode():
                y = module(last)
        except Exception:  # a module of another signature: not the final norm
            continue
        if isinstance(y, torch.Tensor) and _same(y, hidden_last):
            return _norm_kind_and_view(module, last, y), True
    return None, True


def _final_norm_candidates(base: nn.Module, first: nn.Module) -> list[nn.Module]:
    """The modules that may be the final norm: the children of ``base`` and of every module
    between it and the list of blocks (Megatron-BERT keeps its final LayerNorm beside the
    blocks in its encoder, Fuyu in its language model), ``FINAL_NORM_NAMES`` first."""
    path = next((name for name, m in base.named_modules() if m is first), "")
    parts = path.split(".")[:-1]
    holders = [base]
    for i in range(1, len(parts)):  # the modules above the block list, outermost first
        holder = base.get_submodule(".".join(parts[:i]))
        if not isinstance(holder, nn.ModuleList):
            holders.append(holder)
    found: list[nn.Module] = []
    for holder in holders:
        children = dict(holder.named_children())
        ordered = [n for n in FINAL_NORM_NAMES if n in children]
        ordered += [n for n in children if n not in FINAL_NORM_NAMES]
        found += [children[n] for n in ordered if all(children[n] is not m for m in found)]
    return found


def _readout(model: nn.Module, table: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``W_U`` [d, vocab] and ``b_U`` from the output embedding, else the token table."""
    head = None
    with suppress(AttributeError, NotImplementedError):
        head = model.get_output_embeddings()  # type: ignore[operator]
    weight = getattr(head, "weight", None)
    if isinstance(weight, torch.Tensor) and weight.dim() == 2 and weight.shape[1] == table.shape[1]:
        bias = getattr(head, "bias", None)
        return weight.detach().T, None if bias is None else bias.detach()
    return table.T, None


def _head_transform(
    model: nn.Module, base: nn.Module, ids: torch.Tensor, hidden_last: torch.Tensor
) -> nn.Module | None:
    """The LM head's module that turns the last hidden state into what the output
    embedding reads (a BERT-style dense, activation and norm; ModernBERT-decoder's
    ``lm_head``), found by hooks; None where the output embedding reads the last hidden
    state itself (or there is no output embedding)."""
    head = None
    with suppress(AttributeError, NotImplementedError):
        head = model.get_output_embeddings()  # type: ignore[operator]
    if not isinstance(head, nn.Module):
        return None
    inside = {id(m) for m in base.modules()} | {id(m) for m in head.modules()}
    candidates = [m for m in model.modules() if id(m) not in inside and m is not model]
    read: list[torch.Tensor] = []
    seen: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}
    with ExitStack() as stack, torch.inference_mode():

        def pre(mod: Any, args: tuple) -> None:
            if args and isinstance(args[0], torch.Tensor) and not read:
                read.append(args[0].detach())

        stack.callback(head.register_forward_pre_hook(pre).remove)
        for module in candidates:

            def post(mod: Any, args: tuple, out: Any) -> None:
                y = _first(out)
                if args and isinstance(args[0], torch.Tensor) and y is not None:
                    seen.setdefault(id(mod), (args[0].detach(), y.detach()))

            stack.callback(module.register_forward_hook(post).remove)
        model(input_ids=ids, **forward_kwargs(model))
    if not read or _same(read[0], hidden_last):
        return None
    for module in candidates:
        pair = seen.get(id(module))
        if pair is not None and _same(pair[0], hidden_last) and _same(pair[1], read[0]):
            return module
    return None


def _softcap(config: Any) -> float | None:
    """The final logit soft-capping ``c * tanh(logits / c)`` the config declares, or None."""
    for name in ("final_logit_softcapping", "logits_soft_cap", "output_logit_soft_cap"):
        value = getattr(config, name, None)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
            return float(value)
    return None


def _attends_forward(model: nn.Module, ids: torch.Tensor) -> bool:
    """Whether a position reads later tokens: position 0's hidden state at some layer
    moves, by more than the dtype's rounding, when only the last token changes (an
    encoder's attention, ERNIE's; a mixture of experts regroups its tokens, which moves
    a decoder's position 0 by rounding only)."""
    from geomlens.models.check import TOLERANCE

    changed = ids.clone()
    changed[0, -1] = (int(ids[0, -1]) + 1) % max(int(ids.max()) + 2, 2)
    hidden, other = (_probe(model, model, x, {}).hidden for x in (ids, changed))
    tol = TOLERANCE.get(hidden[0].dtype, 1e-2)
    return any(
        float((a[:, 0].double() - b[:, 0].double()).abs().max())
        > tol * max(1.0, float(a[:, 0].abs().max()))
        for a, b in zip(hidden, other, strict=False)
    )


def _logit_scale(
    view_logits: torch.Tensor, logits: torch.Tensor | None, softcap: float | None = None
) -> float:
    """The constant factor between Hugging Face's logits (before their soft-capping
    ``softcap``) and the plain readout (1 where the two agree or no constant relates them)."""
    if logits is None or logits.shape != view_logits.shape:
        return 1.0
    if softcap is not None:
        logits = softcap * torch.atanh((logits.double() / softcap).clamp(-1 + 1e-12, 1 - 1e-12))
    a, b = view_logits.double().flatten(), logits.double().flatten()
    denominator = float(a @ a)
    if denominator == 0:
        return 1.0
    scale = float(a @ b) / denominator
    if abs(scale - 1.0) < 1e-6:  # equal up to rounding: no factor
        return 1.0
    return (
        scale if torch.allclose(a * scale, b, rtol=1e-4, atol=1e-4 * float(b.abs().max())) else 1.0
    )


def _closing_norm(
    model: nn.Module, block: nn.Module, ids: torch.Tensor, output: torch.Tensor
) -> NormView | None:
    """The norm whose output is ``block``'s output (a post-norm block's last LayerNorm,
    DeBERTa's), as a LayerNorm or RMSNorm construction, or None."""
    norms = {n: m for n, m in block.named_modules() if n and "norm" in type(m).__name__.lower()}
    seen: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}
    with ExitStack() as stack, torch.inference_mode():
        for name, module in norms.items():

            def keep(mod: Any, args: tuple, out: Any, name: str = name) -> None:
                y = _first(out)
                if args and isinstance(args[0], torch.Tensor) and y is not None:
                    seen[name] = (args[0].detach(), y.detach())

            stack.callback(module.register_forward_hook(own_thread(keep)).remove)
        model(input_ids=ids, **forward_kwargs(model))
    for name, (x, y) in seen.items():
        if _same(y, output):
            return _norm_kind_and_view(norms[name], x, y)
    return None


def _not_read(why: str) -> Callable[[], Any]:
    def refuse() -> Any:
        raise GeomlensError(f"not applicable: {why}.")

    return refuse


def _block(
    index: int,
    module: nn.Module,
    width: int,
    causal: bool,
    why: str,
    closing: NormView | None = None,
) -> BlockView:
    """A block of the hidden-state tier: its module (whose output is the residual stream);
    its norms, attention and MLP placeholders that say why they are not read. ``closing``:
    the norm that writes its output (a post-norm block), kept as ``norm_mlp``."""
    norm = identity_norm(nn.Identity(), width)
    attn = AttentionView(
        module=module,
        value_in=module,
        output=module,
        heads_fn=_not_read(f"layer {index} {why}"),
        scale=1.0,
        causal=causal,
    )
    return BlockView(
        index=index,
        module=module,
        attention=module,
        norm_attn=norm,
        norm_mlp=norm if closing is None else closing,
        layout="pre" if closing is None else "post",
        attn=attn,
        mlp_fn=_not_read(f"layer {index} {why}"),
        mixing=why,
    )


def _size(config: Any, name: str) -> int:
    """A whole-model size from the config (0 where absent, or where it varies by layer and
    transformers refuses to give one value)."""
    try:
        value = getattr(config, name, 0)
    except Exception:  # a per-layer attribute of a heterogeneous config
        return 0
    return int(value) if isinstance(value, int) else 0


def _block_lists(base: nn.Module, n_layers: int) -> dict[str, nn.ModuleList]:
    return {
        name: module
        for name, module in base.named_modules()
        if isinstance(module, nn.ModuleList) and len(module) == n_layers and n_layers > 0
    }


def _probe_ids(vocab: int, pad: Any, tokens: int = PROBE) -> torch.Tensor:
    g = torch.Generator().manual_seed(20240)
    ids = torch.randint(0, vocab, (1, tokens), generator=g)
    if isinstance(pad, int) and vocab > 1:
        ids[ids == pad] = (pad + 1) % vocab
    return ids


def _input_reader(base: nn.Module, first: nn.Module) -> Callable[[torch.Tensor], torch.Tensor]:
    """ids [..., T] -> [..., T, d]: what ``first`` (block 0) receives, by a hook on it; the
    pass stops there."""

    class _Stop(Exception):
        pass

    def read(ids: torch.Tensor) -> torch.Tensor:
        shape = ids.shape
        flat = ids.reshape(-1, shape[-1])
        kept: list[torch.Tensor] = []

        def pre(mod: Any, args: tuple, kwargs: dict) -> None:
            x = _input_of(args, kwargs)
            assert x is not None
            kept.append(x.detach())
            raise _Stop

        handle = first.register_forward_pre_hook(own_thread(pre), with_kwargs=True)
        try:
            with torch.inference_mode(), suppress(_Stop):
                base(input_ids=flat, **forward_kwargs(base))
        finally:
            handle.remove()
        x = kept[0]
        if x.numel() != flat.numel() * x.shape[-1]:
            raise HiddenStatesUnreadable(
                f"block 0 receives {list(x.shape)} for {list(flat.shape)} tokens, not one "
                "vector per token (several residual streams), so its residual stream cannot "
                "be read as one vector per token"
            )
        return x.reshape(*shape, x.shape[-1])

    return read


def numbered(run: _Pass, key: str) -> tuple[torch.Tensor, ...]:
    """Hugging Face's hidden states in geomlens's numbering (0: block 0's input, i: block
    i - 1's output, the last through the final norm). Mamba's and RWKV's list their first
    block's output first and leave the embedding out: theirs are shifted by one, with the
    embedding read by the hook on block 0."""
    hidden, outs, entry = run.hidden, run.outputs.get(key, []), run.first_in.get(key)
    n = len(hidden) - 1
    shifted = (
        entry is not None
        and n > 1
        and len(outs) == n
        and not _same(entry, hidden[0])
        and all(_same(outs[i], hidden[i]) for i in range(n))
    )
    return (entry, *hidden[: n - 1], hidden[n]) if shifted and entry is not None else hidden


class HiddenRelay(nn.Module):
    """Stands in for block i where no module of the model returns the hidden states block
    by block (Longformer pads its blocks' input to its attention window, CPM-Ant prepends
    prompt tokens): called after each forward pass of the base with Hugging Face's hidden
    states i and i + 1, so that the capture's hooks read them as block i's input and
    output (``relayed``)."""

    def forward(self, before: torch.Tensor, after: torch.Tensor) -> torch.Tensor:
        return after


def relayed(base: nn.Module, n_layers: int) -> list[nn.Module]:
    """One ``HiddenRelay`` per block, called by hooks on ``base`` that ask every forward
    pass for ``output_hidden_states`` and hand its hidden states to the relays."""
    relays: list[nn.Module] = [HiddenRelay() for _ in range(n_layers)]
    names = list(inspect.signature(base.forward).parameters)
    at = names.index("output_hidden_states") if "output_hidden_states" in names else len(names)

    def ask(module: Any, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
        if len(args) > at:  # passed by position (CPM-Ant's head does)
            return (*args[:at], True, *args[at + 1 :]), kwargs
        return args, {**kwargs, "output_hidden_states": True}

    def relay(module: Any, args: tuple, kwargs: dict, out: Any) -> None:
        hidden = getattr(out, "hidden_states", None)
        if hidden is None or len(hidden) != n_layers + 1:
            return
        for i, block in enumerate(relays):
            block(hidden[i], hidden[i + 1])

    base.register_forward_pre_hook(ask, with_kwargs=True)
    base.register_forward_hook(relay, with_kwargs=True)
    return relays


def _find_blocks(
    model: nn.Module, base: nn.Module, ids: torch.Tensor
) -> tuple[list[nn.Module], _Pass, torch.Tensor]:
    """The modules whose outputs are the hidden states block by block, the probe pass that
    found them (its hidden states in geomlens's numbering, ``numbered``) and the last
    block's output [1, T, d]: a list of the model's modules where one returns them, else
    relays of Hugging Face's own ``output_hidden_states`` (``relayed``) where those give
    one vector per token per layer.

    Raises:
        HiddenStatesUnreadable: when neither does.
    """
    first = _probe(model, base, ids, {})
    n_layers = len(first.hidden) - 1
    lists = _block_lists(base, n_layers)
    run = _probe(model, base, ids, lists)
    for key, modules in lists.items():
        outs = run.outputs[key]
        hidden = numbered(run, key)
        inner = all(_same(outs[i], hidden[i + 1]) for i in range(n_layers - 1))
        entry = run.first_in.get(key)
        last = outs[-1]
        if inner and entry is not None and _same(entry, hidden[0]) and last is not None:
            return list(modules), replace(run, hidden=hidden), last
    per_token = all(h.shape == first.hidden[0].shape for h in first.hidden)
    if n_layers > 0 and per_token and first.hidden[0].shape[:2] == ids.shape:
        relays = relayed(base, n_layers)
        run = _probe(model, base, ids, {"relays": nn.ModuleList(relays)})
        last = run.outputs["relays"][-1]
        if last is not None:
            return relays, run, last
    raise HiddenStatesUnreadable(
        f"neither a list of {type(model).__name__}'s modules nor its output_hidden_states "
        "give one vector per token per layer, so its residual stream cannot be read layer "
        "by layer"
    )


def _readout_of(
    model: nn.Module,
    base: nn.Module,
    ids: torch.Tensor,
    run: _Pass,
    readout: torch.Tensor,
    table: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor | None, nn.Module | None, float | None, float]:
    """``W_U``, ``b_U``, the head's own transform, the final soft-cap and the constant
    factor on the logits, from the last block's output through the final norm
    (``readout``) and the probe pass ``run``.

    Raises:
        HiddenStatesUnreadable: when ``W_U`` does not read vectors of the readout's width.
    """
    W_U, b_U = _readout(model, table)
    transform = _head_transform(model, base, ids, run.hidden[-1])
    if transform is not None:
        with torch.inference_mode():
            readout = transform(readout)
    if readout.shape[-1] != W_U.shape[0]:
        raise HiddenStatesUnreadable(
            f"{type(model).__name__}'s readout ({list(W_U.shape)}) does not read its hidden "
            f"states of width {readout.shape[-1]}"
        )
    plain = readout.to(W_U.dtype) @ W_U + (0 if b_U is None else b_U)
    softcap = _softcap(model.config)
    return W_U, b_U, transform, softcap, _logit_scale(plain, run.logits, softcap)


def build_hidden_view(
    model: nn.Module, tokenizer: Any, name: str, source: str, is_encoder: bool
) -> ModelView:
    """The hidden-state view of a loaded model (see the module docstring).

    Raises:
        HiddenStatesUnreadable: when the model returns no hidden states, or no list of its
            modules returns them layer by layer.
    """
    config: Any = model.config
    model_type = str(getattr(config, "model_type", type(model).__name__))
    if getattr(config, "is_encoder_decoder", False):
        raise HiddenStatesUnreadable(
            f"model type {model_type!r} is an encoder-decoder, whose two stacks the "
            "hidden-state tier does not read"
        )
    base: nn.Module = getattr(model, "base_model", model)
    try:
        table = model.get_input_embeddings().weight.detach()  # type: ignore[operator]
    except (AttributeError, NotImplementedError):
        raise HiddenStatesUnreadable(
            f"{type(model).__name__} has no single token embedding table"
        ) from None
    d = int(table.shape[1])
    ids = _probe_ids(int(table.shape[0]), getattr(config, "pad_token_id", None)).to(table.device)
    blocks, run, last = _find_blocks(model, base, ids)
    n_layers = len(blocks)
    final_norm, normed = _final_norm(base, blocks, last, run.hidden[-1])
    closing = None
    if final_norm is None and not normed:  # a post-norm stack: its last block's own norm
        closing = _closing_norm(model, blocks[-1], ids, last)
    W_U, b_U, transform, softcap, scale = _readout_of(
        model, base, ids, run, last if final_norm is None else final_norm(last), table
    )
    is_encoder = is_encoder or _attends_forward(model, ids)
    causal = not is_encoder
    reasons = {i: mixing_of(b, model_type) for i, b in enumerate(blocks)}
    n_heads = _size(config, "num_attention_heads")
    n_kv = _size(config, "num_key_value_heads") or n_heads
    d_head = _size(config, "head_dim") or (d // n_heads if n_heads else 0)
    n_ctx = _size(config, "max_position_embeddings")
    return ModelView(
        name=name,
        family=model_type,
        model=model,
        tokenizer=tokenizer,
        base=base,
        config=config,
        n_layers=n_layers,
        d_model=d,
        n_heads=n_heads,
        n_kv_heads=n_kv,
        d_head=d_head,
        n_ctx=n_ctx or None,
        W_E=table,
        W_pos=None,
        W_U=W_U,
        b_U=b_U,
        unembedding_scale=scale,
        logit_softcap=softcap,
        head_transform=transform,
        final_norm=final_norm,
        blocks=tuple(
            _block(i, b, d, causal, reasons[i], closing if i == n_layers - 1 else None)
            for i, b in enumerate(blocks)
        ),
        position=PositionScheme(kind="not modelled"),
        is_encoder=is_encoder,
        source=source,
        tier=TIER,
        input_fn=_input_reader(base, blocks[0]),
    )


@dataclass(frozen=True)
class HiddenCheck:
    """What the hidden-state tier's on-load check compared.

    Attributes:
        tokens: probe length; blocks: blocks read.
        max_error: quantity -> the largest difference (0 where equal).
        tolerance: 0: the hidden states must be equal.
        seconds: wall time.
        final_norm: whether the final norm was found (the sphere radii are known).
        readout_equal: whether the view's logits (``ModelView.logits`` of the last block's
            output) equal Hugging Face's within the dtype's tolerance (``max_error``'s
            "logits", relative to the largest logit); None where the model gives no logits.
    """

    tokens: int
    blocks: int
    max_error: dict[str, float]
    tolerance: float
    seconds: float
    final_norm: bool
    readout_equal: bool | None = None


def readout_error(view: ModelView, last: torch.Tensor, logits: torch.Tensor) -> float:
    """The largest difference between the view's logits of the last block's output
    ``last`` and Hugging Face's ``logits``, relative to the largest logit (at least 1; inf
    for another shape)."""
    with torch.inference_mode():
        mine = view.logits(last)
    if mine.shape != logits.shape:
        return float("inf")
    scale = max(1.0, float(logits.abs().max()))
    return float((mine.double() - logits.double()).abs().max()) / scale


def check_hidden_view(view: ModelView, tokens: int = 24) -> HiddenCheck:
    """Compare the view's hidden states, read by the capture's hooks (the blocks' outputs,
    block 0's input), with Hugging Face's ``output_hidden_states``; the last layer through
    the final norm where Hugging Face applies it. Block 0's input (``block_input``) is
    compared as well.

    Raises:
        CheckFailed: naming the layer that differs.
    """
    from geomlens.models.check import TOLERANCE, CheckFailed

    start = time.perf_counter()
    ids = _probe_ids(int(view.W_E.shape[0]), getattr(view.config, "pad_token_id", None), tokens)
    ids = ids.to(view.device)
    modules = {str(b.index): b.module for b in view.blocks}
    hooked = nn.ModuleList(list(modules.values()))
    run = _probe(view.model, view.base, ids, {"blocks": hooked})
    ours: list[torch.Tensor | None] = [run.first_in.get("blocks"), *run.outputs["blocks"]]
    worst: dict[str, float] = {"hidden states": 0.0, "block-0 input": 0.0}
    hidden = numbered(run, "blocks")
    for layer, (mine, theirs) in enumerate(zip(ours, hidden, strict=True)):
        if layer == view.n_layers and view.final_norm is not None and mine is not None:
            with torch.inference_mode():
                mine = view.final_norm(mine)
        if layer == view.n_layers and not _same(mine, theirs) and view.final_norm is None:
            continue  # a last hidden state no known norm made: the block output is kept
        if not _same(mine, theirs):
            err = (
                float("inf")
                if mine is None or mine.shape != theirs.shape
                else float((mine.double() - theirs.double()).abs().max())
            )
            raise CheckFailed(
                f"the hidden-state view of {view.name} differs from Hugging Face's hidden "
                f"state at layer {layer} (by {err:.2g}); it cannot be read in the "
                "hidden-state tier.",
                f"layer {layer}",
                "hidden state",
                err,
            )
    with torch.inference_mode():
        x0 = view.block_input(ids)
    if not _same(x0, hidden[0]):
        raise CheckFailed(
            f"block 0's input of {view.name}, read by a hook, differs from Hugging Face's "
            "hidden state 0.",
            "the embedding",
            "block-0 input",
            float("inf"),
        )
    readout_equal = None
    last = run.outputs["blocks"][-1]
    if run.logits is not None and last is not None:
        worst["logits"] = readout_error(view, last, run.logits)
        readout_equal = worst["logits"] <= TOLERANCE.get(view.W_U.dtype, 1e-2)
    return HiddenCheck(
        tokens=int(ids.shape[1]),
        blocks=len(view.blocks),
        max_error=worst,
        tolerance=0.0,
        seconds=time.perf_counter() - start,
        final_norm=view.final_norm is not None,
        readout_equal=readout_equal,
    )
