"""Tiny random models of any transformers text model type (2 layers, hidden 32), built in
memory: the reach table (``models.reach``) loads each one to learn the type's tier, and the
hidden-state tier's tests read them.

``tiny_config`` starts from ``SMALL``, fits the fields a type's default config has that
``SMALL`` does not set (the head width, the key/value heads, special token ids beyond the
small vocabulary, a ``text_config``), then applies the type's own overrides (``TYPES``).
"""

from __future__ import annotations

from typing import Any

SMALL: dict[str, Any] = dict(
    hidden_size=32,
    intermediate_size=48,
    num_hidden_layers=2,
    num_attention_heads=4,
    vocab_size=96,
    max_position_embeddings=512,
)
"""The sizes every tiny model has (4 heads of width 8)."""

FITTED: dict[str, Any] = dict(
    head_dim=8,
    num_key_value_heads=2,
    num_experts=4,
    num_local_experts=4,
    n_routed_experts=4,
    num_experts_per_tok=2,
    moe_intermediate_size=16,
    n_group=1,
    topk_group=1,
)
"""Sizes set where the type's default config has the field (its default is a large
model's; a mixture of experts keeps 4 experts, 2 per token)."""

SPECIAL_TOKENS = {"pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2}
"""Token ids moved into the small vocabulary where the default lies beyond it."""

MLA: dict[str, Any] = dict(
    num_key_value_heads=4,
    kv_lora_rank=16,
    q_lora_rank=16,
    qk_rope_head_dim=8,
    qk_nope_head_dim=8,
    v_head_dim=8,
    moe_intermediate_size=16,
    n_routed_experts=4,
    num_experts_per_tok=2,
    first_k_dense_replace=1,
    n_group=1,
    topk_group=1,
)
"""Multi-head latent attention (DeepSeek V2/V3) at the tiny sizes."""

MAMBA: dict[str, Any] = dict(
    mamba_d_state=8, mamba_n_heads=4, mamba_n_groups=1, mamba_chunk_size=16
)
"""A state-space mixer at the tiny sizes."""

TYPES: dict[str, dict[str, Any]] = {
    **dict.fromkeys(
        (
            "deepseek_v2",
            "deepseek_v3",
            "deepseek_v32",
            "glm4_moe_lite",
            "glm_moe_dsa",
            "longcat_flash",
            "minicpm3",
            "sarvam_mla",
            "youtu",
        ),
        MLA,
    ),
    "falcon_h1": dict(num_key_value_heads=2, mamba_d_head=8, mamba_d_ssm=32, **MAMBA),
    "lfm2": dict(num_key_value_heads=2, layer_types=["conv", "full_attention"], block_ff_dim=48),
    "granitemoehybrid": dict(
        num_key_value_heads=2,
        layer_types=["mamba", "attention"],
        mamba_d_head=16,
        num_local_experts=2,
        num_experts_per_tok=1,
        shared_intermediate_size=16,
        **MAMBA,
    ),
    "qwen3_next": dict(
        num_key_value_heads=2,
        layer_types=["linear_attention", "full_attention"],
        linear_num_value_heads=4,
        linear_num_key_heads=2,
        linear_key_head_dim=8,
        linear_value_head_dim=8,
        head_dim=8,
        num_experts=2,
        num_experts_per_tok=1,
        moe_intermediate_size=16,
        shared_expert_intermediate_size=16,
    ),
    # latent attention beside a linear attention (its heads at the tiny width)
    **dict.fromkeys(
        ("bailing_hybrid", "kimi_linear"),
        dict(MLA, linear_head_dim=8, linear_num_heads=4, head_dim=8),
    ),
    **dict.fromkeys(("axk1", "axk2"), dict(MLA, index_head_dim=8, index_n_heads=2, head_dim=8)),
    "neomme": dict(head_dim=16),
    "bamba": dict(num_key_value_heads=2, mamba_d_head=16, attn_layer_indices=[1], **MAMBA),
    "mamba2": dict(num_heads=4, head_dim=16, n_groups=1, state_size=8, chunk_size=16),
    "jamba": dict(
        num_key_value_heads=2,
        attn_layer_period=2,
        attn_layer_offset=1,
        expert_layer_period=2,
        expert_layer_offset=1,
        mamba_dt_rank=8,
        mamba_d_state=8,
    ),
    "esmc": dict(num_key_value_heads=4),
    "lfm2_moe": dict(
        num_key_value_heads=2, layer_types=["conv", "full_attention"], num_dense_layers=1
    ),
    "dots1": dict(
        num_local_experts=4,
        n_routed_experts=4,
        n_shared_experts=1,
        num_experts_per_tok=2,
        first_k_dense_replace=1,
    ),
    "recurrent_gemma": dict(block_types=["recurrent", "attention"], num_key_value_heads=4),
    # its shared attention block is tied across its hybrid layers: two of them
    "zamba": dict(num_hidden_layers=3, layers_block_type=["mamba", "hybrid", "hybrid"]),
    "kolibri1_1": dict(
        head_dim=16,
        layer_types=["sliding_attention", "indexed_attention"],
        index_layers=[1],
        kv_source_layers=[0, 1],
        mlp_only_layers=[0],
        index_num_heads=1,
    ),
    "qwen4_exp_text": dict(
        indexer_n_heads=2,
        indexer_kv_heads=1,
        indexer_head_dim=8,
        indexer_budget=8,
        indexer_compress_ratio=2,
    ),
    "gemma3n_text": dict(
        num_kv_shared_layers=0, hidden_size_per_layer_input=8, vocab_size_per_layer_input=96
    ),
    "esm": dict(pad_token_id=0, mask_token_id=4),
    "zaya": dict(num_experts_per_tok=1),
    # sizes its config derives from others (None: left out)
    "funnel": dict(
        block_sizes=[1, 1],
        block_repeats=[1, 1],
        d_head=8,
        n_head=4,
        num_hidden_layers=None,
        architectures=["FunnelModel"],
    ),
    "xlnet": dict(max_position_embeddings=None, d_head=8, n_head=4),
    "prophetnet": dict(num_hidden_layers=None, num_encoder_layers=2, num_decoder_layers=2),
    "squeezebert": dict(embedding_size=32),
    "reformer": dict(is_decoder=True, axial_pos_shape=[16, 32], axial_pos_embds_dim=[16, 16]),
}
"""Per-type overrides a type needs at the tiny sizes (from the type's config class: its
own constraints between widths, heads and layer patterns)."""

PROBE_VOCAB = (3, SMALL["vocab_size"])
"""The range of the token ids a tiny model is run on (past the usual special ids)."""


def fitted(model_type: str, sizes: dict[str, Any]) -> dict[str, Any]:
    """``sizes`` plus the fields of ``FITTED`` and ``SPECIAL_TOKENS`` that the type's default
    config has (unchanged where its default cannot be made)."""
    from transformers import CONFIG_MAPPING

    out = dict(sizes)
    try:
        default = CONFIG_MAPPING[model_type]()
    except Exception:  # a config that needs arguments: the sizes as given
        return out
    for key, value in FITTED.items():
        # a head width left None is computed from sizes the tiny model changes: set it
        present = (
            hasattr(default, key) or None if key == "head_dim" else getattr(default, key, None)
        )
        if key not in out and present is not None:
            out[key] = value
    out.update(per_layer(default, out))
    vocab = out.get("vocab_size", SMALL["vocab_size"])
    for key, small in SPECIAL_TOKENS.items():
        value = getattr(default, key, None)
        if key not in out and isinstance(value, int) and value >= vocab:
            out[key] = small
    out.update(other_vocabularies(default, out, vocab))
    return out


def other_vocabularies(default: Any, sizes: dict[str, Any], vocab: int) -> dict[str, int]:
    """Sizes of the token table other than ``vocab_size`` (``SAME_TABLE``: Inkling 2's
    ``unpadded_vocab_size``, the rows its checkpoints keep) whose default is larger than the
    tiny vocabulary: set to it, or transformers pads or cuts the embedding by a negative
    number of rows when it saves. Tables of other ids (LUKE's entities) keep their size:
    a declared layout refuses them changed."""
    return {
        key: vocab
        for key in SAME_TABLE
        if key not in sizes
        and isinstance(getattr(default, key, None), int)
        and getattr(default, key) > vocab
    }


SAME_TABLE = ("unpadded_vocab_size",)
"""Config fields that count rows of the token table itself, beside ``vocab_size``."""


PER_LAYER_LIMIT = 4
"""The most layers a tiny model gets to show every kind of layer its default config has."""


def per_layer(default: Any, sizes: dict[str, Any]) -> dict[str, Any]:
    """The default config's per-layer lists (``layer_types``, ``mlp_layer_types``, ...: one
    entry per layer) cut to the tiny model's layers, keeping one layer of each kind the
    lists name together (so a hybrid keeps an attention layer), with the layer count that
    holds them: a list shorter than the layers fails transformers' own checks."""
    layers = getattr(default, "num_hidden_layers", None)
    if not isinstance(layers, int):
        return {}
    try:
        values = default.to_dict()
    except Exception:  # a config that cannot list itself: nothing fitted
        return {}
    lists = {k: v for k, v in values.items() if isinstance(v, list) and len(v) == layers > 1}
    if not lists or any(k in sizes and k not in SMALL for k in lists):  # chosen by its entry
        return {}
    want = int(sizes.get("num_hidden_layers", SMALL["num_hidden_layers"]))
    kinds: dict[str, int] = {}
    for i in range(layers):
        kinds.setdefault(repr([v[i] for v in lists.values()]), i)
    keep = sorted(kinds.values())[:PER_LAYER_LIMIT]
    keep += [i for i in range(layers) if i not in keep][: max(0, want - len(keep))]
    keep.sort()
    cut = {k: [sizes[k] if k in SMALL else v[i] for i in keep] for k, v in lists.items()}
    return {"num_hidden_layers": len(keep), **cut}


def tiny_config(model_type: str, **overrides: Any) -> Any:
    """The config of a tiny ``model_type`` (``SMALL``, fitted, the type's ``TYPES`` entry,
    then ``overrides``; a size given as None is left out); a ``text_config`` gets the same
    sizes."""
    from transformers import CONFIG_MAPPING

    sizes = fitted(model_type, {**SMALL, **TYPES.get(model_type, {}), **overrides})
    sizes = {k: v for k, v in sizes.items() if v is not None}
    subs = getattr(CONFIG_MAPPING[model_type], "sub_configs", {}) or {}
    if "text_config" in subs and "text_config" not in sizes:
        text_type = getattr(subs["text_config"], "model_type", "") or ""
        text = {k: v for k, v in sizes.items() if k in SMALL or k in FITTED}
        sizes["text_config"] = fitted(text_type, text) if text_type in CONFIG_MAPPING else text
    return CONFIG_MAPPING[model_type](**sizes)


def tiny_model(model_type: str, kind: str | None = None, **overrides: Any) -> Any:
    """A tiny random model of ``model_type`` (seeded: the same weights every time), in eval
    mode without gradients, of the Auto class ``kind`` ("causal-lm", "base", ...; by default
    the one Hugging Face loads an undeclared type with)."""
    import torch

    from geomlens.models.loading import auto_class, fallback_auto_class

    config = tiny_config(model_type, **overrides)
    torch.manual_seed(0)
    model = auto_class(kind or fallback_auto_class(config)).from_config(config)
    return model.eval().requires_grad_(False)


def probe(length: int = 5) -> Any:
    """[1, length] seeded token ids within the tiny vocabulary."""
    import torch

    generator = torch.Generator().manual_seed(0)
    return torch.randint(*PROBE_VOCAB, (1, length), generator=generator)
