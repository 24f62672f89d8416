"""The layer norm and hypersphere section (Molina): identity, orientation, tokens, heads."""

from __future__ import annotations

from geomlens.io.runfolder import Run
from geomlens.report.html import readings, table
from geomlens.report.section import Section


def sphere_section(run: Run) -> str:
    s, folder = run.metrics.get("sphere"), run.path
    if not s:
        return readings(["Not computed in this run."])
    identity, ranks = s["identity"], s["top_tokens"]["mean_freq_rank"]
    traj = s["trajectory"]
    lines = [
        f"Every layer norm equals projection onto the plane orthogonal to the all-ones vector "
        f"(LayerNorm) then scaling onto the sphere of radius sqrt(d), up to a relative error of "
        f"{identity['max_rel_err']:.1e}.",
        f"Top tokens by readout score have mean corpus-frequency rank {ranks['affine']:g} with "
        f"gamma/beta and {ranks['plain']:g} without (vocabulary mean {ranks['vocab_mean']:g}).",
        f"The prompt {s['prompt']!r} is read as {traj['prediction']!r} at the last layer.",
    ]
    top = s["top_tokens"]
    token_rows = [
        [i + 1, a, b, c]
        for i, (a, b, c) in enumerate(
            zip(top["norm"]["top"], top["plain"]["top"], top["affine"]["top"], strict=False)
        )
    ]
    lens_rows = [
        [layer, " | ".join(map(str, t5[-1] if t5 and isinstance(t5[0], list) else t5))]
        for layer, t5 in zip(traj["layers"], traj["top5"], strict=False)
    ]
    return "".join(
        [
            readings(lines),
            table(
                ["#", "by norm", "readout, no gamma/beta", "readout with gamma/beta"],
                token_rows,
                "Top tokens",
            ),
            table(["layer", "top-5 tokens of the last position"], lens_rows, "Logit lens"),
            SECTION.saved_plot(folder, "sphere_trajectory", "plot-trajectory"),
            SECTION.static_figures(folder, ("sphere_",)),
        ]
    )


SECTION = Section(
    "sphere",
    "Layer norm and the sphere",
    sphere_section,
    present=lambda run: "sphere" in run.metrics,
    captions={
        "sphere_radius": "Norms of the hidden states entering each layer norm",
        "sphere_cosines": "Orientation kept by the embedding norm",
        "sphere_top_tokens": "Top tokens by norm and by readout score",
        "sphere_heads": "Heads probed with normalised common nouns",
        "sphere_lens": "Logit lens of the prompt",
        "sphere_trajectory": "The last token's path among token embeddings (UMAP)",
    },
)
