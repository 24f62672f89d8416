"""The numbers the papers' authors publish, set beside a run's own for the nearest published
model of the same kind and position scheme.

The values are the project's data file ``geomlens/data/published_values.json``: the records
of the authors' own files (each with its ``source``, ``setup`` and ``note``), so that a run
shows them without anything outside the package. Two papers print numbers:

- Song & Zhong (2023), Table 1 as the authors' repository prints it
  (``notebooks/metrics.ipynb`` of github.com/JiajunSong629/uncover-hidden-geometry at
  commit 1fd7057), for GPT-2 small and bert-base-cased (learned absolute positions),
  bloom-560m (ALiBi) and Llama-2-7B (rotary): per layer and corpus ``pos_rank`` (ScreeNOT,
  bound 20), ``pos_stable_rank`` (sum s_i^2 / s_1^2) and ``rel_norm_pos_centred``, and over
  layers the within- and between-topic mean abs(cos) of the context vectors
  (``ctx_cos_within`` / ``ctx_cos_between``). Each is computed as geomlens computes the
  quantity of the same name, with position 0 left out.
- Singh (2023): the points of its Fig. 10 (HellaSwag accuracy over the model's own baseline,
  tests 1 and 2, zero- and 5-shot, per segmentation; 11 decoder-only models and 3 Flan-T5s)
  and the numbers its text states (``SINGH_SCORES``).

A run of one of those models gets its own numbers. Any other run gets those of the nearest
published model of the same kind and position scheme (``nearest_song``, ``nearest_singh``):
a rotary decoder Llama-2-7B's, a learned-absolute decoder GPT-2 small's, a BERT-style encoder
bert-base-cased's, an ALiBi model bloom-560m's, a T5 (relative buckets) Flan-T5's (Singh
only). Layers are mapped by relative depth: the run's layer l of L stands beside the
published layer round(l / L * L_pub) (the nearest layer the authors printed). Such numbers
are comparable in kind, not digit for digit: models, windows and corpora differ, and each
comparison carries the authors' setup and its caveats.
"""

from __future__ import annotations

import functools
import json
import math
import re
import statistics
from dataclasses import dataclass, field, replace
from importlib import resources
from typing import Any

from geomlens.stats.rounding import sig

DATA_FILE = "published_values.json"
"""The data file under ``geomlens/data`` holding the authors' values."""

SONG = "Song & Zhong 2023"
SINGH = "Singh 2023"

SONG_SOURCE = (
    "Song & Zhong (2023), Table 1, as printed by notebooks/metrics.ipynb of "
    "github.com/JiajunSong629/uncover-hidden-geometry (commit 1fd7057)"
)
SONG_SETUP = (
    "6,400 windows of 512 tokens per corpus (32 for the relative norm), positions 1-511; "
    "layer 12 before the final norm"
)
SINGH_SOURCE = (
    "Singh (2023), Fig. 10, as the authors' notebooks/charts/dist_{gen,sim}_{gpt,t5}.csv of "
    "github.com/Turnitin-AI-Research/lm_eval_harness (commit 755587e) give its points"
)

MAPPING_RULE = (
    "the run's layer l of L beside the published layer round(l / L * L_pub), the nearest "
    "layer the authors printed"
)

TOPICS_CAVEAT = (
    "the authors' within-topic mean counts each window against itself, about (1 - W) / 64 "
    "above geomlens's, which leaves those pairs out"
)


@functools.cache
def published_values() -> tuple[dict[str, Any], ...]:
    """Every record of the data file (paper, model, quantity, layer, value, source, ...)."""
    text = resources.files("geomlens").joinpath("data", DATA_FILE).read_text(encoding="utf-8")
    return tuple(json.loads(text)["values"])


def model_kind(model: dict[str, Any] | None) -> str:
    """A run's model record as "decoder", "encoder" or "encoder-decoder".

    The record's ``kind`` when it has one; otherwise its family's features (an
    encoder-decoder family's record says ``is_encoder``, its main stack being the encoder),
    then ``is_encoder``."""
    model = model or {}
    if model.get("kind") in ("decoder", "encoder", "encoder-decoder"):
        return str(model["kind"])
    if model.get("position") == "t5-relative":
        return "encoder-decoder"
    if not model.get("is_encoder"):
        return "decoder"
    return "encoder-decoder" if model.get("family") in _seq2seq_families() else "encoder"


@functools.cache
def _seq2seq_families() -> frozenset[str]:
    """The families geomlens declares as encoder-decoders (imported on first use)."""
    from geomlens.models.families import FAMILIES

    return frozenset(f.name for f in FAMILIES if "encoder-decoder" in f.features)


@dataclass(frozen=True)
class Published:
    """One paper's per-layer numbers for one model, as a run's page shows them.

    Attributes:
        paper: who publishes them.
        model: the model, in words.
        family, n_layers, d_model, vocab: what a run's model record must hold to be it.
        kind, position: the model's kind ("decoder", "encoder") and position scheme.
        source: where the numbers are printed.
        setup: the paper's windows and positions.
        quantities: metrics key -> (its name, {corpus: {hidden-state layer: value}}).
        topics: metrics key -> (its name, {corpus: {"mean": over layers, "std": over layers}}).
        caveats: the ways the authors' setup differs from a geomlens run of this model.
        nearest: why this model stands for the run's ("" when the run is of this model).
        run_layers: the run's blocks L, for the mapping by relative depth (None: unknown).
    """

    paper: str
    model: str
    family: str
    n_layers: int
    d_model: int
    vocab: int
    kind: str
    position: str
    source: str
    setup: str
    quantities: dict[str, tuple[str, dict[str, dict[int, float]]]]
    topics: dict[str, tuple[str, dict[str, dict[str, float]]]] = field(default_factory=dict)
    caveats: tuple[str, ...] = ()
    nearest: str = ""
    run_layers: int | None = None

    def matches(self, model: dict[str, Any]) -> bool:
        """Whether a run's model record (the manifest's "model") is this model's shape."""
        return (
            model.get("family") == self.family
            and model.get("n_layers") == self.n_layers
            and model.get("d_model") == self.d_model
            and model.get("vocab") == self.vocab
        )

    def column(self, layer: int, run_layers: int | None = None) -> int:
        """The published layer beside the run's ``layer`` of ``run_layers`` blocks: the one
        the authors printed nearest to round(layer / L * L_pub) (the same layer when L is
        this model's)."""
        total = run_layers or self.run_layers or self.n_layers
        target = math.floor(layer / total * self.n_layers + 0.5)
        printed = sorted({k for _, c in self.quantities.values() for v in c.values() for k in v})
        return min(printed, key=lambda k: (abs(k - target), k))


# name in the data, short name, family, blocks, width, vocabulary, kind, position, caveats
_SONG_MODELS = (
    ("GPT-2 small", "GPT-2 small (124M)", "gpt2", 12, 768, 50257, "decoder", "learned", ()),
    (
        "bert-base-cased",
        "bert-base-cased",
        "bert",
        12,
        768,
        28996,
        "encoder",
        "learned",
        (
            "the authors ran BERT as BertLMHeadModel with is_decoder=True, so with a causal "
            "mask, unlike a bidirectional encoder run",
        ),
    ),
    (
        "bigscience/bloom-560m",
        "bloom-560m",
        "bloom",
        24,
        1024,
        250880,
        "decoder",
        "alibi",
        (
            "BLOOM's state 0 is after its embedding layer norm and its last state after the "
            "final norm (geomlens's last layer is before the final norm)",
            "the authors printed 13 of its 25 states (np.linspace(0, L - 1, 13))",
        ),
    ),
    (
        "Llama-2-7B",
        "Llama-2-7B",
        "llama",
        32,
        4096,
        32000,
        "decoder",
        "rotary",
        (
            "the authors estimated Llama-2's positional part from 800 windows (6,400 for the "
            "others) and its relative norm and topics from 8 (32 for the others)",
            "the authors printed 13 of its 33 states (np.linspace(0, L - 1, 13))",
        ),
    ),
)

_SONG_NAMES = {
    "pos_rank": "ScreeNOT rank of pos",
    "pos_stable_rank": "stable rank of pos",
    "rel_norm_pos_centred": "relative norm of pos (centred states)",
}
_TOPIC_NAMES = {
    "ctx_cos_within": "within-topic mean abs(cos) of the context vectors",
    "ctx_cos_between": "between-topic mean abs(cos) of the context vectors",
}


def _song_model(
    data_name: str,
    short: str,
    family: str,
    n_layers: int,
    d_model: int,
    vocab: int,
    kind: str,
    position: str,
    caveats: tuple[str, ...],
) -> Published:
    """One of Song & Zhong's models, built from the data file's records."""
    records = [
        r
        for r in published_values()
        if r["paper"].startswith(SONG) and r["model"].startswith(data_name)
    ]
    quantities: dict[str, tuple[str, dict[str, dict[int, float]]]] = {}
    for key, name in _SONG_NAMES.items():
        corpora: dict[str, dict[int, float]] = {}
        for r in records:
            if r["quantity"] == key:
                corpora.setdefault(r["corpus"], {})[int(r["layer"])] = r["value"]
        quantities[key] = (name, corpora)
    topics: dict[str, tuple[str, dict[str, dict[str, float]]]] = {}
    for key, name in _TOPIC_NAMES.items():
        stats: dict[str, dict[str, float]] = {}
        for r in records:
            if r["quantity"] == key:
                corpus = r["corpus"].removesuffix("_topics")
                stats.setdefault(corpus, {})["mean" if r["statistic"] == "mean" else "std"] = r[
                    "value"
                ]
        topics[key] = (name, stats)
    setup = next(r["setup"] for r in records if r["quantity"] == "pos_rank")
    return Published(
        paper=SONG,
        model=short,
        family=family,
        n_layers=n_layers,
        d_model=d_model,
        vocab=vocab,
        kind=kind,
        position=position,
        source=SONG_SOURCE,
        setup=setup,
        quantities=quantities,
        topics=topics,
        caveats=(*caveats, TOPICS_CAVEAT),
    )


@functools.cache
def song_models() -> dict[str, Published]:
    """Song & Zhong's four models by family: gpt2, bert, bloom, llama."""
    return {m[2]: _song_model(*m) for m in _SONG_MODELS}


def __getattr__(name: str) -> Any:
    """``SONG_GPT2`` and ``PUBLISHED``, built from the data file on first use."""
    if name == "SONG_GPT2":
        return song_models()["gpt2"]
    if name == "PUBLISHED":
        return tuple(song_models().values())
    raise AttributeError(name)


KIND_WORDS = {"decoder": "decoder", "encoder": "BERT-style encoder"}


def nearest_song(model: dict[str, Any] | None) -> tuple[str, str] | None:
    """Song & Zhong's model nearest to a run's: (family key, why; "" when the run is of
    that model), or None when the paper has none of its kind (T5's relative buckets)."""
    model = model or {}
    for key, found in song_models().items():
        if found.matches(model):
            return key, ""
    kind, position = model_kind(model), model.get("position")
    if position == "alibi":
        key, why = "bloom", "the published model with ALiBi positions"
    elif position == "t5-relative":
        return None
    elif kind != "decoder":
        key, why = "bert", "the published BERT-style encoder"
        if kind == "encoder-decoder":
            why += " (this run reads an encoder-decoder's encoder stack)"
    elif position == "rotary":
        key, why = "llama", "the published decoder with rotary positions"
    elif position in ("learned", "sinusoidal"):
        key, why = "gpt2", "the published decoder with absolute (learned) positions"
    else:
        return None
    return key, f"nearest published model of this kind: {why}"


def published_for(model: dict[str, Any] | None) -> Published | None:
    """Song & Zhong's numbers for a run's model record, of the model itself or of the
    nearest published model of its kind and position scheme (its ``nearest`` says why);
    None when the paper has none of its kind. ``run_layers`` holds the run's blocks."""
    found = nearest_song(model)
    if found is None:
        return None
    key, why = found
    n = (model or {}).get("n_layers")
    return replace(song_models()[key], nearest=why, run_layers=n if isinstance(n, int) else None)


def _median(values: list[float]) -> float | None:
    return sig(statistics.median(values)) if values else None


def comparison(
    found: Published, rows: list[dict[str, Any]], intervals: dict[str, Any]
) -> dict[str, Any]:
    """A run's numbers beside the published ones, quantity by quantity, layer by layer.

    Args:
        found: the paper's numbers for the run's model or the nearest one.
        rows: the run's per-layer decomposition rows with position 0 left out.
        intervals: that view's intervals over contexts ({} when it has none).

    Returns:
        {"paper", "model", "source", "setup", "nearest", "caveats", "mapping": {"rule",
         "run_layers", "published_layers", "layers": {run layer: published layer}},
         "quantities": [{"key", "name", "ours": {"median", "low", "high", "layers":
         {layer: value}}, "published": {corpus: {"median", "layers": {run layer: value at
         its published layer}}}}], "topics": [{"key", "name", "ours": {"mean"},
         "published": {corpus: {"mean", "std"}}}]}. The run's median is over its layers,
        its interval that of the run's median over all layers when the rows hold every
        layer (None otherwise); a published median is over the layers the authors printed.
    """
    medians = intervals.get("medians") or {}
    layers = sorted({r["layer"] for r in rows if isinstance(r.get("layer"), int)})
    total = found.run_layers or (max(layers) if layers else found.n_layers) or 1
    at = {layer: found.column(layer, total) for layer in layers}
    quantities = []
    for key, (name, corpora) in found.quantities.items():
        ours = {
            r["layer"]: r[key]
            for r in rows
            if r.get("layer") in at and isinstance(r.get(key), (int, float))
        }
        every = sorted(ours) == list(range(total + 1))
        low, high = (medians.get(key) or (None, None)) if every else (None, None)
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
                        "median": _median(list(values.values())),
                        "layers": {str(k): values[at[k]] for k in sorted(ours) if at[k] in values},
                    }
                    for corpus, values in corpora.items()
                },
            }
        )
    topics = []
    for key, (name, stats) in found.topics.items():
        found_values = [r[key] for r in rows if isinstance(r.get(key), (int, float))]
        topics.append(
            {
                "key": key,
                "name": name,
                "ours": {"mean": sig(statistics.fmean(found_values)) if found_values else None},
                "published": {c: dict(s) for c, s in stats.items()},
            }
        )
    return {
        "paper": found.paper,
        "model": found.model,
        "source": found.source,
        "setup": found.setup,
        "nearest": found.nearest,
        "caveats": list(found.caveats),
        "mapping": {
            "rule": MAPPING_RULE,
            "run_layers": total,
            "published_layers": found.n_layers,
            "layers": {str(k): v for k, v in at.items()},
        },
        "quantities": quantities,
        "topics": topics,
    }


def published_text(section: dict[str, Any] | None, key: str, fmt: str = "g") -> str:
    """The published medians over layers of ``key``, corpus by corpus, and its range over
    layers and corpora, naming the model (and why it is the nearest); "" when none."""
    if section is None:
        return ""
    found = next((q for q in section["quantities"] if q["key"] == key), None)
    if found is None:
        return ""
    shown = ", ".join(
        f"{format(p['median'], fmt)} on {corpus}" for corpus, p in found["published"].items()
    )
    values = [v for p in found["published"].values() for v in p["layers"].values()]
    spread = (
        f"; {format(min(values), fmt)}-{format(max(values), fmt)} over the layers beside this run's"
        if values
        else ""
    )
    nearest = (
        f"; {section['nearest']}, layers mapped by relative depth" if section.get("nearest") else ""
    )
    return (
        f"{found['name']}, median over layers: {shown}{spread} ({section['paper']}, "
        f"{section['model']}{nearest})"
    )


def published_median(section: dict[str, Any] | None, key: str) -> float | None:
    """The median over corpora of the published medians over layers of ``key`` (None when
    the section has none): the one number the claims figure marks beside a claim's."""
    if section is None:
        return None
    found = next((q for q in section["quantities"] if q["key"] == key), None)
    medians = [p["median"] for p in (found or {}).get("published", {}).values()]
    medians = [m for m in medians if isinstance(m, (int, float))]
    return float(statistics.median(medians)) if medians else None


def topics_text(model: dict[str, Any] | None) -> str:
    """Song & Zhong's within- and between-topic abs(cos) of the model nearest to a run's,
    corpus by corpus ("" when the paper has none of its kind)."""
    found = published_for(model)
    if found is None or not found.topics:
        return ""
    within, between = (found.topics[k][1] for k in ("ctx_cos_within", "ctx_cos_between"))
    shown = ", ".join(
        f"{within[c]['mean']:.2f} / {between[c]['mean']:.2f} on {c}" for c in within if c in between
    )
    nearest = f"; {found.nearest}" if found.nearest else ""
    return (
        f"{found.model}: abs(cos) within / between topics, mean over layers, {shown} "
        f"({SONG}, Table 1{nearest}; the authors' within mean counts each window against "
        "itself)"
    )


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

SINGH_TESTS = {"singh.concepts_pyramidal": "test 1", "singh.concepts_similarity": "test 2"}
STANDARD_SEGMENTATION = "concat_all_examples"
"""The segmentation of the paper's standard scheme in its Fig. 10 (the points that equal
the numbers its text states)."""


@dataclass(frozen=True)
class SinghModel:
    """One model of Singh's Fig. 10: its name, kind, position scheme and size.

    Attributes:
        name: the Hugging Face id ("EleutherAI/pythia-1b-deduped").
        kind: "decoder" or "encoder-decoder".
        position: geomlens's position tag ("rotary", "learned", "t5-relative").
        n_layers, d_model: its (encoder's) blocks and width (None where the data omits them:
            the instruction-tuned Dolly models).
    """

    name: str
    kind: str
    position: str
    n_layers: int | None
    d_model: int | None

    @property
    def short(self) -> str:
        return self.name.split("/")[-1]


def _fig10() -> list[dict[str, Any]]:
    """The records of Singh's Fig. 10 points."""
    return [r for r in published_values() if r.get("segmentation") and r.get("claim")]


@functools.cache
def singh_models() -> tuple[SinghModel, ...]:
    """Every model of Singh's Fig. 10, in the data's order."""
    found: dict[str, SinghModel] = {}
    for r in _fig10():
        name = r["model"].split(" (")[0]
        if name in found:
            continue
        size = re.search(r"(\d+)(?:\+\d+)? layers, d=(\d+)", r["model"])
        kind = "encoder-decoder" if r["geomlens_position"] == "t5-relative" else "decoder"
        found[name] = SinghModel(
            name,
            kind,
            r["geomlens_position"],
            int(size.group(1)) if size else None,
            int(size.group(2)) if size else None,
        )
    return tuple(found.values())


def nearest_singh(model: dict[str, Any] | None) -> tuple[SinghModel, str] | None:
    """Singh's model nearest to a run's: the model itself when its name is in the record's
    name or source (why ""), else the one of the same kind and position scheme (any
    decoder-only one when none has it) nearest in size (blocks x width^2, on a log scale).
    None for an encoder-only model, which the paper leaves out."""
    model = model or {}
    kind = model_kind(model)
    if kind == "encoder":
        return None
    where = f"{model.get('name', '')} {model.get('source', '')}".lower()
    named = [m for m in singh_models() if m.short.lower() in where]
    if named:
        return max(named, key=lambda m: len(m.short)), ""
    sized = [m for m in singh_models() if m.kind == kind and m.n_layers and m.d_model]
    same = [m for m in sized if m.position == model.get("position")] or sized
    if not same:
        return None
    n, d = model.get("n_layers"), model.get("d_model")
    if not isinstance(n, int) or not isinstance(d, int) or n < 1 or d < 1:
        best = same[0]
    else:
        size = math.log(n * d * d)
        best = min(
            same, key=lambda m: abs(math.log((m.n_layers or 1) * (m.d_model or 1) ** 2) - size)
        )
    how = (
        "of this kind and position scheme"
        if best.position == model.get("position")
        else "decoder-only (the paper has none with this position scheme)"
    )
    return best, f"nearest published model {how}, by size"


def singh_points(claim: str, name: str | None = None) -> list[dict[str, Any]]:
    """Singh's Fig. 10 records of one claim (test), of one model or of all."""
    return [
        r
        for r in _fig10()
        if r["claim"] == claim and (name is None or r["model"].split(" (")[0] == name)
    ]


def singh_range(claim: str, kind: str, shots: int | None) -> tuple[float, float, int] | None:
    """The least and greatest share of its baseline a model of Singh's of ``kind``
    ("decoder" or "encoder-decoder") kept in the test of ``claim`` (Fig. 10, every
    segmentation; zero-shot points for ``shots`` 0, 5-shot ones for more, all for None),
    and how many models; None when the paper has none of that kind."""
    names = {m.name for m in singh_models() if m.kind == kind}
    points = [
        r
        for r in singh_points(claim)
        if r["model"].split(" (")[0] in names
        and (shots is None or r["num_fewshot"] == (0 if shots == 0 else 5))
    ]
    if not points:
        return None
    values = [r["value"] for r in points]
    return min(values), max(values), len({r["model"] for r in points})


def singh_text(claim: str, found: SinghModel, why: str) -> str:
    """A model's Fig. 10 scores of one test, in words, with the source."""
    points = singh_points(claim, found.name)
    if not points:
        return ""
    standard = {
        r["num_fewshot"]: r["value"] for r in points if r["segmentation"] == STANDARD_SEGMENTATION
    }
    values = [r["value"] for r in points]
    shown = ", ".join(
        f"{standard[k]:.3f} {'zero-shot' if k == 0 else f'{k}-shot'}" for k in sorted(standard)
    )
    nearest = f"; {why}" if why else ""
    return (
        f"{found.short} on HellaSwag ({SINGH_TESTS[claim]}): {shown} of its baseline with "
        f"{STANDARD_SEGMENTATION}, {min(values):.3f}-{max(values):.3f} over the paper's "
        f"segmentations ({SINGH}, Fig. 10{nearest})"
    )


def published_scores(model: dict[str, Any] | None) -> dict[str, str]:
    """claim id -> the published numbers for a run's model or the nearest published one,
    with their source (claims the papers state no number for are absent): Singh's scores
    stated in its text for the model, else its Fig. 10 scores of the nearest model; Song &
    Zhong's topic similarities of the nearest model."""
    model = model or {}
    found: dict[str, list[str]] = {}
    for score in SINGH_SCORES:
        if score.matches(model):
            found.setdefault(score.claim, []).append(
                f"{score.model}: {score.text} ({SINGH}, {score.source})"
            )
    singh = nearest_singh(model)
    if singh is not None:
        for claim in SINGH_TESTS:
            shown = singh_text(claim, *singh)
            if shown and (singh[1] or claim not in found):
                found.setdefault(claim, []).append(shown)
    topics = topics_text(model)
    if topics:
        found.setdefault("song.context_topics", []).append(topics)
    return {claim: "; ".join(texts) for claim, texts in found.items()}
