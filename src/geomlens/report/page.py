"""``report.html``: one self-contained page of a run folder's numbers and figures.

Everything is inlined (plotly.js, styles, data, PNGs as data URIs), so the file opens
offline and can be mailed. Tables, readings and static images need no JavaScript; the
interactive figures are drawn by the inlined plotly.js when scripts run.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import plotly.offline

from geomlens.files import write_text_atomic
from geomlens.report import interactive as plots
from geomlens.report.claims import run_claims, skip_first_layers
from geomlens.report.html import escape, image, number, plot, readings, section, table
from geomlens.runfolder import Run, open_run

SECTIONS = (
    ("summary", "Summary"),
    ("claims", "Claims"),
    ("decomposition", "Position and context"),
    ("attention", "Attention"),
    ("sphere", "Layer norm and the sphere"),
    ("walk", "Movement through embedding space"),
    ("concepts", "Concept-space tests"),
    ("run", "Run"),
)

CAPTIONS = {
    "decomposition_shares": "Variance shares per layer (static)",
    "decomposition_spectra": "Singular values of the positional part",
    "decomposition_spiral": "Top-3 principal components of pos[t], coloured by t",
    "decomposition_gram": "Gram matrices of the normalised positional vectors and their DCT",
    "decomposition_contexts": "Context vectors on their top-2 principal axes, by topic",
    "attention_parts": "Attention logit parts per head",
    "induction_scores": "Induction scores per head",
    "induction_splits": "Attention of induction heads: same token, neighbours, induction",
    "sphere_radius": "Norms of the hidden states entering each layer norm",
    "sphere_cosines": "Orientation kept by the embedding norm",
    "sphere_top_tokens": "Top tokens by norm and by readout score",
    "sphere_heads": "Heads probed with normalised common nouns",
    "sphere_lens": "Logit lens of the prompt",
    "sphere_trajectory": "The last token's path among token embeddings (UMAP)",
    "walk_similarity_cos": "Cosine similarity between positions per layer",
    "walk_similarity_dot": "Dot-product similarity between positions per layer",
    "walk_encoding_ranks_decoder": "Decoder stack: rank of a position's own and next token",
    "walk_encoding_table_decoder": "Decoder stack: nearest tokens along the encoding walk",
    "walk_encoding_ranks": "Rank of a position's own and next token along the layers",
    "walk_encoding_table": "Nearest tokens along the encoding walk",
    "walk_decoding": "Decoding walks among token embeddings",
    "walk_kernels_decoder": "Decoder self-attention: mean attention by relative offset",
    "walk_kernels_cross": "Cross-attention: mean attention by offset (decoder i - encoder j)",
    "walk_kernels": "Mean attention by relative offset (position kernels)",
    "walk_head_norms": "Per-head output norms (refactoring check)",
    "concepts_schemes": "Concept-space schemes against the model's baseline",
}

STYLE = """
body{font-family:system-ui,sans-serif;margin:0;color:#222;line-height:1.45}
nav{position:sticky;top:0;background:#1f3a5f;padding:.4em 1em;z-index:10}
nav a{color:#fff;margin-right:1.1em;text-decoration:none;font-size:.95em}
nav a:hover{text-decoration:underline}
main{max-width:1200px;margin:0 auto;padding:0 1.2em 3em}
section{padding-top:3em;margin-top:-1.5em}
h1{margin:.6em 0 .2em}
table.numbers{border-collapse:collapse;margin:.8em 0;font-size:.88em}
table.numbers td,table.numbers th{border:1px solid #ccc;padding:.2em .5em;text-align:right}
table.numbers td:first-child,table.numbers th:first-child{text-align:left}
table.claims td,table.claims th{text-align:left!important}
table.numbers caption{text-align:left;font-weight:600;padding:.3em 0}
ul.readings li{margin:.2em 0}
figure{margin:1em 0}
figure img{max-width:100%;border:1px solid #eee}
figcaption{font-size:.85em;color:#555}
.plot{min-height:360px}
.verdict-reproduced{color:#176e2c;font-weight:600}
.verdict-not{color:#a3261b;font-weight:600}
.verdict-unsure{color:#8a5a00;font-weight:600}
.no-js .js-only{display:none}
.note{color:#555;font-size:.9em}
"""

LOADER = """
document.documentElement.classList.remove('no-js');
function drawAll(){
  document.querySelectorAll('div.plot').forEach(function(div){
    var data=JSON.parse(document.getElementById(div.dataset.source).textContent);
    Plotly.newPlot(div,data.data,data.layout,{responsive:true,displaylogo:false});
  });
}
if(document.readyState==='loading'){document.addEventListener('DOMContentLoaded',drawAll);}
else{drawAll();}
"""


def figure_files(folder: Path, prefixes: tuple[str, ...]) -> list[Path]:
    """PNG figures of a run whose names start with one of ``prefixes``, sorted by name."""
    figures = folder / "figures"
    if not figures.is_dir():
        return []
    return sorted(p for p in figures.glob("*.png") if p.stem.startswith(prefixes))


def caption(path: Path) -> str:
    key = path.stem
    for known, text in CAPTIONS.items():
        if key.startswith(known):
            return text + key.removeprefix(known).replace("_", " ")
    return key.replace("_", " ")


def static_figures(folder: Path, prefixes: tuple[str, ...]) -> str:
    return "".join(image(p, caption(p)) for p in figure_files(folder, prefixes))


def saved_plot(folder: Path, stem: str, plot_id: str) -> str:
    """An interactive figure the analysis saved as ``figures/<stem>.plotly.json``."""
    path = folder / "figures" / f"{stem}.plotly.json"
    if not path.exists():
        return ""
    return plot(json.loads(path.read_text(encoding="utf-8")), plot_id, CAPTIONS.get(stem, stem))


def pct(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:.0f}%"


# sections -----------------------------------------------------------------------------------
def summary_section(run: Run) -> str:
    m, manifest = run.metrics, run.manifest
    config, model = manifest["config"], manifest.get("model", {})
    lines = [
        f"{model.get('name', config['model'])} ({model.get('family', '?')}, "
        f"{model.get('n_layers', '?')} layers, d = {model.get('d_model', '?')}) on the "
        f"{config['corpus']} corpus, {config['contexts']} windows of {config['length']} tokens.",
    ]
    lines += decomposition_readings(m)[:2]
    found = run_claims(m, manifest)
    done = [c for c in found if not c["verdict"].startswith("not measured")]
    ok = sum(c["verdict"] == "reproduced" for c in done)
    unsure = sum(c["verdict"] == "inconclusive" for c in done)
    lines.append(
        f"{ok} of the {len(done)} claims measured here are reproduced"
        + (f", {unsure} inconclusive (their 95% interval holds the threshold)" if unsure else "")
        + " (see Claims)."
    )
    seconds = (manifest.get("timing") or {}).get("wall_seconds")
    if seconds is not None:
        lines.append(f"The run took {seconds / 60:.1f} minutes.")
    return readings(lines)


VERDICT_CSS = {"reproduced": "verdict-reproduced", "inconclusive": "verdict-unsure"}


def claims_section(run: Run) -> str:
    rows = []
    for c in run_claims(run.metrics, run.manifest):
        css = VERDICT_CSS.get(c["verdict"], "verdict-not")
        rows.append(
            f"<tr><td>{escape(c['claim'])}</td><td>{escape(c['paper'])}</td>"
            f'<td class="{css}">{escape(c["verdict"])}</td><td>{escape(c["value"])}</td>'
            f"<td>{escape(c['rule'])}</td><td>{escape(c['interval'])}</td></tr>"
        )
    head = "".join(
        f"<th>{h}</th>"
        for h in ("claim", "paper", "this model", "number [95% interval]", "rule", "interval")
    )
    note = (
        '<p class="note">Position/context claims read the view with position 0 left out '
        "(the original authors' default); medians are over layers. A claim whose 95% "
        "interval holds the threshold is inconclusive: this run cannot decide it.</p>"
    )
    body = "".join(rows)
    return (
        f'{note}<table class="numbers claims"><thead><tr>{head}</tr></thead>'
        f"<tbody>{body}</tbody></table>"
    )


def decomposition_readings(m: dict[str, Any]) -> list[str]:
    dec = m.get("decomposition")
    if not dec:
        return []
    rows = skip_first_layers(m)
    lines = []
    if rows:
        mid = rows[len(rows) // 2]
        top = max(rows, key=lambda r: r["share_pos"])
        lines.append(
            f"Without position 0, the positional part explains {pct(mid['share_pos'])} of the "
            f"variance at layer {mid['layer']} (ScreeNOT rank {mid['pos_rank']}), the context "
            f"part {pct(mid['share_ctx'])}; the positional share peaks at layer {top['layer']} "
            f"({pct(top['share_pos'])})."
        )
    primary = dec["layers"] if not dec.get("skip_first") else dec["other_view"]["layers"]
    big = max(primary, key=lambda r: r["share_pos"])
    lines.append(
        f"With position 0 included, the positional share reaches {pct(big['share_pos'])} at layer "
        f"{big['layer']}: compare the two views before reading the shares."
    )
    return lines


def decomposition_section(run: Run) -> str:
    m, folder = run.metrics, run.path
    dec = m["decomposition"]
    views = [(("position 0 skipped" if dec["skip_first"] else "all positions"), dec["layers"])]
    other = dec["other_view"]
    views.append(
        ("position 0 skipped" if other["skip_first"] else "all positions", other["layers"])
    )
    rows = skip_first_layers(m)
    all_positions = other["layers"] if dec["skip_first"] else dec["layers"]
    keys = [
        "layer",
        "share_pos",
        "share_ctx",
        "share_resid",
        "rel_norm_pos",
        "pos_rank",
        "pos_rank95",
        "pos_stable_rank",
        "pos_explained",
        "pos_low_freq",
        "pos_smoothness",
        "incoherence_max",
        "incoherence_mean",
        "incoherence_random",
        "ctx_cos_within",
        "ctx_cos_between",
        "ctx_cluster_ari",
    ]
    parts = [
        readings(decomposition_readings(m)),
        plot(
            plots.shares(views), "plot-shares", "Variance shares by layer, both views of position 0"
        ),
        plot(
            plots.per_layer(
                rows, ["pos_rank", "pos_rank95", "pos_stable_rank"], "Positional rank", "rank"
            ),
            "plot-ranks",
            "Rank of the positional part (position 0 skipped)",
        ),
        plot(
            plots.per_layer(
                rows,
                [
                    "pos_low_freq",
                    "pos_smoothness",
                    "incoherence_mean",
                    "incoherence_random",
                    "ctx_cluster_ari",
                ],
                "Frequency, incoherence and topic clustering",
                "value",
            ),
            "plot-geometry",
            "Low-frequency share, smoothness, incoherence against random, and topic ARI",
        ),
        saved_plot(folder, "decomposition_spiral", "plot-spiral"),
        table(keys, [[r.get(k) for k in keys] for r in rows], "Per layer, position 0 skipped"),
        table(
            keys,
            [[r.get(k) for k in keys] for r in all_positions],
            "Per layer, all positions",
        ),
    ]
    spectra_path = folder / "decomposition_spectra.json"
    if spectra_path.exists():
        spectra = json.loads(spectra_path.read_text())
        if "skip_first" in spectra:
            parts.append(
                plot(
                    plots.spectra(spectra["skip_first"], "Positional singular values"),
                    "plot-spectra",
                    "Singular values of pos per layer (position 0 skipped)",
                )
            )
    parts.append(static_figures(folder, ("decomposition_",)))
    return "".join(parts)


def attention_section(run: Run) -> str:
    m, folder = run.metrics, run.path
    att, ind = m.get("attention") or {}, m.get("induction") or {}
    parts = []
    if "unsupported" in att:
        parts.append(readings([f"Attention split not available: {att['unsupported']}"]))
    elif att:
        lines = []
        for block in att["parts"]:
            names = block["parts"]
            means = [
                sum(row[p] for row in block["share"]) / len(block["share"])
                for p in range(len(names))
            ]
            best = max(range(len(names)), key=lambda p: means[p])
            lines.append(
                f"Block {block['layer']}: averaged over heads, {names[best]} carries "
                f"{pct(means[best])} of the logit variance; the parts rebuild the real logits to "
                f"{block['max_rel_error']:.1e}."
            )
        parts.append(readings(lines))
        parts.append(
            plot(plots.attention_parts(att["parts"]), "plot-attention", "Logit parts per head")
        )
        qk_rows = [
            [b["layer"], h["head"], h["residual"], h["baseline_residual"], h["share_in_basis"]]
            for b in att.get("qk_basis", [])
            for h in b["heads"]
        ]
        parts.append(
            table(
                ["block", "head", "low-rank+diag residual", "random residual", "share in basis"],
                qk_rows,
                "W_QK in the top positional directions",
            )
        )
    if ind and "unsupported" not in ind:
        heads = ind.get("heads") or ind.get("top_heads") or []
        if heads and isinstance(heads[0], dict):
            keys = [k for k in heads[0] if isinstance(heads[0][k], (int, float))]
            parts.append(table(keys, [[h.get(k) for k in keys] for h in heads], "Induction heads"))
    elif ind:
        parts.append(readings([f"Induction heads: {ind['unsupported']}"]))
    parts.append(static_figures(folder, ("attention_", "qk_basis", "induction_")))
    return "".join(parts)


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
            saved_plot(folder, "sphere_trajectory", "plot-trajectory"),
            static_figures(folder, ("sphere_",)),
        ]
    )


def leave_reading(enc: dict[str, Any]) -> str:
    """How many positions see their own token leave its neighbourhood (an encoding walk)."""
    cos = enc["cos"]
    return (
        f"{pct(1 - cos['frac_never_leave'])} of positions see their own token leave the "
        f"top-{enc['k']} nearest tokens (cosine), at median layer {cos['leave_layer_median']}."
    )


def walk_section(run: Run) -> str:
    w, folder = run.metrics.get("walk"), run.path
    if not w:
        return readings(["Not computed in this run."])
    enc, kern, ref = w["encoding"], w["kernels"], w["refactor"]
    lines = [
        f"Along the layers, {leave_reading(enc)}",
        f"{pct(kern['negative_self_bias_fraction'])} of heads attend less to their own position "
        f"than to others (negative self-bias; {kern['windows_used']} windows).",
        "Per-head outputs O = sum_h A_h X W_vo,h rebuild the attention output to "
        f"{ref['max_rel_err']:.1e}.",
    ]
    if w.get("decoder"):
        lines += decoder_readings(w["decoder"], kern)
    for mode, d in (w.get("decoding") or (w.get("decoder") or {}).get("decoding") or {}).items():
        lines.append(f"Decoding walk ({mode}): {d.get('text', '')!r}")
    sim_rows = [
        [r["layer"], r["mean_cos"], r["mean_cos_adjacent"], r["section_contrast"], r["mean_norm"]]
        for r in w["similarity"]["layers"]
    ]
    return "".join(
        [
            readings(lines),
            table(
                ["layer", "mean cos", "adjacent cos", "section contrast", "mean norm"],
                sim_rows,
                "Similarity between positions",
            ),
            saved_plot(folder, "walk_similarity_cos", "plot-similarity"),
            static_figures(folder, ("walk_",)),
        ]
    )


def far_reading(name: str, numbers: dict[str, Any] | None) -> str | None:
    """One clause on far-position amplification of a kernel, or None where not measured."""
    far = (numbers or {}).get("far_position", numbers) or {}
    fraction = far.get("far_amplification_fraction")
    if fraction is None:
        return None
    return f"{name} {pct(fraction)}"


def decoder_readings(d: dict[str, Any], encoder_kernels: dict[str, Any]) -> list[str]:
    """The walk's lines for an encoder-decoder's decoder stack and cross-attention."""
    enc, own, cross = d["encoding"], d["kernels"], d["cross_attention"]
    lines = [
        f"Decoder stack (teacher-forced on the text): {leave_reading(enc)}",
        f"Negative self-bias: decoder self-attention {pct(own['negative_self_bias_fraction'])} "
        f"of heads, cross-attention {pct(cross['negative_self_bias_fraction'])} (offset "
        "i - j between decoder and encoder positions).",
    ]
    far = [
        far_reading("encoder bias table", encoder_kernels.get("bias_table")),
        far_reading("decoder bias table", own.get("bias_table")),
        far_reading("measured encoder attention", encoder_kernels),
        far_reading("measured decoder attention", own),
        far_reading("cross-attention", cross),
    ]
    shown = [x for x in far if x]
    if shown:
        lines.append(
            "Heads that weigh far offsets (32-63) above middle ones (8-31): "
            + ", ".join(shown)
            + "."
        )
    return lines


def concepts_section(run: Run) -> str:
    c, folder = run.metrics.get("concepts"), run.path
    if not c:
        return readings(["Not computed in this run."])
    if "unsupported" in c:
        return readings([f"Not computed: {c['unsupported']}"])
    base, headline = c["baseline"], c.get("headline", "normalised_vs_acc")
    lines = [
        f"Baseline on {base['n']} items of {c['task']['name']} ({c['shots']}-shot): acc "
        f"{base['acc']:.3f}, acc_norm {base['acc_norm']:.3f}, acc_bytes {base['acc_bytes']:.3f} "
        f"(chance {base['chance']:.3f}).",
        f"Scores are normalised by the baseline's acc (summed log-likelihood): {headline}.",
    ]
    ranking = c.get("ranking") or []
    schemes = c.get("schemes") or {}
    if ranking:
        best = schemes[ranking[0]]
        lines.append(
            f"The best scheme, {ranking[0]}, reaches {number(best.get(headline))} of the "
            f"baseline (accuracy {best['acc']:.3f})."
        )
    rows = []
    for name in ranking:
        s = schemes[name]
        low, high = s.get(f"{headline}_ci") or (None, None)
        rows.append([name, s["acc"], s.get(headline), low, high, s.get("normalised_vs_acc_norm")])
    parts = [readings(lines)]
    if rows:
        parts.append(
            plot(
                plots.bars(
                    [r[0] for r in rows],
                    [r[2] for r in rows],
                    "Accuracy over the baseline's",
                    "normalised accuracy",
                    errors=[(r[3] or 0.0, r[4] or 0.0) for r in rows],
                ),
                "plot-concepts",
                "Concept schemes: accuracy over the model's baseline accuracy, 95% intervals",
            )
        )
        header = ["scheme", "acc", "normalised", "95% low", "95% high", "vs acc_norm"]
        parts.append(table(header, rows, "Schemes, best first"))
    parts.append(static_figures(folder, ("concepts_",)))
    return "".join(parts)


def run_section(run: Run) -> str:
    manifest = run.manifest
    model = manifest.get("model", {})
    rows = [
        ["command", manifest.get("command")],
        ["model", model.get("name")],
        ["model source", model.get("source")],
        ["corpus", manifest["config"].get("corpus")],
        ["windows", f"{manifest['config']['contexts']} x {manifest['config']['length']}"],
        ["seed", manifest["config"].get("seed")],
        ["device", manifest.get("device")],
        ["time taken (s)", (manifest.get("timing") or {}).get("wall_seconds")],
        ["capture tokens/s", (manifest.get("timing") or {}).get("tokens_per_s")],
    ]
    versions = [[k, v] for k, v in sorted((manifest.get("versions") or {}).items())]
    config = json.dumps(manifest["config"], indent=1, sort_keys=True)
    return (
        table(["", ""], rows, "Manifest")
        + table(["package", "version"], versions, "Versions")
        + f"<details><summary>Full config</summary><pre>{escape(config)}</pre></details>"
    )


BUILDERS = {
    "summary": summary_section,
    "claims": claims_section,
    "decomposition": decomposition_section,
    "attention": attention_section,
    "sphere": sphere_section,
    "walk": walk_section,
    "concepts": concepts_section,
    "run": run_section,
}


def present(run: Run, anchor: str) -> bool:
    if anchor in ("summary", "claims", "run"):
        return True
    if anchor == "attention":
        return "attention" in run.metrics or "induction" in run.metrics
    return anchor in run.metrics


def stack_note(run: Run, anchor: str) -> str:
    """For an encoder-decoder, which stack the section's numbers come from ("" otherwise)."""
    stacks = run.metrics.get("stacks") or {}
    if anchor == "attention":
        anchor = "attention" if "attention" in stacks else "induction"
    if anchor not in stacks:
        return ""
    return f'<p class="note stack">Stack: {escape(stacks[anchor])}.</p>'


def build_page(run: Run) -> str:
    """The whole page as one HTML string."""
    shown = [(a, t) for a, t in SECTIONS if present(run, a)]
    nav = "".join(f'<a href="#{a}">{escape(t)}</a>' for a, t in shown)
    body = "".join(section(a, t, stack_note(run, a) + BUILDERS[a](run)) for a, t in shown)
    model = run.manifest.get("model", {}).get("name", run.config.get("model"))
    title = f"geomlens report: {model} on {run.config.get('corpus')}"
    return (
        '<!DOCTYPE html><html lang="en" class="no-js"><head><meta charset="utf-8">'
        f"<title>{escape(title)}</title><style>{STYLE}</style>"
        f"<script>{plotly.offline.get_plotlyjs()}</script></head><body>"
        f'<nav id="nav">{nav}</nav><main><h1>{escape(title)}</h1>'
        '<noscript><p class="note">JavaScript is off: the tables, readings and static '
        "figures below are the full summary; the interactive figures need scripts.</p></noscript>"
        f"{body}</main><script>{LOADER}</script></body></html>"
    )


def write_report(path: str | Path) -> Path:
    """Write ``report.html`` into a finished run folder (atomically) and return its path."""
    run = open_run(path)
    return write_text_atomic(run.path / "report.html", build_page(run))
