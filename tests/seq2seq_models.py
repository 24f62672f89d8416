"""Tiny random encoder-decoders saved as folders a user would pass to ``--model``.

Two T5-style rows: v1.1 / Flan-T5 (gated-GELU FFN, untied head, unscaled output) and the
original T5 (ReLU FFN, tied embeddings, output scaled by d^-0.5). The tokenizer is
SmolLM2's with T5's habit added: every encoded text ends with the end-of-sequence token,
and the padding token (the decoder's start token) is its own id. No download is needed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
import transformers
from tokenizers.processors import TemplateProcessing

from geomlens.models import BUNDLED
from geomlens.models.loading import resolve_folder

T5_ROWS: dict[str, dict[str, Any]] = {
    "t5-v1_1": dict(feed_forward_proj="gated-gelu", tie_word_embeddings=False),
    "t5-v1_0": dict(feed_forward_proj="relu", tie_word_embeddings=True),
}


def t5_tokenizer() -> Any:
    """SmolLM2's tokenizer that appends its end-of-text token, as T5's does with ``</s>``."""
    if not BUNDLED["smollm2-135m"].installed:
        pytest.fail(f"smollm2-135m is not installed ({BUNDLED['smollm2-135m'].install})")
    tok = transformers.AutoTokenizer.from_pretrained(resolve_folder("smollm2-135m"))
    eos = tok.eos_token
    tok.backend_tokenizer.post_processor = TemplateProcessing(
        single=f"$A {eos}", pair=f"$A {eos} $B {eos}", special_tokens=[(eos, tok.eos_token_id)]
    )
    tok.pad_token = "<|endoftext|>"
    return tok


def tiny_t5(
    root: Path,
    row: str = "t5-v1_1",
    layers: int = 2,
    n_positions: int = 512,
    initializer_factor: float = 1.0,
) -> Path:
    """Save a tiny random T5 of ``row`` with the tokenizer above into ``root/row``.

    ``n_positions``: the longest input the model accepts (512 as every released T5);
    ``initializer_factor``: T5's scale of the random weights (smaller: flatter logits).
    """
    tok = t5_tokenizer()
    config = transformers.T5Config(
        vocab_size=len(tok),
        d_model=32,
        d_kv=8,
        d_ff=48,
        num_layers=layers,
        num_decoder_layers=layers,
        num_heads=4,
        relative_attention_num_buckets=8,
        relative_attention_max_distance=32,
        n_positions=n_positions,
        initializer_factor=initializer_factor,
        pad_token_id=tok.pad_token_id,
        eos_token_id=tok.eos_token_id,
        decoder_start_token_id=tok.pad_token_id,
        **T5_ROWS[row],
    )
    torch.manual_seed(0)
    model = transformers.T5ForConditionalGeneration(config)
    folder = root / row
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder
