"""The concept-space tests (Singh 2023) of ``geomlens concepts`` and of the report's
concepts stage: baseline, schemes and sweeps written to one run folder.

Writes ``manifest.json``, ``predictions.jsonl`` (the baseline per item),
``schemes/<hash>.json`` (each scheme's per-item scores, the cache a rerun resumes from),
``sweep_table.md``/``.csv`` (all schemes by normalised score), ``top10.md``,
``figures/concepts_schemes.png`` and the "concepts" section of ``metrics.json``.
"""

from __future__ import annotations

import json
import shutil
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from geomlens.analyses.base import StageRequest
from geomlens.analyses.common.applicable import readout_missing
from geomlens.analyses.concepts.baseline import (
    BATCH_TOKENS,
    FEEDS,
    ChoiceScores,
    Prepared,
    baseline_scores,
    check_decoder,
    check_feed,
    choice_scores,
    no_context_scores,
    prepare,
)
from geomlens.analyses.concepts.choice import choose_task, correct_acc, task_spec
from geomlens.analyses.concepts.gain import context_test, retained_gain
from geomlens.analyses.concepts.reuse import Reuse
from geomlens.analyses.concepts.schema import Baseline, ConceptsMetrics, SchemeResult, TaskRecord
from geomlens.analyses.concepts.schemes import DEFAULT_SCHEMES, LayerRef, Scheme, parse_scheme
from geomlens.analyses.concepts.scores import accuracy_ci, rnd
from geomlens.analyses.concepts.sweep import (
    HEADLINE,
    Bar,
    context_layers,
    ranked,
    read_grid,
    run_schemes,
    table_csv,
)
from geomlens.analyses.concepts.sweep import table_markdown as sweep_markdown
from geomlens.analyses.concepts.tasks import Task, load_task
from geomlens.capturing.capture import CaptureConfig
from geomlens.corpus import Windows
from geomlens.errors import GeomlensError
from geomlens.io.files import replacing, write_text_atomic
from geomlens.io.progress import Step, item_bar
from geomlens.models.facts import check_before_loading
from geomlens.models.loading import load_configured, resolve_folder
from geomlens.models.placement import materialised
from geomlens.models.view import ModelView
from geomlens.runs import lifecycle
from geomlens.runs.runfolder import (
    Run,
    RunFolder,
    check_given_view,
    model_fingerprint,
    model_record,
)
from geomlens.stats import DecompositionAccumulator
from geomlens.stats.finite import require_finite_weights

Scored = tuple[list[ChoiceScores], list[ChoiceScores]]
"""The baseline's and the no-context control's scores of the same items."""

DEFAULT_LIMIT = 50
DEFAULT_TASK = "timedial"
METRICS = ("acc", "acc_norm", "acc_bytes")


@dataclass(frozen=True)
class ConceptsConfig:
    """What ``geomlens concepts`` runs.

    Attributes:
        model: bundled name, folder, .gguf or HF id.
        task: a task file or a short name in the data folder.
        shots: K solved examples before each item (0: zero-shot).
        limit: the first N items in file order (None: all).
        schemes: scheme specs (preset names or key=value lists); empty: the defaults.
        sweep: a YAML/JSON grid of schemes (added after ``schemes``).
        seed: seeds few-shot sampling and the bootstrap.
        data_dir: where task names are looked up (default: $GEOMLENS_DATA).
        device, dtype: where and in which precision the model runs.
        batch_tokens: padded tokens per forward pass.
        feed: where an encoder-decoder reads test 1's vectors: "encoder" (its input, in
            place of the context's token embeddings) or "decoder" (through the encoder's
            final norm, as the encoder output). Decoder-only models take "encoder" only.
        trust_remote_code: let a model folder run its own Python code (how to load, not
            what is computed: not part of the run's identity).
    """

    model: str = "smollm2-135m"
    task: str = DEFAULT_TASK
    shots: int = 0
    limit: int | None = DEFAULT_LIMIT
    schemes: tuple[str, ...] = ()
    sweep: str | None = None
    seed: int = 0
    data_dir: str | None = None
    device: str = "cpu"
    dtype: str = "float32"
    batch_tokens: int = BATCH_TOKENS
    feed: str = "encoder"
    trust_remote_code: bool = False

    def validate(self) -> None:
        if self.limit is not None and self.limit <= 0:
            raise GeomlensError(f"--limit must be at least 1 (got {self.limit}).")
        if self.shots < 0:
            raise GeomlensError(f"--shots must be 0 or more (got {self.shots}).")
        if self.batch_tokens < 1:
            raise GeomlensError(f"--batch-tokens must be at least 1 (got {self.batch_tokens}).")
        if self.feed not in FEEDS:
            raise GeomlensError(f"--feed must be one of {', '.join(FEEDS)} (got {self.feed!r}).")


PACKAGED_GRIDS = {"paper": "concept_sweep.yaml", "small": "concept_sweep_small.yaml"}


def grid_path(sweep: str) -> Path:
    """A grid file; "paper": the packaged grid of the paper's appendix A.6 parameters;
    "small": a 14-scheme grid for a CPU."""
    if sweep in PACKAGED_GRIDS:
        from importlib import resources

        return Path(str(resources.files("geomlens") / "data" / PACKAGED_GRIDS[sweep]))
    return Path(sweep)


def scheme_list(config: ConceptsConfig) -> list[Scheme]:
    """The schemes to run: --scheme entries, then the sweep grid; the defaults if neither."""
    specs = list(config.schemes) or ([] if config.sweep else list(DEFAULT_SCHEMES))
    found: dict[str, Scheme] = {}
    for spec in specs:
        s = parse_scheme(spec)
        found.setdefault(s.key, s)
    if config.sweep:
        for s in read_grid(grid_path(config.sweep)):
            found.setdefault(s.key, s)
    return list(found.values())


def accuracy_block(
    prepared: Sequence[Prepared], scores: Sequence[ChoiceScores], seed: int
) -> dict[str, Any]:
    """acc, acc_norm and acc_bytes of per-item scores, each with its 95% interval."""
    gold = np.array([p.item.gold for p in prepared])
    preds = [s.predictions() for s in scores]
    out: dict[str, Any] = {}
    for k in METRICS:
        acc, lo, hi = accuracy_ci(np.array([p[k] for p in preds]) == gold, seed)
        out[k] = rnd(acc)
        out[f"{k}_ci"] = [rnd(lo), rnd(hi)]
    return out


def baseline_section(
    prepared: Sequence[Prepared],
    scores: Sequence[ChoiceScores],
    no_context: Sequence[ChoiceScores],
    seed: int,
) -> dict[str, Any]:
    out: dict[str, Any] = {"n": len(prepared), **accuracy_block(prepared, scores, seed)}
    out["chance"] = rnd(float(np.mean([1.0 / len(p.item.choices) for p in prepared])))
    out["no_context"] = accuracy_block(prepared, no_context, seed)
    test = context_test(correct_acc(prepared, scores), correct_acc(prepared, no_context))
    out["context_test"] = test.to_dict()
    return out


def with_gains(
    results: Sequence[dict[str, Any]],
    prepared: Sequence[Prepared],
    baseline: Sequence[ChoiceScores],
    no_context: Sequence[ChoiceScores],
    seed: int,
) -> list[dict[str, Any]]:
    """Each scheme's result with its retained context gain (``gain.retained_gain``) and its
    paired interval added to its summary, from its per-item predictions (acc)."""
    gold = np.array([p.item.gold for p in prepared])
    base, none = correct_acc(prepared, baseline), correct_acc(prepared, no_context)
    out = []
    for r in results:
        correct = np.array([item["pred"]["acc"] for item in r["items"]]) == gold
        value, lo, hi = retained_gain(correct, base, none, seed)
        summary = {**r["summary"], "retained_gain": rnd(value)}
        summary["retained_gain_ci"] = [rnd(lo), rnd(hi)]
        out.append({**r, "summary": summary})
    return out


def write_predictions(
    path: Path,
    prepared: Sequence[Prepared],
    scores: Sequence[ChoiceScores],
    no_context: Sequence[ChoiceScores],
) -> None:
    lines = []
    for p, s, n in zip(prepared, scores, no_context, strict=True):
        record = {
            "index": p.item.index,
            "scores": [rnd(x) for x in s.loglik],
            "chars": list(s.chars),
            "bytes": list(s.bytes),
            "prediction": s.predictions(),
            "gold": p.item.gold,
            "shots": list(p.prompt.shots),
            "no_context_scores": [rnd(x) for x in n.loglik],
        }
        lines.append(json.dumps(record, sort_keys=True))
    write_text_atomic(path, "\n".join(lines) + "\n")


def read_predictions(
    path: Path, prepared: Sequence[Prepared]
) -> tuple[list[ChoiceScores], list[ChoiceScores]] | None:
    """The baseline and the no-context control read back from predictions.jsonl."""
    if not path.exists():
        return None
    try:
        records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    except (OSError, json.JSONDecodeError):
        return None
    if [r.get("index") for r in records] != [p.item.index for p in prepared]:
        return None
    if not all("scores" in r and "no_context_scores" in r for r in records):
        return None
    pairs = list(zip(prepared, records, strict=True))
    return (
        [choice_scores(p.item.choices, r["scores"]) for p, r in pairs],
        [choice_scores(p.item.choices, r["no_context_scores"]) for p, r in pairs],
    )


def run_concepts(
    config: ConceptsConfig | None = None,
    out: str | Path = "runs/concepts",
    *,
    view: ModelView | None = None,
    progress: bool = False,
    figures: bool = True,
    scored: Scored | None = None,
) -> Run:
    """Run the baseline and the schemes of ``config`` into the run folder ``out``.

    Args:
        config: what to run (default: SmolLM2, the default task, 50 items, default schemes).
        out: the run folder (a finished run of the same config is reused; a partial one
            resumes from its cached baseline and schemes).
        view: a model already loaded for ``config.model``.
        progress: show progress bars.
        figures: draw the schemes figure.
        scored: the baseline and the no-context control of these items already scored
            with ``view`` (the report's task choice), used instead of scoring them again.
    """
    config = config or ConceptsConfig()
    config.validate()
    task = load_task(config.task, config.data_dir)
    items = task.take(config.limit)
    schemes = scheme_list(config)
    if view is None:  # the items against the files' facts: refused before the folder and weights

        def check(model: ModelView) -> None:
            check_decoder(model)
            check_feed(model, config.feed)
            prepare(model, task, items, config.shots, config.seed)

        check_before_loading(config.model, check)
    given = None  # a given model's fingerprint: hashing its weights once per run
    if view is not None:  # a model loaded by the caller must be the one the config names
        given = check_given_view(view, config.model, config.dtype)
        with materialised(view.model):  # offloaded weights read back (models.placement)
            require_finite_weights(view.model, str(config.model))
    full = run_identity(config, task, items, schemes)
    with lifecycle.run_folder(out, "concepts", full) as run:
        return _run_locked(
            config, run, task, items, schemes, view, progress, figures, given, scored
        )


def run_identity(
    config: ConceptsConfig, task: Task, items: Sequence[Any], schemes: list[Scheme]
) -> dict[str, Any]:
    """What the run folder is claimed for: the config, the task's fingerprint, the items
    scored and the schemes."""
    full = {
        "command": "concepts",
        "model": config.model,
        "task": task.name,
        "task_format": task.format,
        "task_fingerprint": task.fingerprint,
        "shots": config.shots,
        "limit": config.limit,
        "n_items": len(items),
        "seed": config.seed,
        "device": config.device,
        "dtype": config.dtype,
        "batch_tokens": config.batch_tokens,
        "schemes": [s.key for s in schemes],
    }
    if config.feed != "encoder":  # the default leaves decoder-only run folders as they were
        full["feed"] = config.feed
    return full


def _run_locked(
    config: ConceptsConfig,
    run: lifecycle.RunInFolder,
    task: Task,
    items: Sequence[Any],
    schemes: list[Scheme],
    view: ModelView | None,
    progress: bool,
    figures: bool,
    given: str | None = None,
    scored: Scored | None = None,
) -> Run:
    folder, previous = run.folder, run.previous
    if run.finished and previous is not None:
        source = view.source if view is not None else str(resolve_folder(config.model))
        model = given or model_fingerprint(source)
        folder.check_identity(previous, {"model": model}, finished=True)
        if "concepts" in folder.read_metrics():
            return run.reuse()
    if view is None:
        view = load_configured(config)
    fingerprint = given or model_fingerprint(view.source)
    if previous is not None:
        folder.check_identity(previous, {"model": fingerprint}, finished=run.state == "complete")
    check_decoder(view)
    check_feed(view, config.feed)
    prepared = prepare(view, task, items, config.shots, config.seed)
    run.begin(
        model=model_record(view, fingerprint),
        model_fingerprint=fingerprint,
        task={"path": task.path, "name": task.name, "n_items_in_file": len(task.items)},
        device=str(view.device),
        schemes={s.key: s.to_dict() for s in schemes},
    )
    no_readout = readout_missing(view)
    if no_readout is not None:  # its schemes read the head: not the model's own readout
        folder.merge_metrics("concepts", {"unsupported": no_readout})
        return run.complete(schemes_computed=0, schemes_cached=0)
    return _score_and_write(config, run, task, prepared, schemes, view, progress, figures, scored)


def _baseline(
    config: ConceptsConfig,
    folder: RunFolder,
    view: ModelView,
    prepared: Sequence[Prepared],
    progress: bool,
    timing: dict[str, float],
    reuse: Reuse | None = None,
    layers: Sequence[LayerRef] = (),
    scored: Scored | None = None,
) -> Scored:
    """The baseline and the no-context control: read back from predictions.jsonl, or scored
    (and written there). ``reuse`` keeps the contexts' vectors at ``layers`` for the
    schemes that read them."""
    pred_path = folder.path / "predictions.jsonl"
    cached = read_predictions(pred_path, prepared)
    if cached is not None:
        return cached
    if scored is not None and len(scored[0]) == len(scored[1]) == len(prepared):
        write_predictions(pred_path, prepared, *scored)
        return scored
    t0 = time.time()
    pbar = item_bar(len(prepared), "baseline", progress)
    baseline = baseline_scores(
        view,
        prepared,
        batch_tokens=config.batch_tokens,
        progress=pbar.update,
        reuse=reuse,
        layers=layers,
    )
    pbar.close()
    timing["baseline_seconds"] = time.time() - t0
    pbar = item_bar(len(prepared), "choices alone (no context)", progress)
    no_context = no_context_scores(
        view, prepared, batch_tokens=config.batch_tokens, progress=pbar.update
    )
    pbar.close()
    write_predictions(pred_path, prepared, baseline, no_context)
    return baseline, no_context


def _score_and_write(
    config: ConceptsConfig,
    run: lifecycle.RunInFolder,
    task: Task,
    prepared: Sequence[Prepared],
    schemes: list[Scheme],
    view: ModelView,
    progress: bool,
    figures: bool,
    scored: Scored | None = None,
) -> Run:
    """Baseline, schemes (through their cache), tables, metrics, figure, final manifest."""
    folder, manifest = run.folder, run.manifest
    timing: dict[str, float] = {}
    reuse = Reuse()  # passes the baseline and the schemes share (the numbers are the same)
    layers = context_layers(view, schemes)
    baseline, no_context = _baseline(
        config, folder, view, prepared, progress, timing, reuse, layers, scored
    )
    full = manifest["config"]
    identity = {k: full[k] for k in full if k != "schemes"}
    identity["model_fingerprint"] = manifest["model_fingerprint"]
    if view.is_seq2seq:  # scheme caches of the two feeds never mix
        identity["feed"] = config.feed

    def report(i: int, n: int, scheme: Scheme, cached: bool) -> Bar | None:
        if cached:
            if progress:
                print(f"scheme {i + 1}/{n} {scheme.label} (cached)", file=sys.stderr)
            return None
        return item_bar(len(prepared), f"scheme {i + 1}/{n} {scheme.label}", progress)

    t0 = time.time()
    results, computed = run_schemes(
        view,
        schemes,
        prepared,
        baseline,
        folder.path,
        identity,
        config.seed,
        config.batch_tokens,
        on_scheme=report,
        feed=config.feed,
        reuse=reuse,
    )
    timing["schemes_seconds"] = time.time() - t0
    results = with_gains(results, prepared, baseline, no_context, config.seed)
    base = baseline_section(prepared, baseline, no_context, config.seed)
    order = ranked(results)
    write_text_atomic(folder.path / "sweep_table.md", sweep_markdown(order))
    write_text_atomic(folder.path / "sweep_table.csv", table_csv(order))
    write_text_atomic(folder.path / "top10.md", sweep_markdown(order, top=10))
    folder.merge_metrics("concepts", metrics_section(config, task, view, base, order))
    if figures:
        _figure(folder, task, view, base, order, len(prepared), config.shots)
    return run.complete(
        timing,
        schemes_computed=computed,
        schemes_cached=len(schemes) - computed,
    )


def metrics_section(
    config: ConceptsConfig,
    task: Task,
    view: ModelView,
    base: dict[str, Any],
    order: Sequence[dict[str, Any]],
) -> dict[str, Any]:
    """The "concepts" section of metrics.json (``model_kind`` and ``feed`` only for
    encoder-decoders, so that decoder-only metrics keep their former bytes)."""
    section = ConceptsMetrics(
        task=TaskRecord(name=task.name, format=task.format, fingerprint=task.fingerprint),
        shots=config.shots,
        seed=config.seed,
        baseline=Baseline.from_dict(base),
        headline=HEADLINE,
        headline_means="scheme accuracy / baseline acc (summed log-likelihood)",
        acc_norm_means="log-likelihood per character of the choice (lm-eval acc_norm)",
        acc_bytes_means="log-likelihood per UTF-8 byte of the choice (lm-eval acc_bytes)",
        schemes={
            r["label"]: SchemeResult.from_dict({"key": r["key"], **r["summary"]}) for r in order
        },
        ranking=[r["label"] for r in order],
    )
    if view.is_seq2seq:
        section = replace(section, model_kind="encoder-decoder", feed=config.feed)
    return section.to_dict()


def _figure(
    folder: RunFolder,
    task: Task,
    view: ModelView,
    base: dict[str, Any],
    order: Sequence[dict[str, Any]],
    n_items: int,
    shots: int,
) -> None:
    from geomlens.analyses.concepts.figures import schemes_bar
    from geomlens.reporting.figures import save

    fig = schemes_bar(
        order,
        baseline_acc=base["acc"] or 0.0,
        chance=base["chance"],
        no_context=base["no_context"]["acc"],
        title=f"{task.name}, {view.name}, {n_items} items, {shots}-shot",
    )
    save(fig, folder.path / "figures" / "concepts_schemes.png")


def summary_lines(run: Run) -> list[str]:
    """A few lines for the terminal."""
    c = run.metrics["concepts"]
    b = c["baseline"]
    lines = [
        f"  baseline on {b['n']} items of {c['task']['name']} ({c['shots']}-shot): "
        f"acc {b['acc']:.3f}  acc_norm {b['acc_norm']:.3f}  acc_bytes {b['acc_bytes']:.3f}"
        f"  (chance {b['chance']:.3f}; choices alone, no context: acc "
        f"{b['no_context']['acc']:.3f})",
        "  schemes by accuracy / baseline acc:",
    ]
    for label in c["ranking"][:10]:
        s = c["schemes"][label]
        norm = s[HEADLINE]
        lines.append(
            f"    {'-' if norm is None else f'{norm:.3f}':>6}  acc {s['acc']:.3f}  {label}"
        )
    return lines


def default_task(name: str) -> str:
    """``name`` when a data folder holds it, else its packaged slice (``choice.PACKAGED``;
    timedial's for a task with none).

    The packaged files (the first 200 items of BIG-bench tasks, Apache-2.0, see
    geomlens/data/NOTICE-bigbench.md) let the report run on a machine with no data folder.
    """
    return task_spec(name) or task_spec("timedial") or name


@dataclass(frozen=True)
class ConceptsStage:
    """The report's concept-space stage (an ``Analysis``): the tests on a small slice of a
    task, as a run folder of their own.

    The tests run into ``DIR/concepts`` (which caches the baseline and each scheme) and
    their "concepts" section is copied into the report's metrics.
    """

    config: CaptureConfig
    task: str | None
    limit: int
    progress: bool
    step: Step

    def __call__(
        self, folder: RunFolder, view: ModelView, windows: Windows, acc: DecompositionAccumulator
    ) -> None:
        config, limit = self.config, self.limit
        choice, task = None, self.task
        if task is None:  # the first task of the preference list the model reads
            choice = choose_task(view, limit, config.seed, step=self.step)
            task = choice.spec
        concepts = ConceptsConfig(
            model=config.model,
            task=task,
            limit=limit,
            seed=config.seed,
            device=config.device,
            dtype=config.dtype,
            trust_remote_code=config.trust_remote_code,
        )
        self.step(f"{Path(concepts.task).stem}: {limit} items, the baseline and each scheme")
        run = run_concepts(
            concepts,
            folder.path / "concepts",
            view=view,
            progress=self.progress,
            scored=None if choice is None else choice.scored,
        )
        figure = run.path / "figures" / "concepts_schemes.png"
        if figure.exists():
            (folder.path / "figures").mkdir(exist_ok=True)
            with replacing(folder.path / "figures" / figure.name) as tmp:
                shutil.copyfile(figure, tmp)
        block = ConceptsMetrics.of(run.metrics)
        if block is not None and choice is not None:
            block = replace(block, task_choice=choice.tried)
        folder.merge_metrics("concepts", None if block is None else block.to_dict())


def concepts_stage(request: StageRequest, step: Step) -> ConceptsStage:
    """The report's concept-space stage."""
    return ConceptsStage(request.config, request.task, request.limit, request.progress, step)
