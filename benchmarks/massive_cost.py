"""What the massive-activation analysis adds to the capture (its ``MassiveTap`` fed every
batch), and what it finds on the model, in one run.

    python benchmarks/massive_cost.py [--model smollm2-135m] [--contexts 32] [--length 128]
        [--batch-size 8] [--repeats 3] [--threads 1] [--figure docs/figures/massive_glance.png]
"""

from __future__ import annotations

from hidden_tap_cost import arguments, compare, draw

from geomlens.analyses.massive.compute import MassiveTap
from geomlens.analyses.massive.figures import glance_figure
from geomlens.analyses.massive.step import massive_metrics


def main() -> None:
    args = arguments(__doc__ or "")
    tap, view, windows = compare("massive", MassiveTap, args)
    found = massive_metrics(tap, windows, view, None)
    for r in found["layers"]:
        top = r["largest"][0]
        print(
            f"layer {r['layer']:2d}: median {r['median_abs']:.3g}, top-1 {r['top1_abs']:.4g}, "
            f"ratio {r['top1_over_median']:.4g}, massive {r['massive']}, largest dim "
            f"{top['dim']} at position {top['position']} ({top['text']!r}), "
            f"{len(r['massive_dims'])} massive dims"
        )
    print("profile:", found["profile"])
    print("peak:", found["peak"])
    print("carriers:", found["carriers"])
    draw(glance_figure, found["layers"], view.name, args.figure)


if __name__ == "__main__":
    main()
