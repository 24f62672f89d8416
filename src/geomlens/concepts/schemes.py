"""Composition schemes of the concept-space tests: one dataclass, parsing, a stable hash.

A scheme says how a context becomes vectors (segmentation, encoding layer, word
aggregation, norm, segment and example aggregation) and, for the similarity test, how a
choice becomes a vector and how the two are compared. Fields that cannot matter for a
scheme (for example SEGMENT_AGG when every block is a single segment) are set to their
neutral value, so equivalent schemes share one hash and run once.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, fields, replace
from typing import Any

from geomlens.concepts.aggregate import GROUP_AGGS, NORMS, WORD_AGGS
from geomlens.errors import GeomlensError

TESTS = ("pyramidal", "similarity")
SEGMENTS = (
    "segment_tokens",
    "segment_sentences",
    "segment_each_example",
    "concat_each_example",
    "concat_all_examples",
    "concat_tokens",
)
EXAMPLE_AGGS = ("mean", "none", "soft_cluster")
SIMILARITIES = ("dot", "cos")
ONE_SEGMENT_PER_BLOCK = ("segment_each_example", "concat_each_example", "concat_all_examples")

# Paper-style names accepted in grid files and --scheme (case-insensitive).
ALIASES = {
    "test": "test",
    "segment": "segment",
    "segment_scheme": "segment",
    "layer": "layer",
    "encoding_layer": "layer",
    "word_agg": "word_agg",
    "word_agg_scheme": "word_agg",
    "norm": "norm",
    "segment_agg": "segment_agg",
    "segment_agg_scheme": "segment_agg",
    "example_agg": "example_agg",
    "example_agg_scheme": "example_agg",
    "out_layer": "out_layer",
    "out_encoding_layer": "out_layer",
    "out_word_agg": "out_word_agg",
    "out_word_agg_scheme": "out_word_agg",
    "similarity": "similarity",
    "sim": "similarity",
}


@dataclass(frozen=True)
class Scheme:
    """One composition scheme.

    Attributes:
        test: "pyramidal" (test 1: vectors fed as inputs_embeds, the choice's
            log-likelihood decides) or "similarity" (test 2: closest choice vector).
        segment: how the context splits into segments (see ``SEGMENTS``;
            ``concat_tokens``: the whole context in one pass, every token its own segment).
        layer: ENCODING_LAYER: "E" (input embeddings), an integer hidden-state layer
            (layer l is the output of the l-th block, without the final norm), a
            negative index from the top (-1: the last block), or "middle" (n_layers // 2).
            On an encoder-decoder these are the encoder's layers.
        word_agg: WORD_AGG, tokens of a segment to one vector.
        norm: NORM applied to each segment vector (and, in test 2, to choice vectors).
        segment_agg: SEGMENT_AGG, a block's segment vectors: "mean" or "none".
        example_agg: EXAMPLE_AGG, across the blocks: "mean", "none" or (test 2) "soft_cluster".
        out_layer: OUT_ENCODING_LAYER of the choices (test 2).
        out_word_agg: OUT_WORD_AGG of the choices (test 2).
        similarity: "dot" or "cos" (test 2).
    """

    test: str = "pyramidal"
    segment: str = "segment_sentences"
    layer: str = "E"
    word_agg: str = "mean"
    norm: str = "none"
    segment_agg: str = "mean"
    example_agg: str = "none"
    out_layer: str | None = None
    out_word_agg: str | None = None
    similarity: str | None = None

    def validate(self) -> Scheme:
        """Check every field; returns the canonical scheme (neutral values where moot)."""
        checks = [
            ("test", self.test, TESTS),
            ("segment", self.segment, SEGMENTS),
            ("word_agg", self.word_agg, WORD_AGGS),
            ("norm", self.norm, NORMS),
            ("segment_agg", self.segment_agg, GROUP_AGGS),
            ("example_agg", self.example_agg, EXAMPLE_AGGS),
        ]
        if self.test == "similarity":
            checks += [
                ("out_word_agg", self.out_word_agg or "mean", WORD_AGGS),
                ("similarity", self.similarity or "cos", SIMILARITIES),
            ]
        for name, value, allowed in checks:
            if value not in allowed:
                raise GeomlensError(
                    f"unknown {name} {value!r} in scheme; use one of {', '.join(allowed)}."
                )
        check_layer_spec(self.layer)
        s = self
        if s.test == "pyramidal":
            if s.example_agg == "soft_cluster":
                raise GeomlensError(
                    "example_agg soft_cluster needs a choice vector; use it with test similarity."
                )
            s = replace(s, out_layer=None, out_word_agg=None, similarity=None)
        else:
            s = replace(
                s,
                out_layer=str(s.out_layer) if s.out_layer is not None else "E",
                out_word_agg=s.out_word_agg or "mean",
                similarity=s.similarity or "cos",
            )
            check_layer_spec(s.out_layer)
        if s.segment in ONE_SEGMENT_PER_BLOCK:
            s = replace(s, segment_agg="none")
        if s.segment == "concat_all_examples":
            s = replace(s, example_agg="none")
        return s

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def key(self) -> str:
        """A stable 12-hex-digit hash of the canonical scheme."""
        text = json.dumps(self.validate().to_dict(), sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:12]

    @property
    def label(self) -> str:
        """A short readable name: test:segment|layer|word_agg|norm|segment_agg|example_agg."""
        s = self.validate()
        short = {
            "segment_tokens": "tokens",
            "segment_sentences": "sentences",
            "segment_each_example": "each_example",
            "concat_each_example": "concat_each",
            "concat_all_examples": "concat_all",
            "concat_tokens": "concat_tokens",
        }[s.segment]
        parts = [short, s.layer, s.word_agg, s.norm, s.segment_agg, s.example_agg]
        if s.test == "similarity":
            parts += [f"out={s.out_layer}", str(s.out_word_agg), str(s.similarity)]
        return ("P:" if s.test == "pyramidal" else "S:") + "|".join(parts)


def check_layer_spec(value: Any) -> str:
    text = str(value)
    if text in ("E", "middle"):
        return text
    try:
        int(text)
    except ValueError:
        raise GeomlensError(
            f"unknown layer {text!r} in scheme; use E, middle, an integer or a negative index."
        ) from None
    return text


def resolve_layer(spec: str, n_layers: int) -> int:
    """A layer spec as a hidden-state index 0..n_layers (0 = input embeddings)."""
    text = check_layer_spec(spec)
    if text == "E":
        return 0
    if text == "middle":
        return n_layers // 2
    value = int(text)
    layer = value if value >= 0 else n_layers + 1 + value
    if not 0 <= layer <= n_layers:
        raise GeomlensError(
            f"layer {spec} is outside the model's hidden-state layers 0..{n_layers} "
            f"(or -1..-{n_layers + 1})."
        )
    return layer


def scheme_from_dict(data: dict[str, Any]) -> Scheme:
    """A validated scheme from a mapping with field names or paper-style aliases."""
    known = {f.name for f in fields(Scheme)}
    values: dict[str, Any] = {}
    for raw_key, value in data.items():
        key = ALIASES.get(str(raw_key).lower())
        if key is None or key not in known:
            raise GeomlensError(
                f"unknown scheme field {raw_key!r}; use {', '.join(sorted(known))}."
            )
        values[key] = None if value is None else str(value)
    return Scheme(**values).validate()


PRESETS: dict[str, Scheme] = {
    "sanity": Scheme(segment="segment_tokens", layer="E", segment_agg="none"),
    "sentences_E": Scheme(segment="segment_sentences", layer="E", segment_agg="none"),
    "examples_mid": Scheme(segment="concat_each_example", layer="middle", norm="varNorm"),
    "similarity_mid": Scheme(
        test="similarity",
        segment="concat_all_examples",
        layer="middle",
        out_layer="middle",
        similarity="cos",
    ),
}
DEFAULT_SCHEMES = ("sanity", "sentences_E", "examples_mid", "similarity_mid")


def parse_scheme(text: str) -> Scheme:
    """A preset name, or ``key=value`` pairs separated by commas.

    Example: ``test=similarity,segment=segment_sentences,layer=middle,out_layer=E``.
    """
    text = text.strip()
    if text in PRESETS:
        return PRESETS[text].validate()
    if "=" not in text:
        raise GeomlensError(
            f"unknown scheme {text!r}; give a preset ({', '.join(PRESETS)}) or key=value pairs "
            "like test=pyramidal,segment=segment_sentences,layer=E."
        )
    data: dict[str, str] = {}
    for part in text.split(","):
        if "=" not in part:
            raise GeomlensError(f"scheme part {part!r} is not key=value.")
        key, value = part.split("=", 1)
        data[key.strip()] = value.strip()
    return scheme_from_dict(data)
