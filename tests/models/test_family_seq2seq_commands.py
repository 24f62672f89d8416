"""BART and mT5 end to end: ``geomlens report`` on a tiny random encoder-decoder of each,
saved as a folder with a real tokenizer and loaded by path as a user would.

The tokenizer is the 1,024-token BBC one the other families use
(``tiny_models.small_tokenizer``) with T5's habit of ending every text with its
end-of-sequence token; windows are tiny (8 x 16 tokens), the concept stage scores 3 items
and no figure is drawn (``--figures none``: these runs check numbers), so one run takes
seconds. Every stage must run on both stacks, the
layer-norm identity and the per-head refactoring must hold, and the decoder's walks and
cross-attention kernels must be there.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
import transformers
from tiny_models import small_tokenizer
from tokenizers import Tokenizer
from tokenizers.processors import TemplateProcessing

from geomlens.analyses.registry import report_stages
from geomlens.cli import main


def seq2seq_tokenizer() -> Any:
    """A copy of ``small_tokenizer(False)`` that appends its end-of-text token to every
    text, as T5's does with ``</s>``, and pads with it."""
    small = small_tokenizer(False)
    eos = small.eos_token
    backend = Tokenizer.from_str(small.backend_tokenizer.to_str())
    backend.post_processor = TemplateProcessing(
        single=f"$A {eos}", pair=f"$A {eos} $B {eos}", special_tokens=[(eos, small.eos_token_id)]
    )
    return transformers.PreTrainedTokenizerFast(
        tokenizer_object=backend, bos_token=eos, eos_token=eos, pad_token=eos
    )


def tiny_config(model_type: str, tok: Any) -> Any:
    """A tiny config of ``model_type`` whose vocabulary and special tokens are ``tok``'s."""
    special = dict(pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id)
    if model_type == "mt5":
        return transformers.MT5Config(
            vocab_size=len(tok),
            d_model=32,
            d_kv=8,
            d_ff=48,
            num_layers=2,
            num_heads=4,
            relative_attention_num_buckets=8,
            relative_attention_max_distance=32,
            decoder_start_token_id=tok.pad_token_id,
            **special,
        )
    return transformers.BartConfig(
        vocab_size=len(tok),
        d_model=32,
        encoder_layers=2,
        decoder_layers=2,
        encoder_attention_heads=4,
        decoder_attention_heads=4,
        encoder_ffn_dim=48,
        decoder_ffn_dim=48,
        max_position_embeddings=512,
        scale_embedding=True,
        bos_token_id=tok.eos_token_id,
        decoder_start_token_id=tok.eos_token_id,
        forced_eos_token_id=None,
        **special,
    )


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """One report per family, run once for the module."""
    root = tmp_path_factory.mktemp("seq2seq-families")
    tok = seq2seq_tokenizer()
    out: dict[str, Path] = {}
    for model_type in ("bart", "mt5"):
        torch.manual_seed(0)
        model = transformers.AutoModelForSeq2SeqLM.from_config(tiny_config(model_type, tok))
        folder = root / model_type
        model.save_pretrained(folder)
        tok.save_pretrained(folder)
        run = root / f"run-{model_type}"
        args = ["report", "--model", str(folder), "--contexts", "8", "--length", "16"]
        args += [
            "--limit",
            "3",
            "--batch-size",
            "8",
            "--out",
            str(run),
            "--quiet",
            "--figures",
            "none",
        ]
        assert main(args) == 0, model_type
        out[model_type] = run
    return out


@pytest.mark.parametrize("family", ["bart", "mt5"])
def test_every_stage_runs_on_both_stacks(runs: dict[str, Path], family: str) -> None:
    run = runs[family]
    m = json.loads((run / "metrics.json").read_text())
    assert json.loads((run / "stages.json").read_text()) == [
        a.name for a in report_stages(generates=True)
    ]
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["model"]["family"] == family
    assert m["sphere"]["identity"]["max_rel_err"] < 1e-4
    assert m["sphere"]["heads"] and m["sphere"]["trajectory"]
    walk = m["walk"]
    assert walk["stack"] == "encoder" and walk["refactor"]["max_rel_err"] < 1e-4
    assert {"encoding", "decoding", "kernels", "cross_attention"} <= set(walk["decoder"])
    for block in m["attention"]["parts"]:
        assert block["max_rel_error"] < 1e-6
    concepts = m["concepts"]
    assert concepts["model_kind"] == "encoder-decoder" and concepts["baseline"]["n"] == 3
