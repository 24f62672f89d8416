"""What a family adapter declares, the check that refuses unhandled options, and the one
builder that turns a declaration plus a loaded Hugging Face model into a ``ModelView``.

A family is data first: dotted paths from the model to its modules (base, embedding,
blocks, norms, attention, MLP, final norm, head), its block layout, norm kind and position
scheme. What cannot be a path (how a fused QKV splits into heads, the attention scale,
which layers slide) is a small function of the adapter. No other package names an HF
module or branches on a family.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import torch
from torch import nn

from geomlens.models.families.rope import (
    default_rope_only,
    known_rope,
    module_rotary,
    rope_types,
)
from geomlens.models.view import (
    AttentionView,
    BlockView,
    FactorisedEmbedding,
    HeadWeights,
    Layout,
    MlpView,
    ModelView,
    NormKind,
    NormView,
    PositionKind,
    PositionScheme,
    Rotary,
    get_path,
    identity_norm,
    linear_in_out,
    norm_view,
)

# A config option's check: returns None when handled, else what the mapping supports.
OptionCheck = Callable[[Any], str | None]


def one_of(*allowed: Any) -> OptionCheck:
    """Accept only the listed values of an option."""

    def check(value: Any) -> str | None:
        return None if value in allowed else "handled: " + ", ".join(repr(a) for a in allowed)

    return check


def falsy(value: Any) -> str | None:
    """Accept an option only when it is off (None, False, 0, empty)."""
    return None if not value else "handled: off"


def truthy(value: Any) -> str | None:
    """Accept an option only when it is on."""
    return None if value else "handled: on"


ROTARY_OPTIONS: dict[str, OptionCheck] = {
    "rope_parameters": known_rope,
    "rope_scaling": known_rope,
}
"""The options every Llama-like rotary family checks: a rope type transformers implements
(the frequencies are read from the model's own rotary module). Dropout is not an option to
check: geomlens runs every model in evaluation mode, where it does nothing."""


GENERIC_OPTIONS: frozenset[str] = frozenset(
    [
        # what the checkpoint is and how it was saved or trained
        "_name_or_path",
        "architectures",
        "transformers_version",
        "model_type",
        "dtype",
        "torch_dtype",
        "_attn_implementation_autoset",
        "use_cache",
        "return_dict",
        "output_hidden_states",
        "output_attentions",
        "torchscript",
        "tokenizer_class",
        "prefix",
        "finetuning_task",
        "task_specific_params",
        "problem_type",
        "id2label",
        "label2id",
        "num_labels",
        "chunk_size_feed_forward_default",
        "bos_token_id",
        "eos_token_id",
        "pad_token_id",
        "sep_token_id",
        "cls_token_id",
        "mask_token_id",
        "unk_token_id",
        "decoder_start_token_id",
        "forced_bos_token_id",
        "forced_eos_token_id",
        "initializer_range",
        "initializer_factor",
        "init_std",
        "initializer_cutoff_factor",
        "output_router_logits",
        "router_aux_loss_coef",
        "router_z_loss_coef",
        "router_jitter_noise",
        "tie_word_embeddings",
        "is_encoder_decoder",
        "gradient_checkpointing",
        # sizes and epsilons: read from the modules and weights (the on-load check runs them)
        "vocab_size",
        "hidden_size",
        "intermediate_size",
        "num_hidden_layers",
        "num_attention_heads",
        "num_key_value_heads",
        "head_dim",
        "max_position_embeddings",
        "n_embd",
        "n_layer",
        "n_head",
        "n_positions",
        "n_ctx",
        "n_inner",
        "d_model",
        "d_ff",
        "d_kv",
        "dim",
        "hidden_dim",
        "n_heads",
        "n_layers",
        "num_layers",
        "num_heads",
        "ffn_dim",
        "ffn_hidden_size",
        "num_kv_heads",
        "attention_heads",
        "encoder_layers",
        "decoder_layers",
        "encoder_attention_heads",
        "decoder_attention_heads",
        "encoder_ffn_dim",
        "decoder_ffn_dim",
        "num_decoder_layers",
        "type_vocab_size",
        "rms_norm_eps",
        "layer_norm_eps",
        "layer_norm_epsilon",
        "norm_eps",
        "norm_epsilon",
        # the activation's name: read by the MLP view, checked against transformers' table
        "hidden_act",
        "hidden_activation",
        "activation_function",
        "activation",
        "dense_act_fn",
        # heads geomlens does not load (classification, sequence summary, pooling)
        "classifier_dropout",
        "classifier_dropout_prob",
        "classifier_activation",
        "classifier_bias",
        "classifier_pooling",
        "summary_type",
        "summary_use_proj",
        "summary_activation",
        "summary_proj_to_labels",
        "summary_first_dropout",
        "summary_last_dropout",
        "seq_classif_dropout",
        "qa_dropout",
        "sparse_prediction",
        "sparse_pred_ignore_index",
        "decoder_bias",
    ]
)
"""Config options every family handles whatever their value: metadata, token ids,
initialisation and training-only settings, sizes and epsilons (read from the loaded modules,
which the on-load check runs), activation names (checked against transformers' table) and
heads geomlens never loads. Dropout options are handled too (``is_dropout``): every model
runs in evaluation mode."""


def is_dropout(option: str) -> bool:
    """Dropout and layer-drop rates: nothing in evaluation mode."""
    return "dropout" in option or option.endswith(("_pdrop", "layerdrop"))


_DEFAULTS: dict[type, Any] = {}


def class_default(config: Any) -> Any:
    """A default instance of the config's class (None when the class needs arguments)."""
    cls = type(config)
    if cls not in _DEFAULTS:
        try:
            _DEFAULTS[cls] = cls()
        except Exception:  # a class that cannot be built without arguments
            _DEFAULTS[cls] = None
    return _DEFAULTS[cls]


def differing_options(config: Any) -> dict[str, Any]:
    """The config's options whose value differs from its class default (penzai's check):
    option -> value. Sub-configs (``text_config``) are compared as a whole; keys the class
    does not define (leftovers of older checkpoints' config.json, which transformers keeps
    but its modules never read) are not options."""
    default = class_default(config)
    if default is None:
        return {}
    missing = object()
    out = {}
    for key, value in config.to_dict().items():
        if key.startswith("_") and key != "_name_or_path":
            continue
        mine = getattr(config, key, value)
        theirs = getattr(default, key, missing)
        if theirs is missing:  # not an option of this class: its modules never read it
            continue
        if hasattr(mine, "to_dict") or hasattr(theirs, "to_dict"):
            mine = mine.to_dict() if hasattr(mine, "to_dict") else mine
            theirs = theirs.to_dict() if hasattr(theirs, "to_dict") else theirs
        try:
            same = bool(mine == theirs)
        except Exception:  # values that do not compare (tensors)
            same = False
        if not same:
            out[key] = mine
    return out


@dataclass(frozen=True)
class Dims:
    """Sizes read from a config (standard attribute names, which HF maps for every family)."""

    n_layers: int
    d_model: int
    n_heads: int
    n_kv_heads: int
    d_head: int
    n_ctx: int | None


def standard_dims(config: Any) -> Dims:
    n_heads = config.num_attention_heads
    d = config.hidden_size
    return Dims(
        n_layers=config.num_hidden_layers,
        d_model=d,
        n_heads=n_heads,
        n_kv_heads=getattr(config, "num_key_value_heads", None) or n_heads,
        d_head=getattr(config, "head_dim", None) or d // n_heads,
        n_ctx=getattr(config, "max_position_embeddings", None),
    )


@dataclass(frozen=True)
class AttentionSettings:
    """Per-layer attention facts an adapter may set (defaults: scaled by 1/sqrt(d_head)).

    ``rotary`` replaces the rotary read from the model's rotary module; ``rope=False``
    says this layer does not rotate (SmolLM3's NoPE layers). ``query_scale``, ``chunk`` and
    ``sinks``: a per-position query temperature, chunked attention and per-head sink logits
    (see ``AttentionView``)."""

    scale: float | None = None
    window: int | None = None
    softcap: float | None = None
    rotary: Rotary | None = None
    rope: bool = True
    qk_norm: Callable[[Any, Any], tuple[Any, Any]] | None = None
    bias_fn: Callable[[int], Any] | None = None
    query_scale: Callable[[int], Any] | None = None
    chunk: int | None = None
    sinks: Any = None


def no_settings(config: Any, dims: Dims, index: int, attention: Any) -> AttentionSettings:
    return AttentionSettings()


@dataclass(frozen=True)
class Family:
    """One model family: which configs it takes and where its modules are.

    Paths are dotted attribute paths. ``base`` is relative to the loaded model (the first
    candidate that exists; the model itself when it is already the base), ``embed``,
    ``pos_embed``, ``embedding_norm``, ``layers`` and ``final_norm`` to the base, ``lm_head``
    to the model, and every block path to the block.

    Attributes:
        name: the family name shown to users.
        model_types: the ``model_type`` values of the Hugging Face configs it handles.
        options: config attribute -> check of its value; every option that fails is listed
            in one error.
        handles: the config options this mapping handles at any value, besides
            ``options`` and ``GENERIC_OPTIONS``. An option whose value differs from its
            config class's default and that none of these declares is refused by name (an
            allowlist: a checkpoint's new option is never silently ignored).
        auto_class: "causal-lm", "seq2seq-lm" or "base" (which Auto class loads it).
        features: what the adapter handles beyond the basics, in words (``geomlens models
            --families``).
        heads: (attention module, dims) -> per-head weights.
        mlp_view: (MLP module, config, block) -> the MLP's weights; the MLP module's first
            input is the MLP's input.
        sites: (value input, output projection) paths under the attention module.
        norm_mlp: the MLP's norm; None when the block shares ``norm_attn`` (GPT-J).
        layout, norm_kind, norm_offset (Gemma's ``1 + w``), position: see ``ModelView``.
        norm_eps: the epsilon of norm modules that fix it in their code (OLMo's).
        pos_offset: rows of the learned position table before position 0 (OPT: 2).
        embedding_norm, token_type, embedding_projection: what the model adds before block 0
            besides tokens, positions and the scale (paths from the base): a norm of the
            embedding sum; a token-type table whose row 0 every token receives (BERT); a
            linear map from a narrower embedding to the model's width, after the norm
            (ALBERT, ELECTRA-small). The on-load check compares the view's block-0 input
            with the model's.
        settings: (config, dims, block index, attention module) -> scale, window, soft-cap,
            rotary, q/k norm and score bias of that block.
        rotary_module: for rotary families, the path (from the base) of the model's rotary
            embedding module, whose frequencies every block uses (``rope.module_rotary``).
        rotary_interleaved: pairs (2m, 2m+1) rotate together (GPT-J, Cohere).
        rope_layer: (config, block index, attention module) -> the layer type whose rotary
            set the block uses, for modules that keep one per type (Gemma 3), else None.
        residual_scale: config -> the factor sub-block outputs are multiplied by before
            they join the residual (Granite's ``residual_multiplier``).
        checks: more option checks that need several config values at once.
        finish: (model, config) -> more ``ModelView`` fields (embedding scale, soft-capping).
        variant: config -> declarations that depend on the config (e.g. GPT-NeoX's
            ``use_parallel_residual`` picks ``layout="parallel"`` or ``"pre"``; Falcon's new
            architecture other norm paths); they replace this family's fields before building.
        builder: a builder replacing the generic one (encoder-decoders).
    """

    name: str
    model_types: tuple[str, ...]
    auto_class: str
    features: tuple[str, ...] = ()
    options: Mapping[str, OptionCheck] = field(default_factory=dict)
    handles: frozenset[str] = frozenset()
    heads: Callable[[Any, Dims], HeadWeights] | None = None
    mlp_view: Callable[[Any, Any, Any], MlpView] | None = None
    base: tuple[str, ...] = ("model",)
    embed: str = "embed_tokens"
    pos_embed: str | None = None
    pos_offset: int = 0
    embedding_norm: str | None = None
    token_type: str | None = None
    embedding_projection: str | None = None
    layers: str = "layers"
    final_norm: str | None = "norm"
    lm_head: str | None = "lm_head"
    attention: str = "self_attn"
    sites: tuple[str, str] = ("v_proj", "o_proj")
    norm_attn: str = "input_layernorm"
    norm_mlp: str | None = "post_attention_layernorm"
    extra_norms: Mapping[str, str] = field(default_factory=dict)
    mlp: str = "mlp"
    layout: Layout = "pre"
    norm_kind: NormKind = "rmsnorm"
    norm_offset: float = 0.0
    norm_eps: float | None = None
    position: PositionKind = "rotary"
    is_encoder: bool = False
    dims: Callable[[Any], Dims] = standard_dims
    rotary_module: str | None = "rotary_emb"
    rotary_interleaved: bool = False
    rope_layer: Callable[[Any, int, Any], str | None] | None = None
    settings: Callable[[Any, Dims, int, Any], AttentionSettings] = no_settings
    residual_scale: Callable[[Any], float] | None = None
    checks: Callable[[Any], list[str]] | None = None
    finish: Callable[[Any, Any], dict[str, Any]] | None = None
    variant: Callable[[Any], dict[str, Any]] | None = None
    builder: Callable[[Any, Any, str, str], ModelView] | None = None

    def unhandled(self, config: Any) -> list[str]:
        """Every config option this mapping does not handle, as readable strings."""
        problems = []
        for option, check in self.options.items():
            if not hasattr(config, option):
                continue
            value = getattr(config, option)
            why = check(value)
            if why is not None:
                problems.append(f"{option}={value!r} ({why})")
        if self.checks is not None:
            problems += self.checks(config)
        for option, value in differing_options(config).items():
            declared = option in self.options or option in self.handles
            if not (declared or option in GENERIC_OPTIONS or is_dropout(option)):
                shown = repr(value) if len(repr(value)) <= 60 else repr(value)[:57] + "..."
                problems.append(f"{option}={shown} (not declared by the mapping)")
        return problems

    def describe(self) -> dict[str, Any]:
        """What ``geomlens models --families`` shows of this family."""
        by_config = self.variant is not None
        return {
            "family": self.name,
            "model_types": list(self.model_types),
            "position": self.position,
            "layout": f"{self.layout} (or by config)" if by_config else self.layout,
            "norm": self.norm_kind + (" (gain 1 + w)" if self.norm_offset else ""),
            "rope_types": list(self.rope_types()),
            "features": list(self.features),
        }

    def rope_types(self) -> tuple[str, ...]:
        """The rope types this family loads: every type transformers implements for a
        rotary module that computes its frequencies, "default" for a fixed table, none
        without rotary positions."""
        if self.position != "rotary":
            return ()
        checks = [self.options.get(k) for k in ("rope_parameters", "rope_scaling")]
        if any(c is default_rope_only for c in checks) or not any(checks):
            return ("default",)
        return rope_types()

    def build(self, model: Any, tokenizer: Any, name: str, source: str) -> ModelView:
        """The ``ModelView`` of a loaded model of this family."""
        if self.builder is not None:
            return self.builder(model, tokenizer, name, source)
        return build_view(self, model, tokenizer, name, source)


def find_base(model: Any, candidates: tuple[str, ...]) -> Any:
    """The base model under one of ``candidates``, or the model itself when it is the base."""
    for path in candidates:
        try:
            return get_path(model, path)
        except AttributeError:
            continue
    return model


def make_norm(family: Family, module: Any, size: int) -> NormView:
    """The family's norm at ``module`` (``nn.Identity`` where a layout leaves one out)."""
    if isinstance(module, nn.Identity):
        return identity_norm(module, size)
    return norm_view(
        module, family.norm_kind, offset=family.norm_offset, default_eps=family.norm_eps
    )


def block_rotary(
    family: Family, config: Any, index: int, attention: Any, source: Any
) -> Rotary | None:
    """The rotary of one block, read from the model's rotary module ``source``."""
    if source is None:
        return None
    layer_type = None if family.rope_layer is None else family.rope_layer(config, index, attention)
    return module_rotary(source, config, layer_type, family.rotary_interleaved)


def attention_view(
    family: Family, config: Any, dims: Dims, index: int, attention: Any, source: Any = None
) -> AttentionView:
    """The block's ``AttentionView`` from the family's paths and per-layer settings;
    ``source``: the model's rotary module (rotary families)."""
    s = family.settings(config, dims, index, attention)
    rotary = s.rotary
    if rotary is None and s.rope and family.position == "rotary":
        rotary = block_rotary(family, config, index, attention, source)
    if not s.rope:
        rotary = None
    heads = family.heads
    assert heads is not None, f"family {family.name} declares no heads function"
    return AttentionView(
        module=attention,
        value_in=get_path(attention, family.sites[0]),
        output=get_path(attention, family.sites[1]),
        heads_fn=lambda: heads(attention, dims),
        scale=dims.d_head**-0.5 if s.scale is None else s.scale,
        causal=not family.is_encoder,
        window=s.window,
        softcap=s.softcap,
        rotary=rotary,
        qk_norm=s.qk_norm,
        bias_fn=s.bias_fn,
        query_scale=s.query_scale,
        chunk=s.chunk,
        sinks=s.sinks,
    )


def block_view(
    family: Family, config: Any, dims: Dims, index: int, layer: nn.Module, source: Any = None
) -> BlockView:
    attention = get_path(layer, family.attention)
    norm_attn = make_norm(family, get_path(layer, family.norm_attn), dims.d_model)
    norm_mlp = (
        norm_attn
        if family.norm_mlp is None
        else make_norm(family, get_path(layer, family.norm_mlp), dims.d_model)
    )
    mlp_module = get_path(layer, family.mlp)
    mlp_view = family.mlp_view
    assert mlp_view is not None, f"family {family.name} declares no MLP function"
    return BlockView(
        index=index,
        module=layer,
        attention=attention,
        norm_attn=norm_attn,
        norm_mlp=norm_mlp,
        layout=family.layout,
        residual_scale=1.0 if family.residual_scale is None else family.residual_scale(config),
        attn=attention_view(family, config, dims, index, attention, source),
        mlp_fn=lambda: mlp_view(mlp_module, config, layer),
        extra_norms={
            k: make_norm(family, get_path(layer, p), dims.d_model)
            for k, p in family.extra_norms.items()
        },
    )


def build_view(family: Family, model: Any, tokenizer: Any, name: str, source: str) -> ModelView:
    """The generic builder: follow the family's paths, read its settings per block."""
    config = model.config
    if family.variant is not None:
        family = replace(family, **family.variant(config))
    dims = family.dims(config)
    base = find_base(model, family.base)
    layers = get_path(base, family.layers)
    rotary = rotary_source(family, base)
    blocks = tuple(
        block_view(family, config, dims, i, layer, rotary) for i, layer in enumerate(layers)
    )
    W_E = get_path(base, family.embed).weight.detach()
    head = None if family.lm_head is None else getattr(model, family.lm_head, None)
    b_U = None if head is None or getattr(head, "bias", None) is None else head.bias.detach()
    W_pos = None
    if family.pos_embed is not None:
        W_pos = get_path(base, family.pos_embed).weight.detach()[family.pos_offset :]
    final = (
        None
        if family.final_norm is None
        else make_norm(family, get_path(base, family.final_norm), dims.d_model)
    )
    emb_norm = family.embedding_norm
    fields: dict[str, Any] = dict(
        name=name,
        family=family.name,
        model=model,
        tokenizer=tokenizer,
        base=base,
        config=config,
        n_layers=len(blocks),
        d_model=dims.d_model,
        n_heads=dims.n_heads,
        n_kv_heads=dims.n_kv_heads,
        d_head=dims.d_head,
        n_ctx=dims.n_ctx,
        W_E=W_E,
        W_pos=W_pos,
        b_U=b_U,
        final_norm=final,
        embedding_norm=None
        if emb_norm is None
        else make_norm(family, get_path(base, emb_norm), dims.d_model),
        blocks=blocks,
        position=position_scheme(family, blocks),
        is_encoder=family.is_encoder,
        source=source,
    )
    if family.finish is not None:
        fields.update(family.finish(model, config))
    if head is not None:
        fields.setdefault("W_U", head.weight.detach().T)
    elif family.embedding_projection is None:  # no head: the tied token table, as stored
        fields.setdefault("W_U", fields["W_E"].T)
    fields.update(embedding_fields(family, base, fields))
    if "W_U" not in fields:  # a factorised embedding without a head: its token vectors
        fields["W_U"] = fields["W_E"].T
    return ModelView(**fields)


def embedding_fields(family: Family, base: Any, fields: dict[str, Any]) -> dict[str, Any]:
    """The view's embedding fields with everything the family declares before block 0
    folded in: token type 0's row joins ``W_E`` (divided by the scale, which multiplies
    ``W_E`` on input); a projected embedding becomes a ``FactorisedEmbedding`` whose
    position-free output is ``W_E``.

    The readout is not changed: a tied head (BERT's masked-LM decoder) reads the token
    table as stored, without the token type; a factorised embedding has no [d, vocab]
    table in the model, so an encoder without a head reads with its ``W_E^T``."""
    scale = float(fields.get("embedding_scale", 1.0))
    token_type = None
    if family.token_type is not None:
        token_type = get_path(base, family.token_type).weight.detach()[0]
    if family.embedding_projection is None:
        if token_type is None:
            return {}
        return {"W_E": fields["W_E"] + token_type / scale}
    project = get_path(base, family.embedding_projection)
    factorised = FactorisedEmbedding(
        tokens=fields["W_E"],
        scale=scale,
        positions=fields["W_pos"],
        token_type=token_type,
        norm=fields["embedding_norm"],
        W=linear_in_out(project),
        b=None if project.bias is None else project.bias.detach(),
    )
    with torch.no_grad():
        tokens = factorised(torch.arange(fields["W_E"].shape[0], device=fields["W_E"].device))
    return {
        "W_E": tokens.clone(),
        "W_pos": None,
        "embedding_norm": None,
        "embedding_scale": 1.0,
        "factorised": factorised,
    }


def rotary_source(family: Family, base: Any) -> Any:
    """The model's rotary embedding module (None for other position schemes)."""
    if family.position != "rotary" or family.rotary_module is None:
        return None
    return get_path(base, family.rotary_module)


def position_scheme(family: Family, blocks: tuple[BlockView, ...]) -> PositionScheme:
    """The model's position scheme, with the rotary settings of the first global rotating
    block (sliding-window blocks may rotate with another base; each block's own is its
    ``attn``)."""
    rotating = [b for b in blocks if b.attn.rotary is not None]
    full = [b for b in rotating if b.attn.window is None] or rotating
    rotary = full[0].attn.rotary if full else None
    if rotary is None:
        return PositionScheme(kind=family.position)
    return PositionScheme(
        kind=family.position,
        rope_theta=rotary.theta,
        rotary_dim=rotary.dim,
        rope_type=rotary.rope_type,
    )


def with_options(family: Family, **changes: Any) -> Family:
    """A copy of ``family`` with some declarations changed (for families that are close)."""
    return replace(family, **changes)


__all__ = [
    "AttentionSettings",
    "Dims",
    "Family",
    "NormView",
    "OptionCheck",
    "build_view",
    "known_rope",
    "falsy",
    "one_of",
    "truthy",
]
