"""Calibration of the position claims' guards on planted data (docs/claims.md).

For each planted setting (rank, low-frequency share) and noise share, draws corpora
(``analyses.decomposition.planted``: 100 positions, d = 96, 128 contexts in 16 groups,
half of the noise energy in 4 directions), computes the noise-corrected numbers with their
half-sample intervals as a run does, judges them with the claims, and prints per
estimator the bias, the coverage of the 95% interval and the rates of wrong and
inconclusive verdicts. A second table gives, per noise share, the least share of a planted
W_QK low-rank part (wholly inside the positional directions) read through the noisy
positional basis (``analyses.attention.planted``: SmolLM2's 127 positions x 576 x 126
contexts), the dilution the W_QK positional claim allows for.

    python benchmarks/planted_guards.py [--draws 40] [--resamples 30] [--qk-draws 20]
"""

from __future__ import annotations

import argparse
import time

from threadpoolctl import threadpool_limits

from geomlens.analyses.attention import claims as qk_claims
from geomlens.analyses.attention import planted as qk_planted
from geomlens.analyses.decomposition import claims, planted

SETTINGS = ((8, 0.8), (8, 0.3), (30, 0.7))
"""(rank, low-frequency share) of the planted positional parts."""

SHARES = (0.1, 0.2, 0.35, 0.5, 0.65, 0.8)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draws", type=int, default=40, help="corpora per cell")
    parser.add_argument("--resamples", type=int, default=30, help="half-samples per corpus")
    parser.add_argument("--qk-draws", type=int, default=20, help="corpora per W_QK cell")
    parser.add_argument(
        "--coherence-draws", type=int, default=10, help="corpora per coherence cell"
    )
    args = parser.parse_args()
    with threadpool_limits(limits=1, user_api="blas"):
        position_table(args)
        dilution_table(args.qk_draws)
        coherence_table(args.coherence_draws, args.resamples)


def position_table(args: argparse.Namespace) -> None:
    """The position claims' estimators: bias, coverage, wrong and inconclusive verdicts."""
    print(
        "| rank | low-freq truth | noise share | low-freq bias | low-freq coverage | "
        "low-freq wrong / inconclusive | r bias | rank95 (K+) | min stable rank | "
        "rank wrong / inconclusive |"
    )
    print("| --- " * 10 + "|")
    start = time.time()
    for rank, low in SETTINGS:
        for share in SHARES:
            draws = [
                planted.judge_corpus(
                    planted.plant(i, share, rank=rank, low_share=low, length=100),
                    args.resamples,
                )
                for i in range(args.draws)
            ]
            row = planted.summarise([d for d in draws if d is not None], 0.5, claims.LOW_RANK)
            print(
                f"| {rank} | {row['low_freq_truth']:.2f} | {row['share']:.2f} | "
                f"{row['low_freq_bias']:+.3f} | {row['low_freq_coverage']:.2f} | "
                f"{row['low_freq_wrong']:.2f} / {row['low_freq_inconclusive']:.2f} | "
                f"{row['rank_bias']:+.1f} | {row['rank95_mean']:.1f} | "
                f"{row['stable_rank_min']:.2f} | "
                f"{row['rank_wrong']:.2f} / {row['rank_inconclusive']:.2f} |",
                flush=True,
            )
    print(
        f"({args.draws} corpora per row, {args.resamples} half-samples each; "
        f"{time.time() - start:.0f} s)"
    )


QK_SHARES = (0.1, 0.35, 0.5, 0.65)
"""Noise shares of the W_QK dilution table (the calibration's range)."""


def dilution_table(draws: int) -> None:
    """The least (and mean) share a planted low-rank part wholly inside the positional
    directions keeps when read through the noisy basis."""
    print(
        "\n| noise in its strong directions | k | rank | low-freq share | "
        + " | ".join(f"noise {s:g}: least (mean)" for s in QK_SHARES)
        + " |"
    )
    print("| --- " * (4 + len(QK_SHARES)) + "|")
    least = 1.0
    for anisotropy in (planted.ANISOTROPY, 0.9):
        for k in (20, 10):
            for rank, low in ((8, 0.8), (8, 0.3), (30, 0.7)):
                cells = [qk_planted.dilution(s, rank, low, k, draws, anisotropy) for s in QK_SHARES]
                least = min(least, *(c[0] for c in cells))
                shown = " | ".join(f"{c[0]:.2f} ({c[1]:.2f})" for c in cells)
                print(f"| {anisotropy:g} | {k} | {rank} | {low:g} | {shown} |", flush=True)
    print(
        f"(least over the table {least:.2f}; the claim allows for {qk_claims.DILUTION:g}; "
        f"{draws} corpora per cell)"
    )


if __name__ == "__main__":
    main()


COHERENCE_SHARES = (0.05, 0.1, 0.2, 0.35)
"""Noise shares of the coherence table."""


def coherence_table(draws: int, resamples: int) -> None:
    """The noise-removed mutual coherence (a multiple of the random level) against the
    planted one, with context vectors sharing the noise's strong directions, at
    SmolLM2's shape: the bias that keeps the coherence claim's noise guard."""
    print(
        "\n| P's directions in the context vectors | noise share | planted | estimated | "
        "bias | coverage |"
    )
    print("| --- " * 6 + "|")
    for alignment in (0.0, 0.25, 0.5):
        for share in COHERENCE_SHARES:
            rows = [
                planted.coherence_ratio(
                    planted.plant(i, share, length=127, d=576, n_contexts=126, alignment=alignment),
                    resamples,
                )
                for i in range(draws)
            ]
            kept = [r for r in rows if r is not None]
            truth = sum(r[0] for r in kept) / len(kept)
            found = sum(r[1] for r in kept) / len(kept)
            hits = [lo <= t <= hi for t, _, (lo, hi) in kept if lo is not None]
            cover = sum(hits) / len(hits) if hits else float("nan")
            print(
                f"| {alignment:g} | {share:g} | {truth:.2f} | {found:.2f} | "
                f"{found - truth:+.2f} | {cover:.2f} |",
                flush=True,
            )
    print(f"({draws} corpora per row, {resamples} half-samples each)")
