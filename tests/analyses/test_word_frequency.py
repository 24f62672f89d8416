"""Each token's frequency in its own script's language: Latin text in English, Bengali in
Bengali, Devanagari in Hindi, Cyrillic in Russian; only a token no wordfreq language knows
cannot be scored."""

from __future__ import annotations

import pytest

wordfreq = pytest.importorskip("wordfreq")

from geomlens.analyses.sphere.word_frequency import (  # noqa: E402
    language_of,
    languages,
    script_of,
    token_zipf,
    unknown,
)


def test_tokens_are_scored_in_their_own_scripts_language() -> None:
    tokens = [" the", "1", "আমি", "ক", " नहीं", "क", " и", "και", ",", "।"]
    assert [language_of(t) for t in tokens] == [
        "en",
        "en",
        "bn",
        "bn",
        "hi",
        "hi",
        "ru",
        "el",
        None,
        None,
    ]
    zipf = token_zipf(tokens)
    for t, z in zip(tokens[:8], zipf[:8], strict=True):
        assert z > 3.0, t  # common words of their languages, which English scores 0
    assert wordfreq.zipf_frequency("আমি", "en") == 0.0
    assert list(zipf[8:]) == [0.0, 0.0]  # punctuation: no script


def test_only_tokens_no_language_knows_are_unknown() -> None:
    assert script_of("ক্ষমতা") == "BENGALI" and script_of("2024") == "LATIN"
    assert script_of("!!") is None
    assert {"en", "bn", "hi", "ru"} <= set(languages())
    tokens = ["আমি", " नहीं", " the", "der", ",", "।", "!!"]
    assert unknown(tokens) == [",", "।", "!!"]
