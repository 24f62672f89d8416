"""Tiny random models and tokenizers the tests build from configs (no downloads).

``char_tokenizer(size)``: a character-level tokenizer of exactly ``size`` ids.
``small_tokenizer(encoder)``: a 1,024-token tokenizer trained on BBC news (byte-level BPE for
decoders, WordPiece with [CLS]/[SEP] for encoders): real subwords, but a vocabulary small
enough that readouts over it (walks, lens, top tokens) cost little. The module
fixtures ``gpt2``, ``t5``, ``t5_relu`` and ``gemma3`` are random float32 models under eager
attention, with norm gains and biases moved off their initial values; a test module uses
them by importing them.
"""

from __future__ import annotations

import functools
from typing import Any

import pytest
import torch
import transformers
from tokenizers import (
    Tokenizer,
    decoders,
    models,
    normalizers,
    pre_tokenizers,
    processors,
    trainers,
)

from geomlens.models import ModelView
from geomlens.models.families import family_for
from geomlens.models.families.gemma3 import GEMMA3
from geomlens.models.families.gpt2 import GPT2
from geomlens.models.families.t5 import T5

VOCAB = 96
"""The vocabulary of the tiny model fixtures."""

SMALL_VOCAB = 1024
"""The vocabulary of ``small_tokenizer``."""


@functools.cache
def _training_text() -> tuple[str, ...]:
    """Every tenth BBC article, and the head probe's nouns repeated so that most of them
    become single tokens (the probe reads single-token nouns)."""
    from geomlens.analyses.sphere.step import load_nouns
    from geomlens.corpus import load_corpus

    nouns = " ".join(load_nouns())
    return tuple(d.text for d in load_corpus("bbc").documents[::10]) + (nouns,) * 50


@functools.cache
def small_tokenizer(encoder: bool) -> Any:
    """A ``SMALL_VOCAB``-token tokenizer trained on ``_training_text`` (deterministic).

    Decoders: byte-level BPE (any text encodes) with ``<|endoftext|>`` as BOS/EOS. Encoders:
    lower-cased WordPiece that wraps a text in [CLS] ... [SEP], as BERT's does.
    """
    if encoder:
        specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
        tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
        tok.normalizer = normalizers.BertNormalizer(lowercase=True)
        tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
        tok.decoder = decoders.WordPiece()
        trainer: Any = trainers.WordPieceTrainer(
            vocab_size=SMALL_VOCAB, special_tokens=specials, show_progress=False
        )
        tok.train_from_iterator(_training_text(), trainer)
        cls, sep = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
        tok.post_processor = processors.TemplateProcessing(
            single="[CLS] $A [SEP]",
            pair="[CLS] $A [SEP] $B [SEP]",
            special_tokens=[("[CLS]", cls), ("[SEP]", sep)],
        )
        names = dict(zip(("pad", "unk", "cls", "sep", "mask"), specials, strict=True))
        return transformers.PreTrainedTokenizerFast(
            tokenizer_object=tok, **{f"{k}_token": v for k, v in names.items()}
        )
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=SMALL_VOCAB,
        special_tokens=["<|endoftext|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(_training_text(), trainer)
    eot = "<|endoftext|>"
    return transformers.PreTrainedTokenizerFast(tokenizer_object=tok, bos_token=eot, eos_token=eot)


CHARS = "abcdefghijklmnopqrstuvwxyz0123456789.,'?!-:;ABCDEFGHIJKLMNOPQRSTUVWXYZ"


def saved_llama(folder: Any, **config: Any) -> Any:
    """A tiny random Llama (seed 0; d 32, MLP 48, 2 layers, 4 heads over 2 key/value heads,
    64 positions, unless ``config`` says otherwise) with ``small_tokenizer``'s vocabulary,
    saved with that tokenizer in ``folder`` (returned)."""
    tokenizer = small_tokenizer(False)
    sizes: dict[str, Any] = {
        "hidden_size": 32,
        "intermediate_size": 48,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "max_position_embeddings": 64,
    }
    llama = transformers.LlamaConfig(
        **{**sizes, **config},
        vocab_size=len(tokenizer),
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    torch.manual_seed(0)
    transformers.LlamaForCausalLM(llama).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def char_tokenizer(size: int) -> Any:
    """A character-level tokenizer of exactly ``size`` ids (``size`` >= 8): [UNK], the
    word boundary, then letters, digits and punctuation, then filler tokens; a tiny model
    of ``vocab_size=size`` covers it, and ordinary words get distinct ids."""
    symbols = ["[UNK]", "\u2581", *CHARS][:size]
    symbols += [f"<extra_{k}>" for k in range(size - len(symbols))]
    vocab = {s: i for i, s in enumerate(symbols)}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.decoder = decoders.Metaspace()
    return transformers.PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]")


def _tiny(family: Any, config: Any, seed: int) -> ModelView:
    """A random float32 model built from ``config`` (eager attention), seen by ``family``."""
    import transformers

    auto = {
        "causal-lm": transformers.AutoModelForCausalLM,
        "seq2seq-lm": transformers.AutoModelForSeq2SeqLM,
    }[family.auto_class]
    torch.manual_seed(seed)
    model = auto.from_config(config, attn_implementation="eager", dtype=torch.float32)
    with torch.no_grad():
        # Norm gains start at 1 (or 0 for Gemma) and biases at 0: move them off those values
        # so that a wrong gain, offset or bias cannot pass unnoticed.
        for p in model.parameters():
            if p.ndim == 1:
                p.add_(0.2 * torch.randn_like(p))
    model.eval().requires_grad_(False)
    assert family_for(config) is family
    return family.build(model, None, f"tiny-{family.name}", "memory")


@pytest.fixture(scope="module")
def gpt2() -> ModelView:
    from transformers import GPT2Config

    config = GPT2Config(
        vocab_size=VOCAB,
        n_positions=32,
        n_embd=64,
        n_layer=2,
        n_head=4,
        n_inner=96,
        bos_token_id=0,
        eos_token_id=0,
    )
    return _tiny(GPT2, config, seed=0)


def _t5_config(feed_forward_proj: str) -> Any:
    from transformers import T5Config

    # d_kv * num_heads (32) differs from d_model (64), as in t5-large and up.
    return T5Config(
        vocab_size=VOCAB,
        d_model=64,
        d_kv=8,
        d_ff=96,
        num_layers=2,
        num_decoder_layers=2,
        num_heads=4,
        relative_attention_num_buckets=8,
        relative_attention_max_distance=16,
        feed_forward_proj=feed_forward_proj,
        dropout_rate=0.0,
        decoder_start_token_id=0,
    )


@pytest.fixture(scope="module")
def t5() -> ModelView:
    return _tiny(T5, _t5_config("gated-gelu"), seed=1)


@pytest.fixture(scope="module")
def t5_relu() -> ModelView:
    return _tiny(T5, _t5_config("relu"), seed=2)


@pytest.fixture(scope="module")
def gemma3() -> ModelView:
    from transformers import Gemma3TextConfig

    config = Gemma3TextConfig(
        vocab_size=VOCAB,
        hidden_size=64,
        intermediate_size=96,
        num_hidden_layers=3,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        query_pre_attn_scalar=16,
        sliding_window=4,  # shorter than SEQ, so the local mask matters
        layer_types=["sliding_attention", "full_attention", "sliding_attention"],
        max_position_embeddings=64,
        rope_parameters={
            "sliding_attention": {"rope_type": "default", "rope_theta": 100.0},
            "full_attention": {"rope_type": "default", "rope_theta": 5000.0},
        },
        pad_token_id=0,
    )
    return _tiny(GEMMA3, config, seed=3)
