"""Composition schemes of the concept-space tests: one dataclass, parsing, a stable hash.

A scheme says how a context becomes vectors (segmentation, encoding layer, word
aggregation, norm, segment and example aggregation) and, for the similarity test, how a
choice becomes a vector and how the two are compared. Fields that cannot matter for a
scheme (for example SEGMENT_AGG when every block is a single segment) are set to their
neutral value, so equivalent schemes share one hash and run once.

The hash is that of the canonical fields, plus, only for a scheme that uses a definition
geomlens revised to follow the paper, the list of those revisions (``Scheme.revisions``):
a scheme whose meaning did not change keeps its hash (and its cached results), one whose
meaning changed gets a new hash, so results computed under the old meaning are not reused.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, fields, replace
from typing import Any

from geomlens.analyses.concepts.aggregate import NORMS, WORD_AGGS, needs_activation
from geomlens.errors import GeomlensError

TESTS = ("pyramidal", "similarity")
SEGMENTS = (
    "segment_tokens",
    "segment_sentences",
    "segment_each_example",
    "segment_each_block",
    "concat_each_example",
    "concat_all_examples",
    "concat_tokens",
)
SEGMENT_AGGS = ("mean", "none", "merge_all_segments")
EXAMPLE_AGGS = ("mean", "none", "soft_cluster")
SIMILARITIES = ("dot", "cos")
DEFAULT_SIMILARITY = "dot"
"""Test 2 compares the context's and each choice's vectors by dot product, as the paper
does (Singh 2023, section 5.1.2); cosine is a variant a scheme names (``similarity=cos``)."""
ONE_SEGMENT_PER_BLOCK = ("segment_each_block", "concat_each_example", "concat_all_examples")

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
            ``segment_each_example``: each solved example cut into its context passage
            and its completion passage, the query one passage, each encoded alone;
            ``segment_each_block``: each block encoded alone, one segment;
            ``concat_tokens``: the whole context in one pass, every token its own segment).
        layer: ENCODING_LAYER (see ``resolve_layer``): "0" (token vectors plus global
            position encodings: the input of the first block), an integer l (the output
            of block l), the number of blocks N or "N" (the top of the stack after the
            final norm), -k (the output of block N + 1 - k, before the final norm: -1 is
            the final hidden activation), "middle" (N // 2) or "E" (the input embedding of
            the tokens alone). On an encoder-decoder these are the encoder's layers.
        word_agg: WORD_AGG, tokens of a segment to one vector (see ``aggregate``).
        norm: NORM applied to each segment vector (and, in test 2, to choice vectors).
        segment_agg: SEGMENT_AGG, a block's segment vectors: "mean", "none", or
            "merge_all_segments" (the segment vectors of all blocks averaged into one).
        example_agg: EXAMPLE_AGG, across the blocks: "mean", "none" or (test 2) "soft_cluster".
        out_layer: OUT_ENCODING_LAYER of the choices (test 2).
        out_word_agg: OUT_WORD_AGG of the choices (test 2).
        similarity: "dot" (the paper's, section 5.1.2; the default) or "cos" (test 2).
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
            ("segment_agg", self.segment_agg, SEGMENT_AGGS),
            ("example_agg", self.example_agg, EXAMPLE_AGGS),
        ]
        if self.test == "similarity":
            checks += [
                ("out_word_agg", self.out_word_agg or "mean", WORD_AGGS),
                ("similarity", self.similarity or DEFAULT_SIMILARITY, SIMILARITIES),
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
                similarity=s.similarity or DEFAULT_SIMILARITY,
            )
            check_layer_spec(s.out_layer)
        return _neutral(s)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def revisions(self) -> list[str]:
        """The definitions this scheme uses that geomlens revised to follow the paper.

        "activation_filter": a relu filter is the model's FFN activation (was a fixed ReLU;
        the ``+`` variants add the vector back, were a mean over active tokens).
        "integer_layer": a non-negative integer layer (0 now adds global positions; the
        number of blocks N now means after the final norm; the hash cannot know N, so every
        such spec is marked). "segment_each_example": two passages per solved example (was
        one segment per block).
        """
        s = self.validate()
        found = []
        if needs_activation(s.word_agg) or needs_activation(s.out_word_agg):
            found.append("activation_filter")
        if any(x is not None and x.isdigit() for x in (s.layer, s.out_layer)):
            found.append("integer_layer")
        if s.segment == "segment_each_example":
            found.append("segment_each_example")
        return found

    @property
    def key(self) -> str:
        """A stable 12-hex-digit hash of the canonical scheme (and its revisions, if any)."""
        data = self.validate().to_dict()
        revised = self.revisions()
        if revised:
            data["revised"] = revised
        text = json.dumps(data, sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:12]

    @property
    def label(self) -> str:
        """A short readable name: test:segment|layer|word_agg|norm|segment_agg|example_agg."""
        s = self.validate()
        short = {
            "segment_tokens": "tokens",
            "segment_sentences": "sentences",
            "segment_each_example": "each_example",
            "segment_each_block": "each_block",
            "concat_each_example": "concat_each",
            "concat_all_examples": "concat_all",
            "concat_tokens": "concat_tokens",
        }[s.segment]
        parts = [short, s.layer, s.word_agg, s.norm, s.segment_agg, s.example_agg]
        if s.test == "similarity":
            parts += [f"out={s.out_layer}", str(s.out_word_agg), str(s.similarity)]
        return ("P:" if s.test == "pyramidal" else "S:") + "|".join(parts)


def _neutral(s: Scheme) -> Scheme:
    """Fields that cannot matter set to their neutral value (so equal schemes hash equal)."""
    merge = s.segment_agg == "merge_all_segments"
    if s.segment == "concat_all_examples":  # one segment in all: nothing to aggregate
        return replace(s, segment_agg="none", example_agg="none")
    if s.segment in ONE_SEGMENT_PER_BLOCK:  # merging one vector per block = their mean
        return replace(s, segment_agg="none", example_agg="mean" if merge else s.example_agg)
    if merge:  # one vector is left: EXAMPLE_AGG has nothing to do
        return replace(s, example_agg="none")
    return s


@dataclass(frozen=True)
class LayerRef:
    """Where a layer spec reads the vectors of a model.

    Attributes:
        index: the hidden-state layer (0: the input of the first block, token vectors plus
            any global position encodings; l: the output of block l).
        embedding: "E": the model's input embedding of the tokens alone (``index`` 0).
        final_norm: the top of the stack: block N's output through the final norm.
    """

    index: int
    embedding: bool = False
    final_norm: bool = False


def check_layer_spec(value: Any) -> str:
    text = str(value)
    if text in ("E", "N", "middle"):
        return text
    try:
        int(text)
    except ValueError:
        raise GeomlensError(
            f"unknown layer {text!r} in scheme; use 0, an integer up to N, N, -1..-N, middle or E."
        ) from None
    return text


def resolve_layer(spec: str, n_layers: int) -> LayerRef:
    """A layer spec on a model of ``n_layers`` blocks (N).

    "0": the input of the first block (token vectors plus global position encodings);
    l in 1..N-1: the output of block l; N (or "N"): the top of the stack after the final
    norm; -k (1 <= k <= N): the output of block N + 1 - k before the final norm (-1: the
    final hidden activation); "middle": layer N // 2; "E": the input embedding alone.
    """
    text = check_layer_spec(spec)
    if text == "E":
        return LayerRef(0, embedding=True)
    if text == "middle":
        return LayerRef(n_layers // 2)
    value = n_layers if text == "N" else int(text)
    if value > n_layers or value < -n_layers:
        raise GeomlensError(
            f"layer {spec} is outside the model's layers: 0..{n_layers} (N = {n_layers}, "
            f"after the final norm) or -1..-{n_layers} (block outputs from the top)."
        )
    if value < 0:
        return LayerRef(n_layers + 1 + value)
    return LayerRef(value, final_norm=value == n_layers)


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
    # geomlens's reading of the paper's standard scheme (see docs/concepts.md): each solved
    # example cut into its context and completion passages, each passage encoded alone and
    # read at the top of the stack (after the final norm), its tokens averaged, kept as is.
    # (word_agg mean, norm none and example_agg none are the defaults)
    "standard": Scheme(segment="segment_each_example", layer="N", segment_agg="none"),
    "sentences_E": Scheme(segment="segment_sentences", layer="E", segment_agg="none"),
    "examples_mid": Scheme(segment="concat_each_example", layer="middle", norm="varNorm"),
    # test 2 as the paper runs it (section 5.1.2): the context and each choice compared by
    # dot product
    "similarity_dot": Scheme(
        test="similarity",
        segment="concat_all_examples",
        layer="middle",
        out_layer="middle",
        similarity="dot",
    ),
    # the same by cosine, a variant: on a model whose vectors share one massive direction
    # (SmolLM2) the choices' cosines tie and the scheme is degenerate (docs/concepts.md)
    "similarity_mid": Scheme(
        test="similarity",
        segment="concat_all_examples",
        layer="middle",
        out_layer="middle",
        similarity="cos",
    ),
}
DEFAULT_SCHEMES = ("sanity", "sentences_E", "examples_mid", "similarity_dot")


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
