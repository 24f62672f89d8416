"""Calibration of the position claims' guards on planted data (docs/claims.md).

For each planted setting (rank, low-frequency share) and noise share, draws corpora
(``analyses.decomposition.planted``: 100 positions, d = 96, 128 contexts in 16 groups,
half of the noise energy in 4 directions), computes the noise-corrected numbers with their
half-sample intervals as a run does, judges them with the claims, and prints per
estimator the bias, the coverage of the 95% interval and the rates of wrong and
inconclusive verdicts. A rank table plants direction energies with flat, 1/k and 1/k^2
tails at noise shares under the rank claim's 10% noise guard, where the count decides, and
gives the rank claim's wrong and inconclusive rates with and without the guard that asks
the spectrum to end above the noise floor. A third table gives, per noise share, the least
share of a planted W_QK low-rank part (wholly inside the positional directions) read
through the noisy positional basis (``analyses.attention.planted``: SmolLM2's 127
positions x 576 x 126 contexts), the dilution the W_QK positional claim allows for.

    python benchmarks/planted_guards.py [--draws 40] [--resamples 30] [--qk-draws 20]
        [--rank-draws 40] [--only rank]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
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
    parser.add_argument("--rank-draws", type=int, default=40, help="corpora per rank cell")
    parser.add_argument("--only", choices=("rank",), help="print that table alone")
    args = parser.parse_args()
    with threadpool_limits(limits=1, user_api="blas"):
        if args.only != "rank":
            position_table(args)
        rank_table(args.rank_draws)
        if args.only != "rank":
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


RANK_SETTINGS = (8, 15, 25, 30)
"""Planted ranks of the rank table: two the claim holds for, two it does not."""

RANK_SHARES = (0.02, 0.035, 0.05, 0.06)
"""Noise shares of the rank table: where the count decides (under the 10% noise guard, and
a floor under 1/80 of the energy, which in this family is a share under about 0.063)."""


def rank_table(draws: int) -> None:
    """The rank claim on planted parts whose direction energies are flat, or fall as 1/k or
    1/k^2: mean count, median margin (weakest counted eigenvalue over the floor), and the
    wrong and inconclusive rates with all guards and without the gap guard."""
    print(
        "\n| tail | rank | noise share | mean r | median floor | median margin | "
        "wrong / inconclusive | without the gap guard: wrong / inconclusive |"
    )
    print("| --- " * 8 + "|")
    start = time.time()
    for tail, decay in planted.TAILS.items():
        for rank in RANK_SETTINGS:
            for share in RANK_SHARES:
                found = [
                    planted.rank_draw(
                        planted.plant(i, share, rank=rank, low_share=0.7, length=100, decay=decay)
                    )
                    for i in range(draws)
                ]
                kept = [f for f in found if f is not None]
                holds = rank <= claims.LOW_RANK
                n = len(kept)

                def rates(verdicts: list[str], holds: bool = holds, n: int = n) -> str:
                    wrong = sum(planted.wrong(v, holds) for v in verdicts) / n
                    open_ = sum(v == "inconclusive" for v in verdicts) / n
                    return f"{wrong:.2f} / {open_:.2f}"

                margins = [f.margin for f in kept if f.margin is not None]
                floors = [f.floor for f in kept if f.floor is not None]
                print(
                    f"| {tail} | {rank} | {share:g} | "
                    f"{sum(f.rank for f in kept) / n:.1f} | "
                    f"{float(np.median(floors)):.4f} | {float(np.median(margins)):.2f} | "
                    f"{rates([f.verdict for f in kept])} | "
                    f"{rates([f.verdict_without_gap for f in kept])} |",
                    flush=True,
                )
    print(f"({draws} corpora per row; {time.time() - start:.0f} s)")


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
