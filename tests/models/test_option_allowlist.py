"""Config options are an allowlist: an option whose value differs from its config class's
default and that the family does not declare is refused by name (as penzai compares a
Hugging Face config with its class defaults); the bundled models and every row of the
family table still load."""

from __future__ import annotations

import pytest
import transformers
from family_cases import CASES, SEQ2SEQ_CASES

from geomlens.errors import GeomlensError
from geomlens.models import BUNDLED
from geomlens.models.families import family_for
from geomlens.models.families.base import differing_options

SMALL = dict(
    vocab_size=64,
    hidden_size=32,
    intermediate_size=48,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
)


def test_an_undeclared_option_is_refused_by_name() -> None:
    config = transformers.LlamaConfig(**SMALL, chunk_size_feed_forward=4)
    with pytest.raises(GeomlensError) as info:
        family_for(config)
    message = str(info.value)
    assert "the llama mapping does not handle" in message
    assert "chunk_size_feed_forward=4 (not declared by the mapping)" in message


def test_every_undeclared_option_is_listed_with_the_value_checks() -> None:
    config = transformers.SmolLM3Config(**SMALL, mlp_bias=True, chunk_size_feed_forward=2)
    with pytest.raises(GeomlensError) as info:
        family_for(config)
    message = str(info.value)
    assert "mlp_bias=True" in message and "chunk_size_feed_forward=2" in message


def test_defaults_sizes_metadata_and_dropout_are_not_options() -> None:
    config = transformers.LlamaConfig(**SMALL, attention_dropout=0.1, initializer_range=0.5)
    assert family_for(config).name == "llama"
    assert differing_options(transformers.LlamaConfig()) == {}
    config.leftover_of_an_old_checkpoint = True  # not an option of the class
    assert "leftover_of_an_old_checkpoint" not in differing_options(config)


@pytest.mark.parametrize("case", CASES + SEQ2SEQ_CASES, ids=lambda c: c.id)
def test_every_row_of_the_family_table_declares_its_options(case) -> None:
    assert family_for(case.config()).name == case.family


@pytest.mark.parametrize("name", ["smollm2-135m", "minilm-l6"])
def test_the_bundled_models_declare_their_options(name: str) -> None:
    import glob
    import os

    model = BUNDLED[name]
    if model.part_paths() is None:
        pytest.skip(f"{name} is not installed")
    if model.gguf:  # its converted folder, when a load has made one
        cache = os.path.expanduser("~/.cache/geomlens/converted")
        found = sorted(glob.glob(f"{cache}/{name}-*"))
        if not found:
            pytest.skip(f"{name} has not been converted yet")
        folder = found[0]
    else:
        (folder,) = model.part_paths() or []
    config = transformers.AutoConfig.from_pretrained(folder)
    assert differing_options(config)  # a real checkpoint sets many options
    family_for(config)
