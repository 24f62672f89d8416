"""The concept-space section (Singh): schemes against the model's own baseline."""

from __future__ import annotations

from geomlens.analyses.concepts.claims import best_scheme, sound_schemes
from geomlens.analyses.concepts.schema import ConceptsMetrics
from geomlens.analyses.concepts.scheme_words import TESTS, label_words
from geomlens.reporting import interactive as plots
from geomlens.reporting.html import coded, number, paper, plot, readings, table
from geomlens.reporting.section import Section
from geomlens.runs.runfolder import Run


def concepts_section(run: Run) -> str:
    c, folder = ConceptsMetrics.of(run.metrics), run.path
    if c is None:
        return readings(["Not computed in this run."])
    if c.unsupported is not None:
        return readings([f"Not computed: {c.unsupported}"])
    if c.baseline is None or c.task is None:
        return readings(["Not computed in this run."])
    return "".join(
        [
            paper(
                "singh",
                "Concept-space tests: does a vector composed from the context score the "
                "choices as well as the model's own next-token readout?",
            ),
            readings(concept_readings(c)),
            schemes_part(c),
            SECTION.static_figures(folder, ("concepts_",)),
        ]
    )


HEADLINE_WORDS = {"normalised_vs_acc_norm": "acc_norm (log-likelihood per character)"}
"""The baseline score a headline other than the default divides by, in words."""


def concept_readings(c: ConceptsMetrics) -> list[str]:
    """The baseline, what the scores are divided by, and the best scheme, in words (the
    score's key and the scheme's label in tooltips)."""
    base, headline = c.baseline, c.headline_key
    assert base is not None and c.task is not None
    by = HEADLINE_WORDS.get(headline, "acc (summed log-likelihood)")
    lines: list[str] = [
        f"Baseline on {base.n} items of {c.task.name} ({c.shots}-shot): acc "
        f"{base.acc:.3f}, acc_norm {base.acc_norm:.3f}, acc_bytes {base.acc_bytes:.3f} "
        f"(chance {base.chance:.3f}).",
        coded(
            [
                ("Scores are ", None),
                (f"each scheme's accuracy over the baseline's {by}", headline),
                (".", None),
            ]
        ),
    ]
    if name := best_scheme(c):  # the one the claims name: no input echo, nothing degenerate
        best = (c.schemes or {})[name]
        reaches = (
            f") reaches {number(best.value(headline))} of the baseline (accuracy {best.acc:.3f})."
        )
        lines.append(
            coded([("The best scheme (", None), (label_words(name), name), (reaches, None)])
        )
    return lines


def schemes_part(c: ConceptsMetrics) -> str:
    """Every scheme in the ranking's order: a bar per scheme (numbered as in the table,
    its words in its hover text) and the table, each scheme in words with its label in a
    tooltip ("" without schemes)."""
    headline = c.headline_key
    _, left_out = sound_schemes(c)  # shown, but never read as the finding
    ranked = c.ranked()
    if not ranked:
        return ""
    rows = []
    for rank, (name, s) in enumerate(ranked, 1):
        low, high = s.interval(headline)
        note = f"not a candidate: {left_out[name]}" if name in left_out else ""
        words = coded([(label_words(name), name)])
        rows.append(
            [rank, words, s.acc, s.value(headline), low, high, s.normalised_vs_acc_norm, note]
        )
    names = [name for name, _ in ranked]
    bars = plots.bars(
        [f"{i}. {TESTS.get(n[:1], 'scheme').split()[0]}" for i, n in enumerate(names, 1)],
        [r[3] for r in rows],
        "Accuracy over the baseline's",
        "normalised accuracy",
        errors=[(r[4] or 0.0, r[5] or 0.0) for r in rows],
        hover=[f"{label_words(n)}<br>{n}" for n in names],
    )
    header = ["#", "scheme", "acc", "normalised", "95% low", "95% high", "vs acc_norm", "note"]
    keys = [None, None, "acc", "normalised", None, None, "normalised_vs_acc_norm", None]
    return plot(
        bars,
        "plot-concepts",
        "Concept schemes: accuracy over the model's baseline accuracy, 95% intervals",
        "one bar per scheme in the ranking's order, numbered as in the table below (hover a "
        "bar for its scheme): 1.0 is the baseline's accuracy, and a bar whose interval holds "
        "1.0 is not told apart from it by these items.",
    ) + table(
        header,
        rows,
        "Schemes in the ranking's order (the best scheme is the best candidate; hover a "
        "scheme for its label)",
        keys=keys,
    )


SECTION = Section(
    "concepts",
    "Concept-space tests",
    concepts_section,
    present=lambda run: "concepts" in run.metrics,
    captions={
        "concepts_schemes": "Concept-space schemes against the model's baseline",
    },
    interactive=("concepts_schemes",),
)
