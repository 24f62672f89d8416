"""Numbers a paper publishes for a model, set beside a run's own when the run is of that model.

Singh (2023) states concept-test scores and position-kernel fractions in its text; they
are kept as ``PublishedScore`` records, each with its section, and shown beside the claim
they bear on when a run is of the same model or setting (``published_scores``).

Song & Zhong (2023) print per-layer numbers for GPT-2 small in their Table 1. The values
below are those the authors' repository prints for that table (``notebooks/metrics.ipynb``
of github.com/JiajunSong629/uncover-hidden-geometry at commit 1fd7057; the paper itself
was not reachable from this project's machines). Each is computed as geomlens computes the
quantity of the same name, with position 0 left out (``src/utils/metrics.py`` there):

- ``pos_rank``: ScreeNOT rank of pos with upper bound 20;
- ``pos_stable_rank``: sum s_i^2 / s_1^2;
- ``rel_norm_pos_centred``: ||pos broadcast to every context||_2 / ||H - mu||_2.

Their layer 12 is the last block's output before the final norm, as geomlens's is. Their
setup differs from a geomlens run: 6,400 windows of 512 tokens of each corpus for pos, 32
of them for the relative norm, positions 1-511. Numbers from other window lengths and
corpora are comparable in kind, not digit for digit.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any

from geomlens.stats.rounding import sig

SONG_SOURCE = (
    "Song & Zhong (2023), Table 1, as printed by notebooks/metrics.ipynb of "
    "github.com/JiajunSong629/uncover-hidden-geometry (commit 1fd7057)"
)
SONG_SETUP = (
    "6,400 windows of 512 tokens per corpus (32 for the relative norm), positions 1-511; "
    "layer 12 before the final norm"
)


@dataclass(frozen=True)
class Published:
    """One paper's per-layer numbers for one model.

    Attributes:
        paper: who publishes them.
        model: the model, in words.
        family, n_layers, d_model, vocab: what a run's model record must hold to be it.
        source: where the numbers are printed.
        setup: the paper's windows and positions.
        quantities: metrics key -> (its name, {corpus: per-layer values from layer 0}).
    """

    paper: str
    model: str
    family: str
    n_layers: int
    d_model: int
    vocab: int
    source: str
    setup: str
    quantities: dict[str, tuple[str, dict[str, tuple[float, ...]]]]

    def matches(self, model: dict[str, Any]) -> bool:
        """Whether a run's model record (the manifest's "model") is this model's shape."""
        return (
            model.get("family") == self.family
            and model.get("n_layers") == self.n_layers
            and model.get("d_model") == self.d_model
            and model.get("vocab") == self.vocab
        )


SONG_GPT2 = Published(
    paper="Song & Zhong 2023",
    model="GPT-2 small (124M)",
    family="gpt2",
    n_layers=12,
    d_model=768,
    vocab=50257,
    source=SONG_SOURCE,
    setup=SONG_SETUP,
    quantities={
        "pos_rank": (
            "ScreeNOT rank of pos",
            {
                "GitHub": (15, 14, 13, 12, 12, 11, 11, 10, 10, 10, 11, 11, 10),
                "OpenWebText": (15, 13, 14, 12, 13, 11, 10, 10, 10, 10, 9, 9, 12),
                "WikiText": (15, 14, 14, 13, 11, 11, 11, 11, 11, 10, 10, 10, 11),
            },
        ),
        "pos_stable_rank": (
            "stable rank of pos",
            {
                "GitHub": (
                    *(2.05, 1.92, 1.91, 1.89, 1.90, 1.90, 1.92),
                    *(1.94, 1.98, 2.03, 2.05, 1.70, 1.11),
                ),
                "OpenWebText": (
                    *(2.05, 1.92, 1.91, 1.89, 1.88, 1.88, 1.88),
                    *(1.90, 1.91, 1.96, 2.02, 2.24, 1.49),
                ),
                "WikiText": (
                    *(2.05, 1.92, 1.91, 1.89, 1.88, 1.88, 1.88),
                    *(1.90, 1.91, 1.97, 2.03, 2.20, 1.57),
                ),
            },
        ),
        "rel_norm_pos_centred": (
            "relative norm of pos (centred states)",
            {
                "GitHub": (
                    *(0.999, 0.994, 0.996, 0.972, 0.812, 0.762, 0.672),
                    *(0.600, 0.489, 0.442, 0.386, 0.303, 0.123),
                ),
                "OpenWebText": (
                    *(1.000, 0.996, 0.990, 0.989, 0.986, 0.983, 0.981),
                    *(0.979, 0.974, 0.841, 0.631, 0.480, 0.075),
                ),
                "WikiText": (
                    *(1.000, 0.995, 0.991, 0.989, 0.987, 0.986, 0.984),
                    *(0.984, 0.981, 0.933, 0.680, 0.555, 0.110),
                ),
            },
        ),
    },
)

PUBLISHED = (SONG_GPT2,)
"""Every model a paper publishes numbers for that geomlens sets beside a run's."""


def published_for(model: dict[str, Any] | None) -> Published | None:
    """The published numbers for a run's model record, or None when no paper has any."""
    return next((p for p in PUBLISHED if p.matches(model or {})), None)


def _median(values: list[float]) -> float | None:
    return sig(statistics.median(values)) if values else None


def comparison(
    found: Published, rows: list[dict[str, Any]], intervals: dict[str, Any]
) -> dict[str, Any]:
    """A run's numbers beside the published ones, quantity by quantity.

    Args:
        found: the paper's numbers for the run's model.
        rows: the run's per-layer decomposition rows with position 0 left out.
        intervals: that view's intervals over contexts ({} when it has none).

    Returns:
        {"paper", "model", "source", "setup", "quantities": [{"key", "name",
         "ours": {"median", "low", "high", "layers": {layer: value}},
         "published": {corpus: {"median", "layers": {layer: value}}}}]}; the run's median
        is over the layers the paper has, its interval that of the run's median over all
        layers when the two sets are the same (None otherwise).
    """
    medians = intervals.get("medians") or {}
    quantities = []
    for key, (name, corpora) in found.quantities.items():
        n = len(next(iter(corpora.values())))
        ours = {
            r["layer"]: r[key]
            for r in rows
            if r.get("layer") is not None
            and r["layer"] < n
            and isinstance(r.get(key), (int, float))
        }
        same_layers = sorted(ours) == [r["layer"] for r in rows] and len(ours) == n
        low, high = (medians.get(key) or (None, None)) if same_layers else (None, None)
        quantities.append(
            {
                "key": key,
                "name": name,
                "ours": {
                    "median": _median(list(ours.values())),
                    "low": low,
                    "high": high,
                    "layers": {str(k): sig(v) for k, v in sorted(ours.items())},
                },
                "published": {
                    corpus: {
                        "median": _median(list(values)),
                        "layers": {str(i): v for i, v in enumerate(values)},
                    }
                    for corpus, values in corpora.items()
                },
            }
        )
    return {
        "paper": found.paper,
        "model": found.model,
        "source": found.source,
        "setup": found.setup,
        "quantities": quantities,
    }


def published_text(section: dict[str, Any] | None, key: str, fmt: str = "g") -> str:
    """The published medians over layers of ``key``, corpus by corpus ("" when none)."""
    if section is None:
        return ""
    found = next((q for q in section["quantities"] if q["key"] == key), None)
    if found is None:
        return ""
    shown = ", ".join(
        f"{format(p['median'], fmt)} on {corpus}" for corpus, p in found["published"].items()
    )
    return f"{found['name']}, median over layers: {shown} ({section['paper']}, {section['model']})"


SINGH = "Singh 2023"


@dataclass(frozen=True)
class PublishedScore:
    """A number the paper's text states for a model (or a kind of model), beside a claim.

    Attributes:
        claim: the id of the claim it bears on.
        model: the model or setting, in words.
        text: the number(s), in words.
        source: where the paper states it.
        family, n_layers, d_model: what a run's model record must hold (None: any).
        names: one of these must occur in the record's name or source (empty: any), for
            models whose shape other models share (Flan-T5 and T5 v1.1).
        position: the record's position scheme must be this (None: any).
    """

    claim: str
    model: str
    text: str
    source: str
    family: str | None = None
    n_layers: int | None = None
    d_model: int | None = None
    names: tuple[str, ...] = ()
    position: str | None = None

    def matches(self, model: dict[str, Any]) -> bool:
        """Whether a run's model record is this model or setting."""
        wanted = {"family": self.family, "n_layers": self.n_layers, "d_model": self.d_model}
        if any(v is not None and model.get(k) != v for k, v in wanted.items()):
            return False
        if self.position is not None and model.get("position") != self.position:
            return False
        where = f"{model.get('name', '')} {model.get('source', '')}".lower()
        return not self.names or any(n in where for n in self.names)


SINGH_SCORES = (
    PublishedScore(
        "singh.concepts_pyramidal",
        "GPT-Neo-1.3B on HellaSwag",
        "0.839 zero-shot and 0.823 5-shot with the standard scheme, 0.845 and 0.849 with "
        "its best schemes (the paper's best of 14 models; none reached 1.0)",
        "section 5.1.1",
        family="gpt_neo",
        n_layers=24,
        d_model=2048,
    ),
    PublishedScore(
        "singh.concepts_similarity",
        "GPT-Neo-1.3B on HellaSwag",
        "0.826 zero-shot and 0.805 5-shot with its best schemes",
        "section 5.1.2",
        family="gpt_neo",
        n_layers=24,
        d_model=2048,
    ),
    PublishedScore(
        "singh.concepts_pyramidal",
        "Flan-T5-large on HellaSwag",
        "about 0.80 zero-shot and 0.738 5-shot",
        "section 5.1.1",
        family="t5",
        n_layers=24,
        d_model=1024,
        names=("flan-t5-large",),
    ),
    PublishedScore(
        "singh.concepts_similarity",
        "the paper's three encoder-decoder models on HellaSwag",
        "up to 0.96",
        "section 5.1.2",
        position="t5-relative",
    ),
    PublishedScore(
        "singh.negative_self_bias_table.encoder",
        "the T5-Small and Flan-T5-XL encoders",
        "about 80% of the position kernels (one per head) attenuate the query's own position",
        "appendix A.2",
        position="t5-relative",
    ),
    PublishedScore(
        "singh.far_amplification_table.decoder",
        "the Flan-T5-XL decoder",
        "about 30% of the self-attention heads amplify far positions",
        "appendix A.2, figure 8",
        position="t5-relative",
    ),
)
"""Numbers Singh (2023) states in its text (normalised scores are accuracy over the
model's own HellaSwag baseline accuracy)."""


def published_scores(model: dict[str, Any] | None) -> dict[str, str]:
    """claim id -> the published numbers for a run's model or setting, with their source
    (claims the paper states no number for are absent)."""
    found: dict[str, list[str]] = {}
    for score in SINGH_SCORES:
        if score.matches(model or {}):
            found.setdefault(score.claim, []).append(
                f"{score.model}: {score.text} ({SINGH}, {score.source})"
            )
    return {claim: "; ".join(texts) for claim, texts in found.items()}
