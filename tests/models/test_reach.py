"""The reach table in docs/models.md is true: regenerated here by real tiny loads (each
undeclared type's tiny model loaded as ``load_folder`` loads it), it equals the table the
docs hold, row by row; a few known rows have the tier they are known to have."""

from __future__ import annotations

import difflib
from pathlib import Path

import pytest
import transformers

from geomlens.cli import main
from geomlens.models.reach import Reach, markdown, reach_of, reach_table
from geomlens.models.tiny import tiny_config, tiny_model

DOCS = Path(__file__).resolve().parents[2] / "docs" / "models.md"


@pytest.fixture(scope="module")
def rows() -> dict[str, Reach]:
    """Every text model type's row, by a real tiny load (about 60 s on one core)."""
    return {row.model_type: row for row in reach_table()}


def documented() -> str:
    """The counts line and the table under docs/models.md's "## Reach" heading."""
    section = DOCS.read_text().split("\n## Reach\n", 1)[1].split("\n## ", 1)[0]
    start = section.index(" text model types (")
    return section[section.rindex("\n", 0, start) + 1 :].strip() + "\n"


def test_the_docs_table_is_the_regenerated_one(rows: dict[str, Reach]) -> None:
    generated = markdown(list(rows.values()))
    changed = list(
        difflib.unified_diff(
            documented().splitlines(), generated.splitlines(), "docs", "loads", lineterm="", n=0
        )
    )
    assert not changed, (
        "docs/models.md's reach table differs from real tiny loads; regenerate it with "
        "`python -m geomlens.models.reach`:\n" + "\n".join(changed[:40])
    )


def test_known_rows_have_their_tier(rows: dict[str, Reach]) -> None:
    assert (rows["llama"].tier, rows["llama"].why) == ("full", "the llama family")
    assert rows["deepseek_v3"].tier == "hidden-state"
    assert "multi-head latent attention" in rows["deepseek_v3"].why
    assert rows["marian"].tier == "refused" and "encoder-decoder" in rows["marian"].why
    # an undeclared type whose view through a declared layout passes the on-load check
    assert (rows["internlm3"].tier, rows["internlm3"].why) == ("full", "through the llama layout")
    # Arcee's squared-ReLU MLP: helium's layout builds but differs on the check
    assert rows["arcee"].tier == "hidden-state"
    assert rows["arcee"].why.startswith("no declared layout reproduces its forward pass; first")
    # a state-space model whose hidden states Hugging Face numbers from block 0's output
    assert rows["mamba"].tier == "hidden-state"
    assert {row.tier for row in rows.values()} == {"full", "hidden-state", "refused"}
    assert len(rows) > 150


BUILT_NOW = ["bamba", "bailing_hybrid", "kolibri1_1", "jamba", "zamba", "qwen3_5_text", "mamba2"]
"""Types once listed as "transformers cannot build it at 2 layers": a tiny config of the
type's own defaults, scaled down, builds and loads."""


@pytest.mark.parametrize("model_type", BUILT_NOW)
def test_refusals_of_a_tiny_config_are_retried(model_type: str) -> None:
    row = reach_of(model_type)
    assert row.tier == "hidden-state", row


@pytest.mark.parametrize("model_type", ["bailing_hybrid", "jamba", "qwen3_5_text", "kimi_linear"])
def test_tiny_hybrids_keep_every_kind_of_layer(model_type: str) -> None:
    """The per-layer pattern of the default config, cut to one layer of each kind: a
    hybrid keeps its attention layers (an all-linear cut cannot run)."""
    default, tiny = transformers.CONFIG_MAPPING[model_type](), tiny_config(model_type)
    kinds = getattr(default, "layer_types", None) or getattr(default, "layers_block_type", None)
    mine = getattr(tiny, "layer_types", None) or getattr(tiny, "layers_block_type", None)
    assert mine is not None and len(mine) == tiny.num_hidden_layers <= 4
    assert set(mine) == set(kinds)


@pytest.mark.parametrize("model_type", ["longformer", "cpmant", "mamba", "rwkv"])
def test_models_read_from_their_hidden_states_output(model_type: str) -> None:
    assert reach_of(model_type).tier == "hidden-state"


def test_refusals_say_what_holds_for_real_checkpoints() -> None:
    funnel = reach_of("funnel")  # it pools tokens between its blocks
    assert funnel.tier == "refused" and "one vector per token per layer" in funnel.why
    assert "modality preprocessor" in reach_of("perceiver").why
    marian = reach_of("marian")
    assert marian.tier == "refused" and "encoder-decoder" in marian.why


@pytest.mark.parametrize("model_type", ["pegasus", "marian"])
def test_undeclared_encoder_decoders_are_refused_as_such(
    model_type: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Their causal-LM class builds the decoder alone: refused for what they are, not for
    weights that would not fit it."""
    tiny_model(model_type, kind="seq2seq-lm").save_pretrained(tmp_path)
    assert main(["capture", "--model", str(tmp_path), "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert "is an encoder-decoder that no family declares" in err
    assert "different models" not in err and "Traceback" not in err


def test_a_saved_folder_that_does_not_load_back_is_said() -> None:
    """Emu3's causal LM keeps an Emu3TextConfig, which no Auto class knows: a saved folder
    of it does not load back, and its row says so; a Llama folder does."""
    from geomlens.models.reach import not_reloaded

    assert "Emu3TextConfig" in not_reloaded(tiny_model("emu3"))
    assert not_reloaded(tiny_model("llama")) == ""
    assert reach_of("emu3").why.startswith("a saved folder does not load back")


def test_a_tiny_model_whose_table_has_two_sizes_saves_and_loads_back(tmp_path: Path) -> None:
    """Inkling 2 counts its token table twice (``unpadded_vocab_size``): both follow the tiny
    vocabulary, so transformers saves the model and loads it back."""
    model = tiny_model("inkling2_text", vocab_size=200)
    assert model.config.unpadded_vocab_size == 200
    model.save_pretrained(tmp_path)
    again = transformers.AutoModelForCausalLM.from_pretrained(tmp_path)
    table = again.get_input_embeddings().weight
    assert table.shape[0] == 200
    assert bool((table == model.get_input_embeddings().weight).all())
