"""The commands as Python functions: the CLI's options as typed keyword arguments.

Each function builds its command's config (``DecomposeConfig`` of
``geomlens.analyses.decomposition.command``, ...) as ``geomlens <command>`` does from its
flags (same defaults: SmolLM2, the BBC corpus, 128 windows of 128 tokens,
``runs/<command>-<model>``), and returns what the command's ``run(config)`` returns, a
``Result``. The same arguments write the same run folder as the
command line, so a run made one way is reused the other way.

Arguments only Python can give: ``view``, a model already loaded (``geomlens.load_model``)
for the same ``model``, so several calls load it once (``walk`` needs it loaded with
``attention="eager"``); ``progress`` is the CLI's ``--quiet`` the other way round; ``corpus``
may be a list of texts in memory or a ``datasets.Dataset`` / ``IterableDataset``
(``geomlens.api.memory_corpus``).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, TypedDict, TypeVar, Unpack, get_type_hints

from geomlens.analyses.result import Result
from geomlens.api.checks import checked
from geomlens.api.held_model import eager_while, held_model
from geomlens.api.memory_corpus import corpus_name
from geomlens.config.figure_level import FigureLevel
from geomlens.config.options import CaptureArguments, Dtype, Engine, option_defaults
from geomlens.corpus.dataset_rows import Dataset
from geomlens.errors import GeomlensError
from geomlens.models.held import HeldModel
from geomlens.models.view import ModelView

F = TypeVar("F", bound=Callable[..., Any])


class CaptureOptions(TypedDict, total=False):
    """The keyword arguments every capturing function takes (``capture``'s; the command
    line's capture options), for type checkers: the names and types of
    ``config.options.CaptureArguments``, the one declaration (with the defaults, help
    and flags), in its order. A test keeps the two the same."""

    model: str | Path | HeldModel
    corpus: str | Path | Sequence[str] | Dataset
    text_column: str
    label_column: str
    contexts: int | Literal["auto"]
    max_contexts: int | None
    budget: float | None
    length: int
    layers: Sequence[int] | None
    batch_size: int
    device: str
    dtype: Dtype
    seed: int
    offset: int
    balance: bool
    save_activations: bool
    out: str | Path | None
    second_moment: bool
    progress: bool
    figures: FigureLevel
    trust_remote_code: bool
    revision: str | None
    device_map: str | Mapping[str, Any] | None
    max_memory: Mapping[str, str] | None
    offload_folder: str | Path | None
    checkpoint_every: float
    engine: Engine
    ray_address: str | None
    workers: int | None
    threads: int | None
    activations_dir: str | Path | None


CAPTURE_DEFAULTS: dict[str, Any] = option_defaults()
"""The capture options' defaults, as ``config.options.CaptureArguments`` declares them
(the command line's: SmolLM2, BBC, 128 x 128, ...)."""

_FIRST = ("model", "corpus", "contexts", "length", "layers")
"""Capture options listed before a function's own arguments (the rest come after)."""


def takes_capture_options(func: F) -> F:
    """``func`` (its own keyword arguments and ``view``, then ``**options:
    Unpack[CaptureOptions]``) with the signature and type hints of every argument spelled
    out, each capture option with its declared default: what ``help``,
    ``inspect.signature`` and ``checked`` read."""
    own = [p for p in inspect.signature(func).parameters.values() if p.kind is p.KEYWORD_ONLY]
    hints = get_type_hints(func)
    shared = get_type_hints(CaptureArguments)

    def option(name: str) -> inspect.Parameter:
        kind = inspect.Parameter.KEYWORD_ONLY
        return inspect.Parameter(
            name, kind, default=CAPTURE_DEFAULTS[name], annotation=shared[name]
        )

    first = [option(n) for n in _FIRST]
    rest = [option(n) for n in shared if n not in _FIRST]
    late = ("tokenizer", "view")  # the arguments only Python gives, last
    mine = [p.replace(annotation=hints[p.name]) for p in own if p.name not in late]
    view = [p.replace(annotation=hints[p.name]) for p in own if p.name in late]
    params = first + mine + rest + view
    func.__signature__ = inspect.Signature(params, return_annotation=hints["return"])  # type: ignore[attr-defined]
    func.__annotations__ = {p.name: p.annotation for p in params} | {"return": hints["return"]}
    return func


def with_options(arguments: dict[str, Any]) -> dict[str, Any]:
    """A function's ``locals()``: its own arguments, and its ``options`` over
    ``CAPTURE_DEFAULTS``, as one dict (what the configs' ``.of`` read)."""
    own = {k: v for k, v in arguments.items() if k != "options"}
    merged = {**CAPTURE_DEFAULTS, **arguments.get("options", {}), **own}
    every = merged["checkpoint_every"]
    if not isinstance(every, (int, float)) or not every >= 0:
        raise GeomlensError(
            f"checkpoint_every takes a number of seconds, 0 or more (got {every!r})."
        )
    corpus = corpus_name(merged["corpus"], merged["text_column"], merged["label_column"])
    return {**merged, "corpus": corpus}


@checked
@takes_capture_options
def capture(
    *,
    tokenizer: Any = None,
    view: ModelView | None = None,
    **options: Unpack[CaptureOptions],
) -> Result:
    """``geomlens capture``: stream C windows of T tokens into mergeable statistics.

    Args:
        model: bundled name, folder, .gguf or HF id, or a transformers model in memory
            (a ``PreTrainedModel``, or TransformerLens's ``TransformerBridge``, nnsight's
            ``LanguageModel`` or a merged PEFT model around one): used where and as it is,
            named by its own name and identified by its weights.
        corpus: "bbc", a folder of .txt files, a .jsonl file, a saved dataset's folder, a
            list of texts, or a ``datasets.Dataset`` / ``IterableDataset`` (streamed).
        text_column: the text's field of a .jsonl corpus, or column of a dataset.
        label_column: the label's field of a .jsonl corpus, or column of a dataset (its
            labels feed the topic claims).
        contexts: C, the number of windows, or "auto": grown in chunks until the position
            claims are decided (docs/decomposition.md, "--contexts auto").
        max_contexts: only with ``contexts="auto"``: the most windows captured (default
            2,048; the looks double from the first up to it).
        budget: only with ``contexts="auto"``: a safety on the minutes of the chunks after
            the first look (default 60); a run it cuts short says so.
        length: T, tokens per window.
        layers: hidden-state layers kept (None: all).
        batch_size: windows per forward pass.
        device: "cpu", "cuda" or "cuda:N".
        dtype: "float32", "bfloat16" or "float16".
        seed: seeds the choice of windows.
        offset: tokens of each document skipped.
        balance: balance windows across labels.
        save_activations: also write an activation store.
        second_moment: also accumulate sum h h^T per layer (d x d).
        trust_remote_code: let a model folder run its own Python code.
        checkpoint_every: seconds between saves of resumable progress.
        engine: "local" (this process) or "ray".
        ray_address: Ray cluster to join (engine "ray").
        workers: Ray model workers (engine "ray").
        threads: torch threads per Ray worker, or of this process.
        activations_dir: where ``save_activations`` writes shards (folder or fsspec URL).
        out: the run folder (default ``runs/capture-<model>``).
        progress: show progress bars.
        figures: figures drawn: "all", "interactive" (no static PNGs) or "none".
        tokenizer: with ``model`` a model object, its tokenizer (found locally from the
            model's ``name_or_path`` when not given).
        view: ``model`` already loaded.
    """
    from geomlens.commands.capture import run
    from geomlens.config.run import CaptureRunConfig

    arguments, view = held_model(with_options(locals()), options, where="geomlens.capture")
    return run(CaptureRunConfig.of(arguments), view=view)


@checked
@takes_capture_options
def decompose(
    *,
    skip_first: bool = False,
    tokenizer: Any = None,
    view: ModelView | None = None,
    **options: Unpack[CaptureOptions],
) -> Result:
    """``geomlens decompose``: the position/context decomposition (Song & Zhong 2023).

    Variance shares, positional rank and spectra, low frequency, incoherence, topic
    clustering, attention logits in position/context parts, W_QK in the positional basis
    and induction heads. Both views of position 0 are computed; ``skip_first`` makes the
    one without it primary. Second moments are always accumulated. The other arguments
    are ``capture``'s; ``out`` defaults to ``runs/decompose-<model>``.
    """
    from geomlens.analyses.decomposition.command import DecomposeConfig, run

    arguments, view = held_model(with_options(locals()), options, where="geomlens.decompose")
    return run(DecomposeConfig.of(arguments), view=view)


@checked
@takes_capture_options
def sphere(
    *,
    nouns: str | Path | None = None,
    prompt: str | None = None,
    probe_layers: Sequence[int] | None = None,
    tokenizer: Any = None,
    view: ModelView | None = None,
    **options: Unpack[CaptureOptions],
) -> Result:
    """``geomlens sphere``: layer norm and the hypersphere (Molina 2023).

    Args:
        nouns: a file of probe nouns, one per line (None: the packaged list).
        prompt: the prompt of the logit lens (None: "To kill two birds with one stone").
        probe_layers: blocks whose heads and FFN rows are probed (None: first, middle,
            last).

    The other arguments are ``capture``'s; ``out`` defaults to ``runs/sphere-<model>``.
    """
    from geomlens.analyses.sphere.command import SphereConfig, run

    arguments, view = held_model(with_options(locals()), options, where="geomlens.sphere")
    return run(SphereConfig.of(arguments), view=view)


@checked
@takes_capture_options
def walk(
    *,
    text: str | None = None,
    text_file: str | Path | None = None,
    generate: int = 0,
    tokenizer: Any = None,
    view: ModelView | None = None,
    **options: Unpack[CaptureOptions],
) -> Result:
    """``geomlens walk``: movement through embedding space (Singh 2023).

    Args:
        text: the text walked (None: a packaged few-shot prompt).
        text_file: read the text from this file instead (not both).
        generate: tokens generated in the decoding walks (0: none).
        view: ``model`` already loaded with ``attention="eager"``.

    The other arguments are ``capture``'s; ``out`` defaults to ``runs/walk-<model>``.
    """
    if text is not None and text_file is not None:
        raise GeomlensError("geomlens.walk() takes text or text_file, not both.")
    from geomlens.analyses.walk.command import WalkConfig, run

    arguments, view = held_model(with_options(locals()), options, where="geomlens.walk")
    with eager_while(view):  # it reads attention weights
        return run(WalkConfig.of(arguments), view=view)


@checked
def concepts(
    *,
    model: str | Path | HeldModel = "smollm2-135m",
    task: str | Path = "timedial",
    data_dir: str | Path | None = None,
    shots: int = 0,
    limit: int | None = 50,
    schemes: Sequence[str] | None = None,
    sweep: str | Path | None = None,
    seed: int = 0,
    device: str = "cpu",
    dtype: Dtype = "float32",
    batch_tokens: int = 2048,
    feed: Literal["encoder", "decoder"] = "encoder",
    trust_remote_code: bool = False,
    out: str | Path | None = None,
    progress: bool = True,
    tokenizer: Any = None,
    view: ModelView | None = None,
) -> Result:
    """``geomlens concepts``: the concept-space tests of Singh (2023) on a task.

    Args:
        model: bundled name, folder, .gguf or HF id, or a transformers model in memory
            (as ``capture``'s).
        task: a task file, or a name in the data folder.
        data_dir: where task names are looked up (None: ``$GEOMLENS_DATA``).
        shots: solved examples before each item.
        limit: the first N items (None: all).
        schemes: presets (sanity, sentences_E, examples_mid, similarity_mid) or key=value
            specs (None: the four presets, unless ``sweep`` is given).
        sweep: a YAML or JSON grid of schemes, or "paper" / "small" (packaged grids).
        seed: few-shot sampling and bootstrap seed.
        device: "cpu", "cuda" or "cuda:N".
        dtype: "float32", "bfloat16" or "float16".
        batch_tokens: padded tokens per forward pass.
        feed: encoder-decoders: test 1's vectors are the encoder's input ("encoder") or
            its output ("decoder").
        trust_remote_code: let a model folder run its own Python code.
        out: the run folder (default ``runs/concepts-<model>``).
        progress: show progress output.
        tokenizer: with ``model`` a model object, its tokenizer.
        view: ``model`` already loaded.
    """
    from geomlens.analyses.concepts.command import ConceptsRunConfig, run

    given = dict(locals())
    defaults = {"device": "cpu", "dtype": "float32"}  # a model object keeps its own
    explicit = {k: v for k, v in given.items() if k in defaults and v != defaults[k]}
    arguments, view = held_model(given, explicit, where="geomlens.concepts")
    return run(ConceptsRunConfig.of(arguments), view=view)


@checked
@takes_capture_options
def report(
    *,
    task: str | Path | None = None,
    limit: int = 40,
    skip_first: bool = False,
    text: str | None = None,
    text_file: str | Path | None = None,
    tokenizer: Any = None,
    view: ModelView | None = None,
    **options: Unpack[CaptureOptions],
) -> Result:
    """``geomlens report``: every analysis on one capture, then ``report.html``.

    Args:
        task: the multiple-choice task of the concept tests (None: the default task).
        limit: items of that task scored.
        skip_first: the primary view leaves position 0 out (both views are computed).
        text: the text of the walk stage (None: a packaged few-shot prompt).
        text_file: read that text from this file instead (not both).

    The other arguments are ``capture``'s; ``out`` defaults to ``runs/report-<model>``.
    The page is ``result.folder / "report.html"``.
    """
    if text is not None and text_file is not None:
        raise GeomlensError("geomlens.report() takes text or text_file, not both.")
    from geomlens.commands.report import ReportConfig, run

    arguments, view = held_model(with_options(locals()), options, where="geomlens.report")
    return run(ReportConfig.of(arguments), view=view)
