"""What the anisotropy analysis adds to the capture (its ``AnisotropyTap`` fed every batch),
and what it finds on the model, in one run.

    python benchmarks/anisotropy_cost.py [--model smollm2-135m] [--contexts 32]
        [--length 128] [--batch-size 8] [--repeats 3] [--threads 1]
        [--figure docs/figures/anisotropy_glance.png]
"""

from __future__ import annotations

from hidden_tap_cost import arguments, compare, draw

from geomlens.analyses.anisotropy.compute import AnisotropyTap
from geomlens.analyses.anisotropy.figures import glance_figure
from geomlens.analyses.anisotropy.step import anisotropy_metrics


def main() -> None:
    args = arguments(__doc__ or "")
    tap, view, _ = compare("anisotropy", AnisotropyTap, args)
    found = anisotropy_metrics(tap)
    for r in found["layers"]:
        dims = ", ".join(f"{d['dim']}:{d['cc']:.3f}" for d in r["top_dims"][:3])
        print(
            f"layer {r['layer']:2d}: E[cos] {r['pair_cosine']:.3f}, top-3 share "
            f"{r['top3_share']:.2f} ({dims}), standardised {r['standardised_cosine']:.3f}"
        )
    keys = ("top3_share_median", "top3_share_low", "top3_share_high")
    print({k: found[k] for k in (*keys, "standardised_ratio_median", "layers_judged")})
    draw(glance_figure, found["layers"], view.name, args.figure)


if __name__ == "__main__":
    main()
