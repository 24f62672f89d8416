"""A concept scheme's label (``Scheme.label``, "P:concat_each|middle|mean|varNorm|none|none")
in words a reader follows: what the page shows, with the label kept in a tooltip.

Pure text, no torch: the claims table and ``compare`` read it without loading a model.
"""

from __future__ import annotations

import re

LABEL = re.compile(r"\b[PS]:[\w+\-=|]+")
"""A scheme label inside a sentence (the claims' values and reasons name schemes by it)."""

TESTS = {"P": "pyramidal test", "S": "similarity test"}

SEGMENTS = {
    "tokens": "each token a segment",
    "sentences": "sentences as segments",
    "each_example": "each example's context and completion as segments",
    "each_block": "each block a segment",
    "concat_each": "each example one segment",
    "concat_all": "all examples one segment",
    "concat_tokens": "the whole context in one pass, each token a segment",
}
"""``Scheme.label``'s short segmentation names."""

FILTERS = {
    "relu": "through the model's FFN activation",
    "relu+": "through the model's FFN activation, added back to them",
    "-relu": "through the FFN activation's negative side",
    "-relu+": "through the FFN activation's negative side, added back to them",
    "max0": "cut to their positive parts",
    "min0": "cut to their negative parts",
}
"""Word aggregations' filters (``aggregate.ACTIVATION_FILTERS`` and ``FIXED_FILTERS``)."""

POOLINGS = {
    "mean": "averaged",
    "w1mean": "averaged, later ones weighing more",
    "last": "the last one kept",
    "active_mean": "averaged where active",
}

NORMS = {
    "none": "",
    "L2": "L2-normalised",
    "varNorm": "scaled to unit variance",
    "zNorm": "z-scored",
}

SEGMENT_AGGS = {
    "mean": "segments averaged",
    "none": "",
    "merge_all_segments": "all segments merged",
}

EXAMPLE_AGGS = {"mean": "examples averaged", "none": "", "soft_cluster": "examples soft-clustered"}

SIMILARITIES = {"dot": "compared by dot product", "cos": "compared by cosine"}


def layer_words(spec: str) -> str:
    """Where a layer spec reads (``schemes.resolve_layer``), in words."""
    if spec == "E":
        return "the input embeddings"
    if spec == "middle":
        return "the middle layer"
    if spec == "N":
        return "the top, after the final norm"
    if spec == "0":
        return "layer 0 (embeddings with positions)"
    if spec.startswith("-"):
        return f"block output {spec[1:]} from the top"
    return f"layer {spec}"


def _tokens(parts: list[str]) -> tuple[str, list[str]]:
    """The word aggregation at the head of ``parts`` in words, and the parts after it (a
    filter takes two parts: "relu|mean")."""
    if parts[0] in FILTERS:
        filtered, pooling = FILTERS[parts[0]], POOLINGS[parts[1]]
        return f"tokens {filtered}, {pooling}", parts[2:]
    return f"tokens {POOLINGS[parts[0]]}", parts[1:]


def label_words(label: str) -> str:
    """A scheme label in words ("pyramidal test: each example one segment, read at the
    middle layer, tokens averaged, scaled to unit variance"); the label itself when it is
    not one this geomlens writes."""
    try:
        return _words(label)
    except (KeyError, IndexError, ValueError):
        return label


def _words(label: str) -> str:
    test, rest = label.split(":", 1)
    parts = rest.split("|")
    segment, layer = SEGMENTS[parts[0]], layer_words(parts[1])
    tokens, parts = _tokens(parts[2:])
    norm, segment_agg, example_agg = NORMS[parts[0]], SEGMENT_AGGS[parts[1]], EXAMPLE_AGGS[parts[2]]
    said = [f"{segment}, read at {layer}", tokens, norm, segment_agg, example_agg]
    if test == "S":
        out = parts[3]
        if not out.startswith("out="):
            raise ValueError(label)
        choice, parts = _tokens(parts[4:])
        said.append(f"choices read at {layer_words(out[4:])}, {choice}, {SIMILARITIES[parts[0]]}")
        parts = parts[1:]
    if parts[3 if test == "P" else 0 :] or test not in TESTS:
        raise ValueError(label)
    return f"{TESTS[test]}: " + ", ".join(s for s in said if s)


def with_words(text: str) -> list[tuple[str, str | None]]:
    """``text`` cut into its plain runs and its scheme labels: [(words, label or None)],
    each label replaced by its words (for a page that shows the words and keeps the label
    in a tooltip)."""
    out: list[tuple[str, str | None]] = []
    at = 0
    for m in LABEL.finditer(text):
        out += [(text[at : m.start()], None), (label_words(m.group(0)), m.group(0))]
        at = m.end()
    return [piece for piece in [*out, (text[at:], None)] if piece[0]]
