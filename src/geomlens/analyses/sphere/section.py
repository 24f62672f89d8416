"""The layer norm and hypersphere section (Molina): identity, orientation, tokens, heads,
FFN sub-updates, logit lens."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from geomlens.analyses.common.readout import untrained_readout
from geomlens.analyses.sphere.claims import GAMMA_BETA, sphere_claims
from geomlens.analyses.sphere.schema import Ffn, HeadProbe, SphereMetrics
from geomlens.reporting.claims import claim_record, verdict_sentence
from geomlens.reporting.html import number, paper, readings, table
from geomlens.reporting.section import Section
from geomlens.runs.runfolder import Run

NORM_READING = {
    "layernorm": "LayerNorm: projection onto the hyperplane orthogonal to the all-ones vector "
    "(centring), then scaling onto the sphere of radius sqrt(d)",
    "rmsnorm": "RMSNorm: no centring, only scaling onto the sphere of radius sqrt(d) (so "
    "the hidden states keep their component along the all-ones vector)",
}
"""What each norm kind does to a vector before its gain, in words."""


def token_rank_reading(ranks: dict[str, float | None], verdict: dict[str, Any] | None) -> str:
    """The top tokens' corpus-frequency rank with and without the final gamma/beta, and the
    verdict of the claim they bear on, as the claims table gives it (``verdict``: its
    record; the section never decides the claim on its own)."""
    affine, plain = ranks.get("affine"), ranks.get("plain")
    if affine is None or plain is None:
        said = "The top tokens' corpus frequency was not measured."
    elif affine == plain:
        said = (
            "Removing the final gamma/beta does not change the top tokens' mean corpus-"
            f"frequency rank ({number(affine)})."
        )
    else:
        said = (
            "Top tokens by readout score have mean corpus-frequency rank (1 = most frequent "
            f"token) {number(affine)} with the final gamma/beta and {number(plain)} without "
            f"(vocabulary mean {number(ranks.get('vocab_mean'))})."
        )
    return said if verdict is None else f"{said} {verdict_sentence(verdict)}"


def gamma_beta_record(run: Run) -> dict[str, Any] | None:
    """The record of Molina's gamma/beta claim: the run's own (the claims table's), or
    computed from its numbers for a run made before claims were kept."""
    found = claim_record(run.metrics.get("claims") or [], GAMMA_BETA)
    if found is None and "claims" not in run.metrics:
        model = run.manifest.get("model") or {}
        computed = [c.to_dict() for c in sphere_claims(run.metrics, model)]
        found = claim_record(computed, GAMMA_BETA)
    return found


def ffn_part(folder: Path, ffn: Ffn | None) -> str:
    """The FFN sub-updates: each probed layer's strongest value rows and the tokens they
    promote, and the rows that push the prompt's prediction most."""
    if ffn is None:
        return ""
    strongest = ffn.strongest or {}
    rows = [
        [layer, r.row, r.norm, ", ".join(map(str, r.promoted or []))]
        for layer, found in sorted(strongest.items(), key=lambda kv: int(kv[0]))
        for r in found
    ]
    parts = [
        table(
            ["layer", "FFN row", "norm", "tokens it promotes"],
            rows,
            "FFN sub-updates: the value rows of largest norm and the tokens they raise most",
        )
    ]
    prompt = ffn.prompt
    top = [] if prompt is None else prompt.top
    if prompt is not None and top:
        parts.append(
            table(
                ["layer", "FFN row", "activation", "push on the target", "tokens it promotes"],
                [
                    [
                        r.layer,
                        r.row,
                        r.coef,
                        r.contribution,
                        ", ".join(map(str, r.promoted or [])),
                    ]
                    for r in top[:10]
                ],
                f"The sub-updates that push the prompt's prediction {prompt.target!r} "
                f"most ({prompt.attribution or ''})",
            )
        )
    return "".join(parts)


def head_probe_part(folder: Path, heads: HeadProbe | None, per_head: int = 3) -> str:
    """The heads probed with common nouns: for the heads that match a noun to itself most
    often, a few nouns with their nearest keys (among the nouns and the vocabulary) and the
    tokens W_VO writes for them."""
    path = folder / "sphere_heads.json"
    if heads is None or not path.exists():
        return ""
    probes = json.loads(path.read_text(encoding="utf-8"))
    ranked = sorted(heads.heads, key=lambda h: -(h.self_fraction or 0.0))
    rows = []
    for h in ranked[:4]:
        found = [
            x for x in (probes.get("layers") or {}).get(str(h.layer), []) if x["head"] == h.head
        ]
        for probe in (found[0]["probes"] if found else [])[:per_head]:
            rows.append(
                [
                    h.layer,
                    h.head,
                    h.self_fraction,
                    probe["noun"],
                    ", ".join(probe.get("keys_nouns") or []),
                    ", ".join(probe.get("keys_vocab") or []),
                    ", ".join(probe.get("vo_tokens") or []),
                ]
            )
    if not rows:
        return ""
    return table(
        [
            "layer",
            "head",
            "self_fraction",
            "noun",
            "keys among nouns",
            "keys in vocabulary",
            "W_VO",
        ],
        rows,
        "Heads probed with common nouns (the heads that match a noun to itself most often): "
        "the keys each noun's query picks first, and the tokens W_VO writes for it",
        keys=["layer", "head", "self_fraction", None, None, None, None],
    )


def sphere_section(run: Run) -> str:
    s, folder = SphereMetrics.of(run.metrics), run.path
    if s is None:
        return readings(["Not computed in this run."])
    identity, top, traj = s.identity, s.top_tokens, s.trajectory
    absent = s.not_available or {}
    kind = s.norm_kind or "layernorm"
    does = NORM_READING.get(kind, f"{kind}")
    lines = [
        f"Layer-norm identity: {absent['identity']}."
        if identity.max_rel_err is None
        else f"Every norm of this model is {does}, up to a relative error of "
        f"{identity.max_rel_err:.1e} against that construction.",
        f"Top tokens: {absent.get('top_tokens', 'not computed')}."
        if top is None
        else token_rank_reading(top.mean_freq_rank, gamma_beta_record(run)),
        f"Logit lens: {absent.get('trajectory', 'not computed')}."
        if traj is None
        else f"The prompt {s.prompt!r} is read as {traj.prediction!r} at the last layer.",
    ]
    token_rows = (
        []
        if top is None
        else [
            [i + 1, a, b, c]
            for i, (a, b, c) in enumerate(
                zip(top.norm.top, top.plain.top, top.affine.top, strict=False)
            )
        ]
    )
    lens_rows = (
        []
        if traj is None
        else [
            [layer, " | ".join(map(str, t5[-1] if t5 and isinstance(t5[0], list) else t5))]
            for layer, t5 in zip(traj.layers, traj.top5, strict=False)
        ]
    )
    return "".join(
        [
            paper(
                "molina",
                "Layer norm read as a projection onto a sphere; the tokens each direction "
                "reads out; heads probed with common nouns; FFN sub-updates; the logit lens.",
            ),
            untrained_readout(run.metrics),
            readings(lines),
            ""
            if top is None
            else table(
                ["#", "by norm", "readout, no gamma/beta", "readout with gamma/beta"],
                token_rows,
                "Top tokens",
            ),
            ""
            if traj is None
            else table(["layer", "top-5 tokens of the last position"], lens_rows, "Logit lens"),
            head_probe_part(folder, s.heads),
            ffn_part(folder, s.ffn),
            SECTION.saved_plot(folder, "sphere_trajectory", "plot-trajectory"),
            SECTION.static_figures(folder, ("sphere_",)),
        ]
    )


HOW = {
    "sphere_radius": "each box is one norm's input lengths over the windows; the line is "
    "sqrt(d), the radius every output is scaled to before its gain.",
    "sphere_cosines": "cosine between a vector before and after the embedding norm: near 1 "
    "means the norm keeps the direction and only rescales.",
    "sphere_top_tokens": "the tokens whose readout scores are highest, with and without the "
    "final gamma/beta: frequent tokens rising with gamma/beta is the paper's reading.",
    "sphere_heads": "one cell per layer and head: the share of nouns whose query picks the "
    "noun itself as the top key among the nouns.",
    "sphere_lens": "the top token at each layer for each prompt position: the prediction "
    "settling in later layers is iterative refinement.",
    "sphere_trajectory": "the last token's hidden state at each layer (line) among the token "
    "embeddings (points), on a 3-D UMAP map; distances on a UMAP map are only roughly kept.",
}
"""A line under each figure of the section saying how to read it."""


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
    how=HOW,
    interactive=("sphere_trajectory",),
)
