"""The "attention" and "induction" blocks of metrics.json, as the attention step writes them
and its section, summary and claims read them (``AttentionMetrics.read(metrics)``).

A block the model could not measure holds only ``unsupported`` (one sentence why)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Self

from geomlens.analyses.common.block import Block, nullable


@dataclass(frozen=True, kw_only=True)
class LogitParts(Block):
    """One block's attention logits split into position/context parts (``parts.py``)."""

    layer: int
    """The block (its input is hidden layer ``layer``)."""
    parts: list[str]
    """The part names, in the order of each row below (pos_pos, pos_ctx, ...)."""
    share: list[list[float | None]]
    """[head][part]: var(part) over the sum of var(part) over parts (unitless, in [0, 1])."""
    share_cov: list[list[float | None]]
    """[head][part]: the part's share with its covariances with the others (unitless)."""
    share_centred: list[list[float | None]]
    """[head][part]: ``share`` of the logits centred per query row (unitless)."""
    logit_var: list[float]
    """[head]: variance of the real logits (logit units squared)."""
    max_rel_error: float | None
    """Largest relative error of the parts' sum against the real logits (unitless)."""
    causal: bool
    skip_first: bool
    """Whether the positional mean was taken without position 0."""
    n_contexts: int
    n_positions: int
    context: str = "cvec"
    """The context part used: "cvec" (the context vector) or "ctx" (the whole residue)."""


@dataclass(frozen=True, kw_only=True)
class QKHead(Block):
    """One head's W_QK in the top positional directions (``qk_basis.py``); residuals are
    Frobenius-norm fractions of the matrix fitted (unitless, in [0, 1])."""

    head: int
    residual: float
    """Residual of a low-rank plus diagonal fit of W_QK in the basis."""
    rank: int | None = None
    """Rank of this head's low-rank part: ScreeNOT's count of W_QK's singular values above
    its threshold (absent in older runs, whose heads all took ``QKBasis.rank``)."""
    baseline_residual: float
    """The same residual for a random basis of the same size."""
    share_in_basis: float
    """Share of W_QK's squared norm inside the positional basis."""
    whole_residual: float | None = None
    """Residual of the low-rank plus diagonal fit of the whole W_QK (absent in older runs)."""
    whole_baseline_residual: float | None = None
    whole_low_rank_in_basis: float | None = None
    whole_baseline_low_rank_in_basis: float | None = None
    whole_low_rank_share: float | None = None
    """||L||_F^2 / ||W_QK||_F^2 of the whole fit's low-rank part L (absent in older runs)."""


LEGACY_RANK = 2
"""The rank every head's fit took in runs made before each head's rank was read from its
spectrum (written as the block's ``rank``)."""


@dataclass(frozen=True, kw_only=True)
class QKBasis(Block):
    """One block's W_QK in the basis of its top ``k`` positional directions."""

    layer: int
    k: int
    """Directions in the basis (pos_rank95 without position 0, clipped)."""
    rank: int | None = nullable()
    """The rank every head's fit took (older runs: 2); null: each head's own (``QKHead.rank``)."""
    rotary_offset: int | None = None
    """Offset i - j of the rotation used for rotary models (0: none; absent: not written)."""
    heads: list[QKHead]

    def head_rank(self, head: QKHead) -> int:
        """The rank of one head's fits: its own, else the block's (older runs: 2)."""
        if head.rank is not None:
            return head.rank
        return self.rank if self.rank is not None else LEGACY_RANK


@dataclass(frozen=True, kw_only=True)
class AttentionMetrics(Block):
    """The "attention" block: logit parts of a few blocks and W_QK in the positional basis."""

    unsupported: str | None = None
    """Why nothing was measured (then every other field is None)."""
    n_contexts: int | None = None
    """Windows whose logits were split."""
    blocks: list[int] | None = None
    """The blocks whose logits were split (first, middle, last captured)."""
    parts: list[LogitParts] | None = None
    """Per block, the split with the context vector as context part."""
    parts_ctx: list[LogitParts] | None = None
    """Per block, the split with the whole residue as context part."""
    qk_basis: list[QKBasis] | None = None
    """W_QK per block: every block whose input was captured."""

    @classmethod
    def of(cls, metrics: dict[str, Any]) -> Self | None:
        """The run's attention block (None when it has none)."""
        return cls.read(metrics, "attention")


@dataclass(frozen=True, kw_only=True)
class InductionSplit(Block):
    """Where one chosen head attends from the second copy of a token (shares of its
    attention, unitless, summing to 1 over same_token, neighbours, induction, other)."""

    layer: int
    head: int
    score: float
    """Attention to the token after the first copy (the induction score)."""
    induction: float
    same_token: float
    neighbours: float
    neighbours_local: float
    neighbours_earlier: float
    other: float


@dataclass(frozen=True, kw_only=True)
class InductionMetrics(Block):
    """The "induction" block: induction scores on repeated random tokens."""

    unsupported: str | None = None
    """Why nothing was measured (an encoder; then every other field is None)."""
    scores: list[list[float]] | None = None
    """[layer][head]: mean induction score (attention share, in [0, 1])."""
    n: int | None = None
    """Tokens in each half of a repeated sequence."""
    batch: int | None = None
    """Sequences scored."""
    threshold: float | None = None
    """Score above which a head counts as an induction head."""
    found: list[list[int]] | None = None
    """[layer, head] of each head above ``threshold``, best first."""
    top: list[list[Any]] | None = None
    """[layer, head, score] of the best heads."""
    splits: list[InductionSplit] | None = None
    seed: int | None = None

    @classmethod
    def of(cls, metrics: dict[str, Any]) -> Self | None:
        """The run's induction block (None when it has none)."""
        return cls.read(metrics, "induction")
