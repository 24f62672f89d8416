"""The "sphere" block of metrics.json, as the sphere step writes it and its section, summary
and claims read it (``SphereMetrics.of(metrics)``). The token tables behind the head probe
and the FFN sub-updates are in sphere_heads.json and sphere_ffn.json, not here."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Self

from geomlens.analyses.common.block import Block, nullable


@dataclass(frozen=True, kw_only=True)
class Identity(Block):
    """The layer-norm identity: each norm rebuilt as projection, sphere, gain and bias."""

    max_rel_err: float | None = nullable()
    """Largest |norm(x) - construction(x)| / |construction(x)| over vectors (unitless);
    null for a model with no norm read (``not_applicable`` says so)."""
    not_applicable: str | None = None
    """Why the identity does not apply ("not applicable: the model has no layer norms
    geomlens can read"); absent where it does."""
    definition: str | None = None
    dtype: str | None = None
    n_windows: int | None = None
    norms: list[dict[str, Any]] | None = None
    """Per norm module: name, kind, d, n_vectors, max_rel_err."""


@dataclass(frozen=True, kw_only=True)
class TokenList(Block):
    """The tokens of highest and lowest score under one scoring of the vocabulary."""

    top: list[str]
    top_ids: list[int] | None = None
    top_scores: list[float] | None = None
    """Scores in the scoring's units (a norm, or a logit)."""
    bottom: list[str] | None = None
    bottom_ids: list[int] | None = None
    bottom_scores: list[float] | None = None


@dataclass(frozen=True, kw_only=True)
class TopTokens(Block):
    """The vocabulary ranked by embedding norm and by readout score with and without the
    final gamma/beta."""

    norm: TokenList
    """Ranked by |W_E[i]|."""
    plain: TokenList
    """Ranked by the readout without gamma/beta (logits)."""
    affine: TokenList
    """Ranked by the readout with gamma/beta (logits)."""
    mean_freq_rank: dict[str, float | None]
    """Mean corpus-frequency rank (1 = most frequent) of each list's top tokens, and of the
    vocabulary ("vocab_mean")."""
    k: int | None = None
    """Tokens in each list."""
    score: dict[str, str] | None = None
    """Each scoring in words."""
    readout_norm: str | None = None
    plain_words: TokenList | None = None
    """The top whole words without gamma/beta (absent in older runs, or when the vocabulary
    has too few whole words)."""
    affine_words: TokenList | None = None
    """The top whole words with gamma/beta."""
    readout_has_beta: bool | None = None
    """Whether the final norm has a beta (an RMSNorm has gamma only)."""
    zipf_compared: str | None = None
    """Which lists the Zipf numbers read, in words."""
    mean_english_zipf: dict[str, float | None] | None = None
    """Mean Zipf frequency (log10 per billion words) of each list's top tokens."""
    english_zipf_shift: dict[str, Any] | None = None
    """Zipf difference affine - plain with its bootstrap interval."""


@dataclass(frozen=True, kw_only=True)
class Trajectory(Block):
    """The logit lens of the prompt: each layer's top tokens at each position."""

    tokens: list[str]
    """The prompt's tokens."""
    ids: list[int] | None = None
    first_top1: list[int | None]
    """Per position, the first layer whose top-1 is the final prediction (None: never)."""
    layers: list[int]
    top5: list[list[str]]
    """[layer]: the top-5 tokens at the last position."""
    prediction: str
    """The model's top-1 token after the prompt."""
    prediction_id: int | None = None
    next_rank: list[list[Any]] | None = None
    readout: str | None = None
    umap: dict[str, Any] | None = nullable()
    """The trajectory map's record (its file, metric, seed, n_tokens); null when not drawn."""


@dataclass(frozen=True, kw_only=True)
class HeadRow(Block):
    """One head probed with common nouns."""

    layer: int
    head: int
    self_fraction: float | None = None
    """Share of nouns whose query picks their own key first (unitless, in [0, 1])."""
    mean_self_rank: float | None = None
    """Mean rank of a noun's own key among the nouns' keys (0 = first)."""


@dataclass(frozen=True, kw_only=True)
class HeadProbe(Block):
    """Heads probed with common nouns (their token tables in sphere_heads.json)."""

    heads: list[HeadRow]
    layers: list[int] | None = None
    n_nouns: int | None = None
    n_dropped_multi_token: int | None = None
    self_fraction: list[list[float]] | None = None
    """[layer][head]: as ``HeadRow.self_fraction``."""
    self_fraction_ci: list[Any] | None = None
    mean_self_rank: list[list[float]] | None = None
    mean_self_rank_ci: list[Any] | None = None
    intervals: str | None = None
    positions: str | None = None


@dataclass(frozen=True, kw_only=True)
class FfnRow(Block):
    """One FFN value row: its norm and the tokens it promotes most."""

    row: int
    norm: float | None = None
    """|W_out[row]| (hidden-state units)."""
    promoted: list[str] | None = None
    layer: int | None = None
    coef: float | None = None
    """The row's activation on the prompt's last position."""
    contribution: float | None = None
    """coef times the row's push on the target's logit (logits)."""


@dataclass(frozen=True, kw_only=True)
class FfnPrompt(Block):
    """The sub-updates that push the prompt's prediction most."""

    target: str
    top: list[FfnRow]
    attribution: str | None = None
    target_id: int | None = None
    scale: float | None = None
    per_layer_total: dict[str, float] | None = None
    """Per layer, the summed push of its sub-updates on the target (logits)."""


@dataclass(frozen=True, kw_only=True)
class Ffn(Block):
    """FFN sub-updates of a few layers."""

    layers: list[int] | None = None
    strongest: dict[str, list[FfnRow]] | None = None
    """Per layer (as text), its value rows of largest norm."""
    prompt: FfnPrompt | None = None


@dataclass(frozen=True, kw_only=True)
class SphereMetrics(Block):
    """The "sphere" block: Molina's layer-norm and hypersphere analyses."""

    readout: str
    """How hidden states were read out (the final norm, then W_U)."""
    identity: Identity
    top_tokens: TopTokens | None = None
    """Absent where ``not_available`` says why."""
    trajectory: Trajectory | None = None
    """Absent where ``not_available`` says why."""
    prompt: str
    """The logit lens's prompt."""
    placement: str | None = None
    """Where the blocks' norms sit ("pre" or "post")."""
    layout: str | None = None
    norm_kind: str | None = None
    """"layernorm" or "rmsnorm" (absent in older runs: read as layernorm)."""
    orientation: dict[str, Any] | None = None
    """Per norm input: norms, all-ones share and output radius; the embeddings' gains."""
    heads: HeadProbe | None = None
    ffn: Ffn | None = None
    not_available: dict[str, str] | None = None
    """Part ("identity", "top_tokens", "trajectory") -> the one sentence it says instead
    of its numbers (a model with no norm read, or whose readout is not its own)."""

    @classmethod
    def of(cls, metrics: dict[str, Any]) -> Self | None:
        """The run's sphere block (None when it has none)."""
        found = metrics.get("sphere")
        return cls.from_dict(found) if found else None


@dataclass(frozen=True, kw_only=True)
class ZipfShift(Block):
    """Mean Zipf frequency with gamma/beta minus without, with its bootstrap interval."""

    value: float
    low: float
    high: float
    method: str
    """How the interval was drawn (e.g. "bootstrap")."""
    n_boot: int
    """Draws of the bootstrap."""


@dataclass(frozen=True, kw_only=True)
class MeanZipf(Block):
    """Mean Zipf frequency (log10 per billion words) of each list's top tokens."""

    affine: float | None = None
    plain: float | None = None
    vocab_mean: float | None = None
    """Over the whole vocabulary."""


@dataclass(frozen=True, kw_only=True)
class GammaBetaView(Block):
    """What Molina's gamma/beta claim reads of "top_tokens" (every field optional, so a
    partly written or older block still reads)."""

    k: int | None = None
    affine: TokenList | None = None
    plain: TokenList | None = None
    affine_words: TokenList | None = None
    """The top whole words with gamma/beta (absent in older runs, or when the vocabulary
    has too few whole words): what the claim compares when present."""
    plain_words: TokenList | None = None
    readout_norm: str | None = None
    readout_has_beta: bool | None = None
    """Whether the final norm has a beta (absent in older runs)."""
    zipf_compared: str | None = None
    """Which lists the Zipf numbers read, in words."""
    mean_english_zipf: MeanZipf | None = None
    english_zipf_shift: ZipfShift | None = None


@dataclass(frozen=True, kw_only=True)
class SphereClaimsView(Block):
    """What Molina's claims read of the "sphere" block (``SphereClaimsView.of(metrics)``):
    the identity's error and the top tokens, each optional."""

    identity: Identity | None = None
    top_tokens: GammaBetaView | None = None
    not_available: dict[str, str] | None = None

    @classmethod
    def of(cls, metrics: dict[str, Any]) -> Self:
        """The run's sphere block as the claims read it (empty when it has none)."""
        return cls.from_dict(metrics.get("sphere") or {})
