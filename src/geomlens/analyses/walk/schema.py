"""The "walk" block of metrics.json, as the walk step writes it and its section and summary
read it (``WalkMetrics.of(metrics)``). Arrays (similarity maps, ranks per position) are in
safetensors side files, not here. Layers are named by text ("0", ..., "final_norm")."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Self

from geomlens.analyses.common.block import Block, nullable


@dataclass(frozen=True, kw_only=True)
class TextRecord(Block):
    """The text walked (its hash, not the text: that is walk_text.txt)."""

    sha256: str
    n_tokens: int
    n_sections: int | None = nullable()
    """Sections marked in the text (null when it has none)."""
    shortened: str | None = None
    """Why the packaged text was cut to the model's positions (absent: walked whole)."""


@dataclass(frozen=True, kw_only=True)
class SimilarityLayer(Block):
    """One layer's similarity between positions (cosines, unitless, in [-1, 1])."""

    layer: str
    mean_cos: float | None = None
    mean_cos_adjacent: float | None = None
    """Mean cosine of neighbouring positions."""
    mean_cos_skip_first: float | None = None
    section_contrast: float | None = None
    """Mean cosine within sections minus between them."""
    mean_norm: float | None = None
    """Mean hidden-state norm (hidden-state units)."""


@dataclass(frozen=True, kw_only=True)
class Similarity(Block):
    layers: list[SimilarityLayer]
    n_positions: int | None = None


@dataclass(frozen=True, kw_only=True)
class WalkSpace(Block):
    """The encoding walk under one similarity ("cos" or "dot"); layers are layer indices
    (medians over positions), fractions are shares of positions (unitless)."""

    leave_layer_median: float | None = None
    """Median first layer at which a position's own token leaves its top-k."""
    arrive_layer_median: float | None = None
    """Median first layer at which the next token enters the top-k."""
    frac_never_leave: float
    frac_never_arrive: float | None = None
    frac_never_leave_ci: dict[str, Any] | None = None
    """Block-bootstrap interval of ``frac_never_leave`` (absent in older runs)."""
    frac_never_arrive_ci: dict[str, Any] | None = None


@dataclass(frozen=True, kw_only=True)
class WalkControl(Block):
    """The encoding walk of a control that cannot carry the walk claims: the same model on
    the same tokens shuffled at token level (``walks.shuffled_ids``), read as the walk
    itself is (cosine)."""

    kind: str
    """What the control is, in words."""
    seed: int
    """Seeds the shuffle."""
    frac_never_leave: float
    frac_never_leave_ci: dict[str, Any] | None = None
    """Its block-bootstrap interval, as the walk's own."""


@dataclass(frozen=True, kw_only=True)
class Encoding(Block):
    """Each position's walk among the token embeddings along the layers."""

    k: int
    """Size of the neighbourhood (top-k nearest tokens)."""
    cos: WalkSpace
    dot: WalkSpace | None = None
    layers: list[dict[str, Any]] | None = None
    """Per layer: shares in the top-k and median ranks of the own and next token."""
    n_positions: int | None = None
    control: WalkControl | None = None
    """The same statistic on the shuffled text (absent in older runs and for stacks walked
    without one)."""


@dataclass(frozen=True, kw_only=True)
class Kernels(Block):
    """Attention as a function of the offset between positions (shares of heads,
    unitless)."""

    negative_self_bias_fraction: float | None = nullable()
    """Share of heads attending less to their own position than to others (null where the
    model's mixing is not modelled: ``not_applicable`` says why, per layer)."""
    windows_used: str | None = None
    not_applicable: dict[str, Any] | None = None
    bias_table: dict[str, Any] | None = None
    """The learned relative-position bias table's far-offset numbers (T5-style models)."""
    far_position: dict[str, Any] | None = None
    negative_self_bias_fraction_logits: float | None = None
    """The same share read on the attention logits instead of the weights."""
    negative_self_bias_fraction_per_layer: list[float] | None = None
    negative_self_bias_fraction_per_layer_logits: list[float] | None = None
    negative_self_bias_heads: list[list[int]] | None = None
    """[layer, head] of each head with negative self-bias."""
    negative_self_bias_heads_logits: list[list[int]] | None = None
    mean_attention_at_offset_0_per_layer: list[float] | None = None
    """Per layer, the mean attention weight on the own position (a share, in [0, 1])."""
    causal: bool | None = None
    length: int | None = None
    """Tokens per window measured."""
    n_windows: int | None = None
    query_start: int | None = None
    """First query position averaged over."""
    offsets_saved: list[int] | None = None
    position_bias: list[dict[str, Any]] | None = None
    """Learned position-bias kernels (models that have them)."""


@dataclass(frozen=True, kw_only=True)
class Refactor(Block):
    """The per-head refactoring O = sum_h A_h X W_vo,h against the attention output."""

    max_rel_err: float | None = nullable()
    """Largest relative error (unitless; null where the model's mixing is not modelled)."""
    not_applicable: dict[str, Any] | None = None
    layers: list[dict[str, Any]] | None = None
    n_tokens: int | None = None


@dataclass(frozen=True, kw_only=True)
class Decoding(Block):
    """One decoding walk (greedy or sampled)."""

    text: str
    """The generated text."""
    mode: str | None = None
    tokens: list[int] | None = None
    logprob: list[float] | None = None
    """Per generated token, its log-probability (nats)."""
    mean_logprob: float | None = None
    top1_cos_is_chosen: float | None = None
    prompt_length: int | None = None
    temperature: float | None = None
    seed: int | None = nullable()


@dataclass(frozen=True, kw_only=True)
class DecoderStack(Block):
    """An encoder-decoder's decoder stack, teacher-forced on the text."""

    encoding: Encoding
    kernels: Kernels
    cross_attention: Kernels
    """Offsets i - j between decoder and encoder positions."""
    decoding: dict[str, Decoding] | None = nullable()


@dataclass(frozen=True, kw_only=True)
class WalkMetrics(Block):
    """The "walk" block: Singh's movement through embedding space."""

    text: TextRecord
    layer_names: list[str]
    readout: str
    similarity: Similarity
    encoding: Encoding | None = None
    """Absent where ``not_available`` says why (the readout is not the model's)."""
    decoding: dict[str, Decoding] | None = nullable()
    """Per mode, the decoding walk (null when none was run, or on the decoder below)."""
    kernels: Kernels
    refactor: Refactor
    stack: str | None = None
    """"encoder" for an encoder-decoder (whose decoder stack is ``decoder``)."""
    decoder: DecoderStack | None = None
    not_available: str | None = None
    """Why the encoding and decoding walks were not run (one sentence: "not available:
    the readout is not available for this model: ..."); absent where they were."""

    @classmethod
    def of(cls, metrics: dict[str, Any]) -> Self | None:
        """The run's walk block (None when it has none)."""
        found = metrics.get("walk")
        return cls.from_dict(found) if found else None

    @property
    def decodings(self) -> dict[str, Decoding]:
        """The decoding walks (on an encoder-decoder, its decoder stack's)."""
        return self.decoding or (self.decoder.decoding if self.decoder else None) or {}


@dataclass(frozen=True, kw_only=True)
class BootInterval(Block):
    """A block-bootstrap interval of a fraction (neighbouring positions drawn together)."""

    low: float
    high: float
    method: str
    n_boot: int
    """Draws of the bootstrap."""


@dataclass(frozen=True, kw_only=True)
class NeverLeave(Block):
    """What the walk claim reads of one similarity's walk (each field optional)."""

    frac_never_leave: float | None = None
    frac_never_leave_ci: BootInterval | None = None
    """Absent in runs made before the block bootstrap."""


@dataclass(frozen=True, kw_only=True)
class EncodingView(Block):
    """What the walk claim reads of "encoding"."""

    cos: NeverLeave | None = None
    n_positions: int | None = None
    control: WalkControl | None = None


@dataclass(frozen=True, kw_only=True)
class BiasTable(Block):
    """A T5-style learned relative-bias table's own readings (shares of heads, unitless)."""

    negative_self_bias_fraction: float | None = None
    """Share of heads whose bias at offset 0 is below its mean over offsets 1-4."""
    far_amplification_fraction: float | None = None
    """Share of heads whose mean bias over offsets 32-63 exceeds that over 8-31."""
    far_amplification_reason: str | None = None
    """Why the far share was not measured (a table too short)."""


@dataclass(frozen=True, kw_only=True)
class KernelsView(Block):
    """What the self-bias and bias-table claims read of "kernels"."""

    negative_self_bias_fraction: float | None = None
    negative_self_bias_fraction_per_layer: list[float] | None = None
    bias_table: BiasTable | None = None


@dataclass(frozen=True, kw_only=True)
class WalkClaimsView(Block):
    """What Singh's movement claims read of the "walk" block or of its decoder stack
    (``WalkClaimsView.of(metrics)``), each field optional so a partly written or older
    block still reads."""

    encoding: EncodingView | None = None
    kernels: KernelsView | None = None
    stack: str | None = None
    decoder: WalkClaimsView | None = None
    not_available: str | None = None
    """An encoder-decoder's decoder stack."""

    @classmethod
    def of(cls, metrics: dict[str, Any]) -> Self:
        """The run's walk block as the claims read it (empty when it has none)."""
        return cls.from_dict(metrics.get("walk") or {})
