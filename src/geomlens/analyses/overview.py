"""The sections every report has: the summary, the papers' claims, and the run itself."""

from __future__ import annotations

import json
from typing import Any

from geomlens.analyses.concepts.scheme_words import with_words
from geomlens.analyses.decomposition.schema import run_published
from geomlens.analyses.decomposition.section import decomposition_readings
from geomlens.models.identity import quantization_words
from geomlens.reporting.claims import count_sentence, counted, text
from geomlens.reporting.claims_figure import claims_figure
from geomlens.reporting.html import coded, escape, plot, readings, table
from geomlens.reporting.section import Section
from geomlens.runs.runfolder import Run


def tier_sentence(tier: str) -> str:
    """How much of the model the run reads (``models.view.Tier``), in one sentence."""
    if tier == "hidden-state":
        return (
            "Read in the hidden-state tier: its embeddings, residual stream and readout "
            "(equal to Hugging Face's); the attention-level analyses say per layer that they "
            "do not apply."
        )
    return "Read in the full tier: every weight of a declared family, checked block by block."


def model_sentences(model: dict[str, Any]) -> list[str]:
    """What the model of a run really is, beyond its name: held in memory (identified by its
    weights), edited since it was loaded from its files, quantised, or a bundled model
    whose files are not the published weights (its caveat)."""
    lines = []
    held = model.get("held")
    if held:
        edited = held.get("edited_since_loaded_from")
        lines.append(
            f"The model was given in memory ({held.get('own_name')}) and is identified by its "
            f"weights, config and tokenizer ({str(held.get('fingerprint'))[:26]}...)"
            + (f"; its weights were edited after loading from {edited}." if edited else ".")
        )
    quant = model.get("quantization")
    if quant:
        bound = quant.get("check_tolerance")
        lines.append(
            f"It holds {quantization_words(quant)}: its numbers describe the quantised model"
            + (f"; the on-load check allowed differences up to {bound:.0e}." if bound else ".")
        )
    if model.get("caveat"):
        lines.append(f"Bundled model: {model['caveat']}.")
    return lines


def precision(config: dict[str, Any]) -> str:
    """The dtype the model's weights and forward pass ran in (float32 where a run predates
    the option)."""
    return str(config.get("dtype") or "float32")


def summary_section(run: Run) -> str:
    m, manifest = run.metrics, run.manifest
    config, model = manifest["config"], manifest.get("model", {})
    lines = [
        f"{model.get('name', config['model'])} ({model.get('family', '?')}, "
        f"{model.get('n_layers', '?')} layers, d = {model.get('d_model', '?')}) in "
        f"{precision(config)} on the {config['corpus']} corpus, {config['contexts']} windows "
        f"of {config['length']} tokens.",
        *model_sentences(model),
        tier_sentence(model.get("tier", "full")),
    ]
    lines += decomposition_readings(m)[:3]  # the shares, both views, the ranks
    count = counted(m.get("claims", []))
    lines.append(
        count_sentence(count)
        + (
            " (inconclusive: a guard fired or the 95% interval holds the threshold)"
            if count["inconclusive"]
            else ""
        )
        + (
            f"; {len(count['apart'])} variants and identity checks are listed apart"
            if count["apart"]
            else ""
        )
        + " (see Claims)."
    )
    seconds = (manifest.get("timing") or {}).get("wall_seconds")
    if seconds is not None:
        lines.append(f"The run took {seconds / 60:.1f} minutes.")
    return readings(lines)


VERDICT_CSS = {"reproduced": "verdict-reproduced", "inconclusive": "verdict-unsure"}


def claims_section(run: Run) -> str:
    rows = []
    found = run.metrics.get("claims", [])  # (the page computes those of older runs)
    methods = list(dict.fromkeys(c["interval"] for c in found))  # each said once, numbered
    shared = shared_reasons(found)  # a reason several claims share is said once, below
    for c in found:
        css = VERDICT_CSS.get(c["verdict"], "verdict-not")
        if c["verdict"].startswith(("not applicable", "not measured")):
            css = ""
        verdict = escape(c["verdict"])
        if c.get("why") in shared:
            verdict += f'<br><span class="note">reason {shared.index(c["why"]) + 1} below</span>'
        elif c.get("why"):
            verdict += f'<br><span class="note">{worded(c["why"])}</span>'
        if c.get("kind", "claim") != "claim":
            verdict += f'<br><span class="note">({escape(c["kind"])}, not counted)</span>'
        value = f"{worded(c['value'])}<sup>{methods.index(c['interval']) + 1}</sup>"
        if c.get("published"):
            value += f'<br><span class="note">published: {escape(c["published"])}</span>'
        rows.append(
            f"<tr><td>{escape(c['claim'])}</td><td>{escape(c['paper'])}</td>"
            f'<td class="{css}">{verdict}</td><td>{value}</td>'
            f"<td>{escape(c['rule'])}</td></tr>"
        )
    head = "".join(
        f"<th>{h}</th>" for h in ("claim", "paper", "this model", "number [95% interval]", "rule")
    )
    intervals = "; ".join(f"<sup>{i}</sup> {escape(m)}" for i, m in enumerate(methods, 1))
    note = (
        '<p class="note">Position/context claims read the view with position 0 left out '
        "(the original authors' default) and the positional estimate with its sampling "
        "noise removed; medians are over layers. A claim is inconclusive when a guard fires "
        "(too much noise, a baseline at chance, nothing to compare, ...) or its 95% interval "
        "holds the threshold, and says which; a claim its paper did not make about this kind "
        "of model is not applicable. Variants and identity checks are not counted in the "
        "summary. docs/claims.md lists every claim's scope, rule, guards and threshold.</p>"
    )
    body = "".join(rows)
    reasons = "".join(
        f'<p class="note">Reason {i}, shared by '
        f"{sum(c.get('why') == why for c in found)} claims: {worded(why)}</p>"
        for i, why in enumerate(shared, 1)
    )
    published = published_tables(run_published(run.metrics, run.manifest))
    figure = claims_figure(found)
    glance = (
        plot(
            figure,
            "claims-glance",
            "Each counted claim's number and 95% interval against its threshold, coloured "
            "by verdict (the legend's counts are the summary's)",
            "in the top panel the threshold is at 1 on every row and the claim holds to the "
            "right of it (a '<=' rule is inverted); a claim whose threshold is 0 is placed by "
            "its difference from it, and a claim without a number sits in the bottom panel "
            "with its verdict; open diamonds mark the nearest published model's value. "
            "Variants and identity checks are not counted and not drawn: the table lists them.",
        )
        if figure is not None
        else ""
    )
    return (
        f'{glance}{note}<table class="numbers claims"><thead><tr>{head}</tr></thead>'
        f"<tbody>{body}</tbody></table>{reasons}"
        f'<p class="note">How each interval is drawn: {intervals}.</p>{published}'
    )


def worded(text: str) -> str:
    """A claim's text as HTML, each scheme label in it shown as words with the label as
    its tooltip."""
    return coded(with_words(text))


def shared_reasons(found: list[dict[str, Any]]) -> list[str]:
    """The reasons (``why``) two or more claims give, in the order they first appear."""
    reasons = [c["why"] for c in found if c.get("why")]
    return [why for why in dict.fromkeys(reasons) if reasons.count(why) > 1]


def published_tables(published: dict[str, Any] | None) -> str:
    """The paper's per-layer numbers for this run's model, or the nearest published model of
    its kind, beside the run's ("" when the paper gives none of its kind): one table per
    quantity, a row per layer of the run with the published layer beside it (mapped by
    relative depth), then the topic similarities, the source, the setup and its caveats."""
    if not published:
        return ""
    nearest = published.get("nearest") or ""
    mapping = published.get("mapping") or {}
    out = (
        f"<h3>Published numbers for {escape(published['model'])}"
        + (" (the nearest published model)" if nearest else "")
        + "</h3>"
        f'<p class="note">{escape(published["source"])}. Their setup: '
        f"{escape(published['setup'])}. This run's numbers leave position 0 out, as theirs "
        "do; other windows and corpora make them comparable in kind, not digit for digit."
        + (f" {escape(nearest[:1].upper() + nearest[1:])}." if nearest else "")
        + (
            f" Layers: {escape(mapping['rule'])} (L = {mapping['run_layers']}, "
            f"L_pub = {mapping['published_layers']})."
            if mapping
            else ""
        )
        + "".join(f" Caveat: {escape(c)}." for c in published.get("caveats") or [])
        + "</p>"
    )
    at = mapping.get("layers") or {}
    for q in published["quantities"]:
        corpora = list(q["published"])
        ours = q["ours"]
        rows = [
            [layer, at.get(layer, layer), value]
            + [q["published"][c]["layers"].get(layer) for c in corpora]
            for layer, value in ours["layers"].items()
        ]
        rows.append(
            [
                "median",
                "",
                text(ours["median"], "g", low=ours["low"], high=ours["high"]),
                *(q["published"][c]["median"] for c in corpora),
            ]
        )
        out += table(["layer", "published layer", "this run", *corpora], rows, q["name"])
    for t in published.get("topics") or []:
        corpora = list(t["published"])
        row = [
            text(t["ours"]["mean"], ".3f"),
            *(
                f"{t['published'][c].get('mean', '–')} (sd {t['published'][c].get('std', '–')})"
                for c in corpora
            ),
        ]
        out += table(["this run", *corpora], [row], f"{t['name']}, mean over layers")
    return out


def duration(seconds: float | None) -> str | None:
    """Seconds as a person reads them: "42 s", "12.5 min", "1 h 09 min"."""
    if seconds is None:
        return None
    if seconds < 60:
        return f"{seconds:.0f} s"
    if seconds < 3600:
        return f"{seconds / 60:.1f} min"
    hours, minutes = divmod(round(seconds / 60), 60)
    return f"{hours} h {minutes:02d} min"


def run_section(run: Run) -> str:
    manifest = run.manifest
    model = manifest.get("model", {})
    rows = [
        ["command", manifest.get("command")],
        ["model", model.get("name") or manifest["config"].get("model")],
        ["model source", model.get("source")],
        ["model fingerprint", manifest.get("model_fingerprint")],
        ["corpus", manifest["config"].get("corpus")],
        ["windows", f"{manifest['config']['contexts']} x {manifest['config']['length']}"],
        ["seed", manifest["config"].get("seed")],
        ["precision", precision(manifest["config"])],
        ["device", manifest.get("device")],
        ["time taken", duration((manifest.get("timing") or {}).get("wall_seconds"))],
        ["capture tokens/s", (manifest.get("timing") or {}).get("tokens_per_s")],
    ]
    rows += [[f"model {key}", model[key]] for key in ("caveat",) if model.get(key)]
    if model.get("quantization"):
        rows.append(["model weights", quantization_words(model["quantization"])])
    versions = [[k, v] for k, v in sorted((manifest.get("versions") or {}).items())]
    config = json.dumps(manifest["config"], indent=1, sort_keys=True)
    return (
        table(["", ""], rows, "Manifest")
        + table(["package", "version"], versions, "Versions")
        + f"<details><summary>Full config</summary><pre>{escape(config)}</pre></details>"
    )


SUMMARY = Section("summary", "Summary", summary_section)
CLAIMS = Section("claims", "Claims", claims_section)
RUN = Section("run", "Run", run_section)
