"""The Python API's boundary: a caller's wrong value is refused in one sentence in the
caller's words (which argument, what it takes), before any model loads; only a failure
inside geomlens is reported as a bug in geomlens."""

from __future__ import annotations

import pytest

import geomlens
from geomlens.api.checks import text_list
from geomlens.errors import GeomlensError, InternalError

NOT_TEXTS = {
    "a number": 5,
    "a float": 2.5,
    "None": None,
    "a dict": {"text": "words"},
    "a set": {"words"},
    "bytes": b"some words",
    "bytearray": bytearray(b"some words"),
}


@pytest.mark.parametrize("value", NOT_TEXTS.values(), ids=NOT_TEXTS.keys())
def test_what_is_not_text_is_the_callers_error(value):
    with pytest.raises(GeomlensError) as info:
        geomlens.activations("minilm-l6", value)  # refused before the model loads
    message = str(info.value)
    assert not isinstance(info.value, InternalError)
    assert "bug" not in message and "texts takes a str or a list of str" in message
    if isinstance(value, (bytes, bytearray)):
        assert "decode" in message  # never read as a list of byte values


@pytest.mark.parametrize("where", [0, 1, 2])
@pytest.mark.parametrize("surrogate", ["\ud800", "\udfff", "\udc80"])
def test_a_lone_surrogate_anywhere_is_named(where, surrogate):
    texts = ["first text", "second text", "third text"]
    texts[where] = texts[where][:3] + surrogate + texts[where][3:]
    with pytest.raises(GeomlensError, match=rf"texts\[{where}\] holds .* at character 3"):
        geomlens.activations("minilm-l6", texts)


@pytest.mark.parametrize(
    "texts",
    [["same words", "same words"], ["a b", "a b", "a b", "a b"], ("x y z", "x y z")],
    ids=["two copies", "four copies", "tuple"],
)
def test_parts_count_different_texts_not_entries(texts):
    with pytest.raises(GeomlensError, match="1 different text .* at least 2 different"):
        geomlens.activations("minilm-l6", list(texts), parts=True)


@pytest.mark.parametrize("text", ["", "   ", "\n\t ", "\u3000"])
def test_whitespace_only_texts_are_refused(text):
    with pytest.raises(GeomlensError, match=r"texts\[1\] is empty or only whitespace"):
        geomlens.activations("minilm-l6", ["words here", text])


@pytest.mark.parametrize(
    "corpus",
    [["ok words", "bad \ud800 words"], ["ok", 3], ["  "]],
    ids=["surrogate", "a number among texts", "whitespace"],
)
def test_a_corpus_list_is_checked_in_the_callers_words(corpus, tmp_path):
    with pytest.raises(GeomlensError, match=r"corpus(\[\d\]| takes)") as info:
        geomlens.capture(model="minilm-l6", corpus=corpus, contexts=2, length=8, out=tmp_path)
    assert not isinstance(info.value, InternalError)


def test_text_list_keeps_good_texts_in_order():
    assert text_list("f()", "one text") == ["one text"]
    assert text_list("f()", ("a", "b", "a"), distinct=2) == ["a", "b", "a"]


def test_a_failure_inside_geomlens_is_still_a_bug(monkeypatch):
    import geomlens.api.text_activations as ta

    def broken(*args, **kwargs):
        raise TypeError("an internal slip")

    monkeypatch.setattr(ta, "resolved_view", broken)
    with pytest.raises(InternalError, match="bug in geomlens"):
        geomlens.activations("minilm-l6", ["two words", "other words"])
