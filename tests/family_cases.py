"""The family table: one tiny model configuration per row, built from its config (no
downloads) with the options real checkpoints use. ``tests/models/test_families.py`` checks
each row against Hugging Face's own outputs; other tests build rows from it.

Adding a family: its adapter file, its line in ``models/families/__init__.py``, and one
row here (docs/models.md, "Adding a family").
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
import transformers

from geomlens.models import ModelView
from geomlens.models.families import family_for

VOCAB = 128
SEQ = 9
SMALL: dict[str, Any] = dict(
    vocab_size=VOCAB,
    hidden_size=64,
    intermediate_size=96,
    num_hidden_layers=3,
    num_attention_heads=4,
    max_position_embeddings=64,
)
"""Sizes most configs accept under these names (the others map them per case)."""

TINY_VISION: dict[str, Any] = dict(
    hidden_size=32,
    intermediate_size=48,
    num_hidden_layers=1,
    num_attention_heads=2,
    image_size=28,
    patch_size=14,
)
"""A vision tower of a multimodal wrapper, as small as it builds (text input never runs it)."""


@dataclass(frozen=True)
class Case:
    """One tiny model: its config's model type, options, and which family must take it."""

    id: str
    model_type: str
    family: str
    options: dict[str, Any] = field(default_factory=dict)
    sizes: dict[str, Any] = field(default_factory=lambda: dict(SMALL))

    def config(self) -> Any:
        return transformers.CONFIG_MAPPING[self.model_type](**{**self.sizes, **self.options})


CASES: list[Case] = [
    Case("llama", "llama", "llama", dict(num_key_value_heads=2)),
    Case(
        "gpt2",
        "gpt2",
        "gpt2",
        dict(n_inner=96),
        dict(vocab_size=VOCAB, n_embd=64, n_layer=3, n_head=4, n_positions=64),
    ),
    Case("bert", "bert", "bert", dict(hidden_act="gelu")),
    Case("roberta", "roberta", "roberta", dict(pad_token_id=1)),
    Case("xlm-roberta", "xlm-roberta", "xlm-roberta", dict(pad_token_id=1)),
    Case("camembert", "camembert", "camembert", dict(pad_token_id=1)),
    Case("data2vec-text", "data2vec-text", "data2vec-text", dict(pad_token_id=1)),
    Case(
        "distilbert",
        "distilbert",
        "distilbert",
        dict(hidden_dim=96),
        dict(vocab_size=VOCAB, dim=64, n_layers=3, n_heads=4, max_position_embeddings=64),
    ),
    Case(
        "distilbert-sinusoidal",
        "distilbert",
        "distilbert",
        dict(hidden_dim=96, sinusoidal_pos_embds=True, activation="relu"),
        dict(vocab_size=VOCAB, dim=64, n_layers=3, n_heads=4, max_position_embeddings=64),
    ),
    Case("electra", "electra", "electra", dict(embedding_size=32)),
    Case("electra-unprojected", "electra", "electra", dict(embedding_size=64)),
    Case("albert", "albert", "albert", dict(embedding_size=32)),
    Case(
        "albert-two-groups",
        "albert",
        "albert",
        dict(embedding_size=32, num_hidden_groups=2, num_hidden_layers=4),
    ),
    Case(
        "modernbert",
        "modernbert",
        "modernbert",
        dict(
            layer_types=["full_attention", "sliding_attention", "full_attention"],
            sliding_window=2,
            global_rope_theta=160000.0,
            local_rope_theta=10000.0,
            pad_token_id=0,
            bos_token_id=1,
            eos_token_id=2,
            cls_token_id=1,
            sep_token_id=2,
        ),
    ),
    Case(
        "gemma3",
        "gemma3_text",
        "gemma3",
        dict(
            num_key_value_heads=2,
            head_dim=16,
            query_pre_attn_scalar=24,
            sliding_window=4,
            layer_types=["sliding_attention", "full_attention", "sliding_attention"],
            attn_logit_softcapping=20.0,
            final_logit_softcapping=15.0,
        ),
    ),
    Case("mistral", "mistral", "mistral", dict(num_key_value_heads=2, sliding_window=4)),
    Case(
        "mixtral",
        "mixtral",
        "mixtral",
        dict(num_key_value_heads=2, num_local_experts=4, num_experts_per_tok=2, sliding_window=4),
    ),
    Case(
        "qwen2",
        "qwen2",
        "qwen2",
        dict(num_key_value_heads=2, use_sliding_window=True, sliding_window=4, max_window_layers=1),
    ),
    Case("qwen3", "qwen3", "qwen3", dict(num_key_value_heads=2, head_dim=16)),
    Case("gemma", "gemma", "gemma", dict(num_key_value_heads=1, head_dim=16)),
    Case(
        "gemma2",
        "gemma2",
        "gemma2",
        dict(
            num_key_value_heads=2,
            head_dim=16,
            query_pre_attn_scalar=24,
            sliding_window=4,
            layer_types=["sliding_attention", "full_attention", "sliding_attention"],
            attn_logit_softcapping=5.0,
            final_logit_softcapping=15.0,
        ),
    ),
    Case("olmo2", "olmo2", "olmo2", dict(num_key_value_heads=2)),
    Case(
        "phi3",
        "phi3",
        "phi3",
        dict(num_key_value_heads=2, partial_rotary_factor=0.5, sliding_window=4, pad_token_id=0),
    ),
    Case(
        "gpt_neo",
        "gpt_neo",
        "gpt_neo",
        dict(attention_types=[[["global", "local"], 1], [["local"], 1]], window_size=4),
    ),
    Case("gptj", "gptj", "gptj", dict(rotary_dim=8, n_inner=96)),
    Case("gpt_neox", "gpt_neox", "gpt_neox", dict(rotary_pct=0.5)),
    Case("gpt_neox-sequential", "gpt_neox", "gpt_neox", dict(use_parallel_residual=False)),
    Case(
        "falcon-new",
        "falcon",
        "falcon",
        dict(new_decoder_architecture=True, num_kv_heads=2, ffn_hidden_size=96, bias=True),
    ),
    Case("falcon-7b", "falcon", "falcon", dict(ffn_hidden_size=96)),
    Case(
        "falcon-11b",
        "falcon",
        "falcon",
        dict(
            new_decoder_architecture=True,
            num_kv_heads=1,
            num_ln_in_parallel_attn=1,
            ffn_hidden_size=96,
        ),
    ),
    Case(
        "falcon-sequential",
        "falcon",
        "falcon",
        dict(multi_query=False, parallel_attn=False, ffn_hidden_size=96, bias=True),
    ),
    Case("phi", "phi", "phi", dict(partial_rotary_factor=0.5)),
    # rope scaling as released checkpoints use it (Llama 3.1+, Qwen 2.5 long context,
    # Phi-3.5 / Phi-4-mini, Gemma 3 4B+, dynamic NTK fine-tunes); SEQ is beyond each
    # original context, so LongRoPE runs on its long factors
    Case(
        "llama-llama3",
        "llama",
        "llama",
        dict(
            num_key_value_heads=2,
            rope_parameters=dict(
                rope_type="llama3",
                rope_theta=10000.0,
                factor=8.0,
                low_freq_factor=1.0,
                high_freq_factor=4.0,
                original_max_position_embeddings=8,
            ),
        ),
    ),
    Case(
        "qwen2-yarn",
        "qwen2",
        "qwen2",
        dict(
            num_key_value_heads=2,
            rope_parameters=dict(
                rope_type="yarn", rope_theta=10000.0, factor=4.0, original_max_position_embeddings=8
            ),
        ),
    ),
    Case(
        "phi3-longrope",
        "phi3",
        "phi3",
        dict(
            num_key_value_heads=2,
            partial_rotary_factor=0.5,
            pad_token_id=0,
            original_max_position_embeddings=8,
            rope_parameters=dict(
                rope_type="longrope",
                rope_theta=10000.0,
                short_factor=[1.0, 1.2, 1.5, 2.0],
                long_factor=[1.0, 2.0, 4.0, 8.0],
            ),
        ),
    ),
    Case(
        "gemma3-linear",
        "gemma3_text",
        "gemma3",
        dict(
            num_key_value_heads=2,
            head_dim=16,
            sliding_window=4,
            layer_types=["sliding_attention", "full_attention", "sliding_attention"],
            rope_parameters={
                "full_attention": dict(rope_type="linear", rope_theta=1e6, factor=8.0),
                "sliding_attention": dict(rope_type="default", rope_theta=1e4),
            },
        ),
    ),
    Case(
        "gpt_neox-dynamic",
        "gpt_neox",
        "gpt_neox",
        dict(rotary_pct=0.5, rope_parameters=dict(rope_type="dynamic", factor=2.0)),
    ),
    Case("opt", "opt", "opt", dict(ffn_dim=96)),
    Case(
        "starcoder2",
        "starcoder2",
        "starcoder2",
        dict(num_key_value_heads=2, sliding_window=4, use_bias=True),
    ),
    Case(
        "stablelm",
        "stablelm",
        "stablelm",
        dict(num_key_value_heads=2, partial_rotary_factor=0.25, use_qkv_bias=True),
    ),
    Case(
        "stablelm-qk-parallel",
        "stablelm",
        "stablelm",
        dict(num_key_value_heads=2, qk_layernorm=True, use_parallel_residual=True),
    ),
    Case(
        "granite",
        "granite",
        "granite",
        dict(
            num_key_value_heads=2,
            embedding_multiplier=12.0,
            attention_multiplier=0.05,
            residual_multiplier=0.22,
            logits_scaling=8.0,
        ),
    ),
    Case(
        "granitemoe",
        "granitemoe",
        "granitemoe",
        dict(
            num_key_value_heads=2,
            num_local_experts=4,
            num_experts_per_tok=2,
            embedding_multiplier=12.0,
            attention_multiplier=0.05,
            residual_multiplier=0.22,
            logits_scaling=8.0,
        ),
    ),
    Case("cohere", "cohere", "cohere", dict(num_key_value_heads=2, logit_scale=0.125)),
    Case(
        "cohere-qk-norm",
        "cohere",
        "cohere",
        dict(num_key_value_heads=2, use_qk_norm=True, logit_scale=0.5),
    ),
    Case("olmo", "olmo", "olmo", dict(num_key_value_heads=2)),
    Case(
        "olmo3",
        "olmo3",
        "olmo3",
        dict(
            num_key_value_heads=2,
            sliding_window=4,
            layer_types=["sliding_attention", "sliding_attention", "full_attention"],
        ),
    ),
    Case(
        "qwen2_moe",
        "qwen2_moe",
        "qwen2_moe",
        dict(
            num_key_value_heads=2,
            num_experts=4,
            num_experts_per_tok=2,
            moe_intermediate_size=32,
            shared_expert_intermediate_size=48,
            mlp_only_layers=[1],
            use_sliding_window=True,
            sliding_window=4,
            max_window_layers=2,
        ),
    ),
    Case(
        "qwen3_moe",
        "qwen3_moe",
        "qwen3_moe",
        dict(
            num_key_value_heads=2,
            head_dim=16,
            num_experts=4,
            num_experts_per_tok=2,
            moe_intermediate_size=32,
            norm_topk_prob=True,
        ),
    ),
    Case(
        "smollm3",
        "smollm3",
        "smollm3",
        dict(num_key_value_heads=2, no_rope_layers=[1, 0, 1], pad_token_id=0),
    ),
    Case(
        "nemotron",
        "nemotron",
        "nemotron",
        dict(num_key_value_heads=2, head_dim=16, partial_rotary_factor=0.5),
    ),
    Case("helium", "helium", "helium", dict(num_key_value_heads=2, head_dim=16)),
    # gpt-oss-20b/120b: attention sinks, alternating sliding/full layers, YaRN, biased
    # router over experts with a clamped SwiGLU (the second row clamps often)
    Case(
        "gpt_oss",
        "gpt_oss",
        "gpt_oss",
        dict(
            num_key_value_heads=2,
            head_dim=16,
            intermediate_size=32,
            num_local_experts=4,
            num_experts_per_tok=2,
            sliding_window=4,
            rope_parameters=dict(
                rope_type="yarn",
                rope_theta=150000.0,
                factor=4.0,
                beta_fast=32.0,
                beta_slow=1.0,
                truncate=False,
                original_max_position_embeddings=16,
            ),
        ),
    ),
    Case(
        "gpt_oss-clamped",
        "gpt_oss",
        "gpt_oss",
        dict(
            num_key_value_heads=2,
            head_dim=16,
            intermediate_size=32,
            num_local_experts=4,
            num_experts_per_tok=2,
            sliding_window=4,
            swiglu_limit=0.1,
            layer_types=["full_attention", "sliding_attention", "full_attention"],
        ),
    ),
    # Llama 4 Scout: chunked rotary layers with q/k norms, every fourth layer NoPE with the
    # query temperature (floor_scale small so that a short probe reaches it), MoE in every
    # layer (top-1 sigmoid router, shared expert); Maverick: no q/k norms, MoE every other
    # layer, dense MLPs between
    Case(
        "llama4",
        "llama4_text",
        "llama4",
        dict(
            num_key_value_heads=2,
            head_dim=16,
            intermediate_size=32,
            intermediate_size_mlp=96,
            num_local_experts=4,
            attention_chunk_size=4,
            floor_scale=4,
            rope_parameters=dict(
                rope_type="llama3",
                rope_theta=500000.0,
                factor=16.0,
                low_freq_factor=1.0,
                high_freq_factor=1.0,
                original_max_position_embeddings=16,
            ),
        ),
        {**SMALL, "num_hidden_layers": 4},
    ),
    Case(
        "llama4-maverick",
        "llama4_text",
        "llama4",
        dict(
            num_key_value_heads=2,
            head_dim=16,
            intermediate_size=32,
            intermediate_size_mlp=96,
            num_local_experts=4,
            attention_chunk_size=4,
            use_qk_norm=False,
            interleave_moe_layer_step=2,
        ),
        {**SMALL, "num_hidden_layers": 4},
    ),
    Case(
        "olmoe",
        "olmoe",
        "olmoe",
        dict(num_key_value_heads=2, num_experts=4, num_experts_per_tok=2, norm_topk_prob=True),
    ),
    Case(
        "glm",
        "glm",
        "glm",
        dict(num_key_value_heads=2, head_dim=16, pad_token_id=0),
    ),
    Case(
        "glm4",
        "glm4",
        "glm4",
        dict(num_key_value_heads=2, head_dim=16, pad_token_id=0),
    ),
    Case(
        "gpt_bigcode",
        "gpt_bigcode",
        "gpt_bigcode",
        dict(n_inner=96),
        dict(vocab_size=VOCAB, n_embd=64, n_layer=3, n_head=4, n_positions=64),
    ),
    Case(
        "gpt_bigcode-multi-head",
        "gpt_bigcode",
        "gpt_bigcode",
        dict(n_inner=96, multi_query=False, scale_attn_weights=False),
        dict(vocab_size=VOCAB, n_embd=64, n_layer=3, n_head=4, n_positions=64),
    ),
    Case(
        "codegen",
        "codegen",
        "codegen",
        dict(rotary_dim=8, n_inner=96),
        dict(vocab_size=VOCAB, n_embd=64, n_layer=3, n_head=4, n_positions=64),
    ),
    Case(
        "xglm",
        "xglm",
        "xglm",
        dict(ffn_dim=96),
        dict(vocab_size=VOCAB, d_model=64, num_layers=3, attention_heads=4),
    ),
    Case("bloom", "bloom", "bloom"),
    Case(
        "bloom-6-heads",
        "bloom",
        "bloom",
        sizes=dict(vocab_size=VOCAB, hidden_size=48, num_hidden_layers=2, num_attention_heads=6),
    ),
    # Command R7B / Command A (pattern 4: three rotating sliding layers, then a NoPE full
    # layer), here with pattern 3 for three layers
    Case(
        "cohere2",
        "cohere2",
        "cohere2",
        dict(
            num_key_value_heads=2,
            logit_scale=0.25,
            sliding_window=4,
            sliding_window_pattern=3,
            eos_token_id=2,
        ),
    ),
    Case(
        "cohere2-layer-types",
        "cohere2",
        "cohere2",
        dict(
            num_key_value_heads=2,
            logit_scale=0.125,
            sliding_window=4,
            layer_types=["sliding_attention", "full_attention", "sliding_attention"],
            eos_token_id=2,
        ),
    ),
    # EXAONE 4.0 32B ("LLLG"; here "LLG" for three layers): sliding layers with llama3
    # rope, NoPE global layers
    Case(
        "exaone4",
        "exaone4",
        "exaone4",
        dict(
            num_key_value_heads=2,
            head_dim=16,
            sliding_window=4,
            sliding_window_pattern="LLG",
            layer_types=["sliding_attention", "sliding_attention", "full_attention"],
            rope_parameters=dict(
                rope_type="llama3",
                rope_theta=1000000.0,
                factor=16.0,
                low_freq_factor=1.0,
                high_freq_factor=4.0,
                original_max_position_embeddings=8,
            ),
        ),
    ),
    # EXAONE 4.0 1.2B: no window, every layer full attention and rotating
    Case(
        "exaone4-global",
        "exaone4",
        "exaone4",
        dict(
            num_key_value_heads=2,
            sliding_window=None,
            sliding_window_pattern=None,
            layer_types=["full_attention"] * 3,
        ),
    ),
    # MPT-7B's attention config (ALiBi, no biases); a 6-head row for non-power-of-2 slopes
    Case(
        "mpt",
        "mpt",
        "mpt",
        dict(
            attn_config=dict(
                alibi=True,
                alibi_bias_max=8,
                attn_impl="torch",
                attn_type="multihead_attention",
                clip_qkv=None,
                prefix_lm=False,
                qk_ln=False,
                softmax_scale=None,
            ),
            no_bias=True,
            learned_pos_emb=True,
            norm_type="low_precision_layernorm",
            max_seq_len=512,
        ),
        dict(vocab_size=VOCAB, hidden_size=64, num_hidden_layers=3, num_attention_heads=4),
    ),
    Case(
        "mpt-6-heads",
        "mpt",
        "mpt",
        dict(attn_config=dict(alibi=True, softmax_scale=0.2), max_seq_len=512),
        dict(vocab_size=VOCAB, hidden_size=48, num_hidden_layers=2, num_attention_heads=6),
    ),
    # GLM-4.5's router and layout (sigmoid scores, group-limited top k, shared experts, dense
    # first layers, q/k norms, half-rotary heads); GLM-4.5-Air's without q/k norms
    Case(
        "glm4_moe",
        "glm4_moe",
        "glm4_moe",
        dict(
            num_key_value_heads=2,
            head_dim=16,
            attention_bias=True,
            partial_rotary_factor=0.5,
            use_qk_norm=True,
            n_routed_experts=8,
            num_experts_per_tok=2,
            n_group=4,
            topk_group=2,
            n_shared_experts=1,
            moe_intermediate_size=32,
            first_k_dense_replace=1,
            routed_scaling_factor=2.5,
            norm_topk_prob=True,
            pad_token_id=0,
        ),
    ),
    Case(
        "glm4_moe-air",
        "glm4_moe",
        "glm4_moe",
        dict(
            num_key_value_heads=2,
            attention_bias=True,
            partial_rotary_factor=0.5,
            n_routed_experts=4,
            num_experts_per_tok=2,
            n_shared_experts=2,
            moe_intermediate_size=32,
            first_k_dense_replace=2,
            routed_scaling_factor=1.0,
            pad_token_id=0,
        ),
    ),
    # all-mpnet-base-v2's options: 32 relative buckets, padding index 1
    Case(
        "mpnet",
        "mpnet",
        "mpnet",
        dict(relative_attention_num_buckets=32, pad_token_id=1, hidden_act="gelu"),
    ),
    # multimodal wrappers read through their language model (text input only)
    Case(
        "gemma3-multimodal",
        "gemma3",
        "gemma3",
        dict(
            text_config=dict(
                SMALL,
                num_key_value_heads=2,
                head_dim=16,
                query_pre_attn_scalar=24,
                sliding_window=4,
                layer_types=["sliding_attention", "full_attention", "sliding_attention"],
                final_logit_softcapping=15.0,  # read by the text model's head only
                pad_token_id=0,
            ),
            vision_config=TINY_VISION,
            mm_tokens_per_image=4,
            boi_token_index=VOCAB - 3,
            eoi_token_index=VOCAB - 2,
            image_token_index=VOCAB - 1,
        ),
        {},
    ),
    Case(
        "mistral3-multimodal",
        "mistral3",
        "mistral",
        dict(
            text_config=dict(SMALL, model_type="mistral", num_key_value_heads=2, sliding_window=4),
            vision_config=dict(TINY_VISION, model_type="pixtral", head_dim=16),
            image_token_index=VOCAB - 1,
            spatial_merge_size=2,
        ),
        {},
    ),
]


SEQ2SEQ_SIZES: dict[str, Any] = dict(
    vocab_size=VOCAB,
    d_model=64,
    encoder_layers=2,
    decoder_layers=2,
    encoder_attention_heads=4,
    decoder_attention_heads=4,
    encoder_ffn_dim=96,
    decoder_ffn_dim=96,
    max_position_embeddings=64,
    pad_token_id=1,
    bos_token_id=0,
    eos_token_id=2,
    decoder_start_token_id=2,
)
"""BART-style sizes (mT5 maps its own)."""

SEQ2SEQ_CASES: list[Case] = [
    Case("bart", "bart", "bart", dict(scale_embedding=True), dict(SEQ2SEQ_SIZES)),
    Case("mbart", "mbart", "mbart", dict(scale_embedding=True), dict(SEQ2SEQ_SIZES)),
    Case(
        "mt5",
        "mt5",
        "mt5",
        dict(decoder_start_token_id=0),
        dict(vocab_size=VOCAB, d_model=64, d_kv=16, d_ff=96, num_layers=2, num_heads=4),
    ),
]
"""Encoder-decoders (their end-to-end runs: tests/models/test_family_seq2seq_commands.py)."""


def build_case(case: Case) -> ModelView:
    config = case.config()
    family = family_for(config)
    assert family.name == case.family, f"{case.id}: taken by {family.name}"
    auto = {
        "causal-lm": transformers.AutoModelForCausalLM,
        "seq2seq-lm": transformers.AutoModelForSeq2SeqLM,
        "base": transformers.AutoModel,
        "image-text-to-text": transformers.AutoModelForImageTextToText,
    }[family.auto_class]
    torch.manual_seed(0)
    model = auto.from_config(config, attn_implementation="eager", dtype=torch.float32)
    with torch.no_grad():
        for p in model.parameters():
            if p.ndim == 1:
                p.add_(0.2 * torch.randn_like(p))
    model.eval().requires_grad_(False)
    return family.build(model, None, f"tiny-{case.id}", "memory")
