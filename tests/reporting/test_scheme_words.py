"""Concept scheme labels read as words on the page: every label geomlens writes has its
words, two different schemes never share them, and a sentence keeps its labels for the
tooltips."""

from __future__ import annotations

import itertools

from geomlens.analyses.concepts.aggregate import NORMS, WORD_AGGS
from geomlens.analyses.concepts.scheme_words import LABEL, label_words, with_words
from geomlens.analyses.concepts.schemes import (
    EXAMPLE_AGGS,
    PRESETS,
    SEGMENT_AGGS,
    SEGMENTS,
    Scheme,
)
from geomlens.errors import GeomlensError
from geomlens.reporting.html import coded, number, readings


def every_label() -> set[str]:
    """The labels of every valid scheme over the fields' values (a few layers)."""
    labels = set()
    grid = itertools.product(
        SEGMENTS, ("E", "middle", "N", "0", "3", "-1"), WORD_AGGS, NORMS, SEGMENT_AGGS, EXAMPLE_AGGS
    )
    for segment, layer, word_agg, norm, segment_agg, example_agg in grid:
        fields = dict(
            segment=segment,
            layer=layer,
            word_agg=word_agg,
            norm=norm,
            segment_agg=segment_agg,
            example_agg=example_agg,
        )
        tests = [dict(test="pyramidal")] + [
            dict(test="similarity", out_layer=out, out_word_agg=agg, similarity=sim)
            for out, agg, sim in (("middle", "mean", "dot"), ("E", "relu+|w1mean", "cos"))
        ]
        for test in tests:
            try:
                labels.add(Scheme(**fields, **test).validate().label)  # type: ignore[arg-type]
            except GeomlensError:  # a combination the schemes refuse
                continue
    return labels


def test_every_label_has_words_and_no_two_schemes_share_them() -> None:
    labels = every_label()
    assert len(labels) > 10_000
    words = {label: label_words(label) for label in labels}
    assert all(w != label and LABEL.fullmatch(label) for label, w in words.items())
    assert len(set(words.values())) == len(labels)  # one scheme, one phrase


def test_a_label_reads_as_the_scheme_it_names() -> None:
    examples = PRESETS["examples_mid"].validate().label
    assert examples == "P:concat_each|middle|mean|varNorm|none|none"
    assert label_words(examples) == (
        "pyramidal test: each example one segment, read at the middle layer, tokens "
        "averaged, scaled to unit variance"
    )
    dot = PRESETS["similarity_dot"].validate().label
    assert label_words(dot) == (
        "similarity test: all examples one segment, read at the middle layer, tokens "
        "averaged, choices read at the middle layer, tokens averaged, compared by dot product"
    )
    assert label_words("P:concat") == "P:concat"  # not a label geomlens writes: kept


def test_a_sentence_shows_words_and_keeps_each_label_in_a_tooltip() -> None:
    label = "P:concat_each|middle|mean|varNorm|none|none"
    why = f"every scheme is degenerate ({label}: its accuracy is below chance)"
    pieces = with_words(why)
    assert pieces == [
        ("every scheme is degenerate (", None),
        (label_words(label), label),
        (": its accuracy is below chance)", None),
    ]
    html = coded(pieces)
    assert f'<span class="coded" title="{label}">{label_words(label)}</span>' in html
    assert html.count(label) == 1  # only in the tooltip
    assert number(html) is html and readings([html]) == f'<ul class="readings"><li>{html}</li></ul>'
    assert coded([("a <b>", None)]) == "a &lt;b&gt;"  # plain pieces are still escaped
