"""Calibration of the position claims' guards on planted data (docs/claims.md).

For each planted setting (rank, low-frequency share) and noise share, draws corpora
(``analyses.decomposition.planted``: 100 positions, d = 96, 128 contexts in 16 groups,
half of the noise energy in 4 directions), computes the noise-corrected numbers with their
half-sample intervals as a run does, judges them with the claims, and prints per
estimator the bias, the coverage of the 95% interval and the rates of wrong and
inconclusive verdicts.

    python benchmarks/planted_guards.py [--draws 40] [--resamples 30]
"""

from __future__ import annotations

import argparse
import time

from threadpoolctl import threadpool_limits

from geomlens.analyses.decomposition import claims, planted

SETTINGS = ((8, 0.8), (8, 0.3), (30, 0.7))
"""(rank, low-frequency share) of the planted positional parts."""

SHARES = (0.1, 0.2, 0.35, 0.5, 0.65, 0.8)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draws", type=int, default=40, help="corpora per cell")
    parser.add_argument("--resamples", type=int, default=30, help="half-samples per corpus")
    args = parser.parse_args()
    print(
        "| rank | low-freq truth | noise share | low-freq bias | low-freq coverage | "
        "low-freq wrong / inconclusive | r bias | rank95 (K+) | min stable rank | "
        "rank wrong / inconclusive |"
    )
    print("| --- " * 10 + "|")
    start = time.time()
    with threadpool_limits(limits=1, user_api="blas"):
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


if __name__ == "__main__":
    main()
