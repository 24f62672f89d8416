"""The commands as Python functions: the CLI's options as typed keyword arguments.

Each function builds the same configs as ``geomlens <command>`` does from its flags (same
defaults: SmolLM2, the BBC corpus, 128 windows of 128 tokens, ``runs/<command>-<model>``),
calls the same ``run_*`` function and returns a ``Result``. The same arguments write the
same run folder as the command line, so a run made one way is reused the other way.

Arguments only Python can give: ``view``, a model already loaded (``geomlens.load_model``)
for the same ``model``, so several calls load it once (``walk`` needs it loaded with
``attention="eager"``); ``progress`` is the CLI's ``--quiet`` the other way round.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from geomlens.api.checks import checked
from geomlens.api.result import Result, result_of
from geomlens.capture.capture import CaptureConfig
from geomlens.engines import EngineConfig
from geomlens.errors import GeomlensError
from geomlens.models.view import ModelView

Dtype = Literal["float32", "bfloat16"]
Engine = Literal["local", "ray"]


def default_out(command: str, model: str) -> str:
    """The run folder a command writes when none is given: ``runs/<command>-<model>``."""
    safe = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in model.strip("/"))
    return f"runs/{command}-{safe}"


CAPTURE_OPTIONS = (
    "model",
    "corpus",
    "contexts",
    "length",
    "layers",
    "batch_size",
    "device",
    "dtype",
    "seed",
    "offset",
    "balance",
    "save_activations",
    "second_moment",
    "trust_remote_code",
)
"""The arguments that make the capture config (the CLI's capture options)."""
ENGINE_OPTIONS = {
    "engine": "name",
    "ray_address": "ray_address",
    "workers": "workers",
    "threads": "threads",
    "activations_dir": "activations_dir",
}
"""Arguments that make the engine config, with the field each fills."""


def configs(arguments: dict[str, Any]) -> tuple[CaptureConfig, EngineConfig]:
    """The capture and engine configs of a function's (already checked) arguments, as the
    CLI makes them from its capture options."""
    capture = {k: arguments[k] for k in CAPTURE_OPTIONS}
    capture.update(model=str(capture["model"]), corpus=str(capture["corpus"]))
    if capture["layers"] is not None:
        capture["layers"] = tuple(capture["layers"])
    engine = {field: arguments[k] for k, field in ENGINE_OPTIONS.items()}
    if engine["activations_dir"] is not None:
        engine["activations_dir"] = str(engine["activations_dir"])
    return CaptureConfig(**capture), EngineConfig(**engine)


def folder_for(command: str, out: str | Path | None, model: str | Path) -> str | Path:
    return out if out is not None else default_out(command, str(model))


@checked
def capture(
    *,
    model: str | Path = "smollm2-135m",
    corpus: str | Path = "bbc",
    contexts: int = 128,
    length: int = 128,
    layers: Sequence[int] | None = None,
    batch_size: int = 8,
    device: str = "cpu",
    dtype: Dtype = "float32",
    seed: int = 0,
    offset: int = 0,
    balance: bool = False,
    save_activations: bool = False,
    second_moment: bool = False,
    trust_remote_code: bool = False,
    checkpoint_every: float = 30.0,
    engine: Engine = "local",
    ray_address: str | None = None,
    workers: int | None = None,
    threads: int | None = None,
    activations_dir: str | Path | None = None,
    out: str | Path | None = None,
    progress: bool = True,
    view: ModelView | None = None,
) -> Result:
    """``geomlens capture``: stream C windows of T tokens into mergeable statistics.

    Args:
        model: bundled name, folder, .gguf or HF id.
        corpus: "bbc", a folder of .txt files or a .jsonl file.
        contexts: C, the number of windows.
        length: T, tokens per window.
        layers: hidden-state layers kept (None: all).
        batch_size: windows per forward pass.
        device: "cpu", "cuda" or "cuda:N".
        dtype: "float32" or "bfloat16".
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
        view: ``model`` already loaded.
    """
    from geomlens.commands.capture import run_capture

    config, engine_config = configs(locals())
    run = run_capture(
        config,
        folder_for("capture", out, model),
        view=view,
        progress=progress,
        checkpoint_every_s=checkpoint_every,
        engine=engine_config,
    )
    return result_of("capture", run)


@checked
def decompose(
    *,
    model: str | Path = "smollm2-135m",
    corpus: str | Path = "bbc",
    contexts: int = 128,
    length: int = 128,
    layers: Sequence[int] | None = None,
    skip_first: bool = False,
    batch_size: int = 8,
    device: str = "cpu",
    dtype: Dtype = "float32",
    seed: int = 0,
    offset: int = 0,
    balance: bool = False,
    save_activations: bool = False,
    second_moment: bool = False,
    trust_remote_code: bool = False,
    checkpoint_every: float = 30.0,
    engine: Engine = "local",
    ray_address: str | None = None,
    workers: int | None = None,
    threads: int | None = None,
    activations_dir: str | Path | None = None,
    out: str | Path | None = None,
    progress: bool = True,
    view: ModelView | None = None,
) -> Result:
    """``geomlens decompose``: the position/context decomposition (Song & Zhong 2023).

    Variance shares, positional rank and spectra, low frequency, incoherence, topic
    clustering, attention logits in position/context parts, W_QK in the positional basis
    and induction heads. Both views of position 0 are computed; ``skip_first`` makes the
    one without it primary. Second moments are always accumulated. The other arguments
    are ``capture``'s; ``out`` defaults to ``runs/decompose-<model>``.
    """
    from geomlens.commands.decompose import run_decompose

    config, engine_config = configs(locals())
    run = run_decompose(
        config,
        folder_for("decompose", out, model),
        skip_first=skip_first,
        view=view,
        progress=progress,
        checkpoint_every_s=checkpoint_every,
        engine=engine_config,
    )
    return result_of("decompose", run)


@checked
def sphere(
    *,
    model: str | Path = "smollm2-135m",
    corpus: str | Path = "bbc",
    contexts: int = 128,
    length: int = 128,
    layers: Sequence[int] | None = None,
    nouns: str | Path | None = None,
    prompt: str | None = None,
    probe_layers: Sequence[int] | None = None,
    batch_size: int = 8,
    device: str = "cpu",
    dtype: Dtype = "float32",
    seed: int = 0,
    offset: int = 0,
    balance: bool = False,
    save_activations: bool = False,
    second_moment: bool = False,
    trust_remote_code: bool = False,
    checkpoint_every: float = 30.0,
    engine: Engine = "local",
    ray_address: str | None = None,
    workers: int | None = None,
    threads: int | None = None,
    activations_dir: str | Path | None = None,
    out: str | Path | None = None,
    progress: bool = True,
    view: ModelView | None = None,
) -> Result:
    """``geomlens sphere``: layer norm and the hypersphere (Molina 2023).

    Args:
        nouns: a file of probe nouns, one per line (None: the packaged list).
        prompt: the prompt of the logit lens (None: "To kill two birds with one stone").
        probe_layers: blocks whose heads and FFN rows are probed (None: first, middle,
            last).

    The other arguments are ``capture``'s; ``out`` defaults to ``runs/sphere-<model>``.
    """
    from geomlens.commands.sphere import DEFAULT_PROMPT, run_sphere

    config, engine_config = configs(locals())
    run = run_sphere(
        config,
        folder_for("sphere", out, model),
        nouns=None if nouns is None else str(nouns),
        prompt=prompt if prompt is not None else DEFAULT_PROMPT,
        layers=None if probe_layers is None else tuple(probe_layers),
        view=view,
        progress=progress,
        checkpoint_every_s=checkpoint_every,
        engine=engine_config,
    )
    return result_of("sphere", run)


@checked
def walk(
    *,
    model: str | Path = "smollm2-135m",
    corpus: str | Path = "bbc",
    contexts: int = 128,
    length: int = 128,
    layers: Sequence[int] | None = None,
    text: str | None = None,
    text_file: str | Path | None = None,
    generate: int = 0,
    batch_size: int = 8,
    device: str = "cpu",
    dtype: Dtype = "float32",
    seed: int = 0,
    offset: int = 0,
    balance: bool = False,
    save_activations: bool = False,
    second_moment: bool = False,
    trust_remote_code: bool = False,
    checkpoint_every: float = 30.0,
    engine: Engine = "local",
    ray_address: str | None = None,
    workers: int | None = None,
    threads: int | None = None,
    activations_dir: str | Path | None = None,
    out: str | Path | None = None,
    progress: bool = True,
    view: ModelView | None = None,
) -> Result:
    """``geomlens walk``: movement through embedding space (Singh 2023).

    Args:
        text: the text walked (None: a packaged few-shot prompt).
        text_file: read the text from this file instead (not both).
        generate: tokens generated in the decoding walks (0: none).
        view: ``model`` already loaded with ``attention="eager"``.

    The other arguments are ``capture``'s; ``out`` defaults to ``runs/walk-<model>``.
    """
    from geomlens.commands.walk import read_text_file, run_walk

    if text is not None and text_file is not None:
        raise GeomlensError("geomlens.walk() takes text or text_file, not both.")
    config, engine_config = configs(locals())
    run = run_walk(
        config,
        folder_for("walk", out, model),
        text=read_text_file(str(text_file)) if text_file is not None else text,
        generate=generate,
        view=view,
        progress=progress,
        checkpoint_every_s=checkpoint_every,
        engine=engine_config,
    )
    return result_of("walk", run)


@checked
def concepts(
    *,
    model: str | Path = "smollm2-135m",
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
    view: ModelView | None = None,
) -> Result:
    """``geomlens concepts``: the concept-space tests of Singh (2023) on a task.

    Args:
        model: bundled name, folder, .gguf or HF id.
        task: a task file, or a name in the data folder.
        data_dir: where task names are looked up (None: ``$GEOMLENS_DATA``).
        shots: solved examples before each item.
        limit: the first N items (None: all).
        schemes: presets (sanity, sentences_E, examples_mid, similarity_mid) or key=value
            specs (None: the four presets, unless ``sweep`` is given).
        sweep: a YAML or JSON grid of schemes, or "paper" / "small" (packaged grids).
        seed: few-shot sampling and bootstrap seed.
        device: "cpu", "cuda" or "cuda:N".
        dtype: "float32" or "bfloat16".
        batch_tokens: padded tokens per forward pass.
        feed: encoder-decoders: test 1's vectors are the encoder's input ("encoder") or
            its output ("decoder").
        trust_remote_code: let a model folder run its own Python code.
        out: the run folder (default ``runs/concepts-<model>``).
        progress: show progress output.
        view: ``model`` already loaded.
    """
    from geomlens.commands.concepts import ConceptsConfig, run_concepts

    config = ConceptsConfig(
        model=str(model),
        task=str(task),
        shots=shots,
        limit=limit,
        schemes=tuple(schemes or ()),
        sweep=None if sweep is None else str(sweep),
        seed=seed,
        data_dir=None if data_dir is None else str(data_dir),
        device=device,
        dtype=dtype,
        batch_tokens=batch_tokens,
        feed=feed,
        trust_remote_code=trust_remote_code,
    )
    run = run_concepts(config, folder_for("concepts", out, model), view=view, progress=progress)
    return result_of("concepts", run)


@checked
def report(
    *,
    model: str | Path = "smollm2-135m",
    corpus: str | Path = "bbc",
    contexts: int = 128,
    length: int = 128,
    layers: Sequence[int] | None = None,
    task: str | Path | None = None,
    limit: int = 40,
    skip_first: bool = False,
    batch_size: int = 8,
    device: str = "cpu",
    dtype: Dtype = "float32",
    seed: int = 0,
    offset: int = 0,
    balance: bool = False,
    save_activations: bool = False,
    second_moment: bool = False,
    trust_remote_code: bool = False,
    checkpoint_every: float = 30.0,
    engine: Engine = "local",
    ray_address: str | None = None,
    workers: int | None = None,
    threads: int | None = None,
    activations_dir: str | Path | None = None,
    out: str | Path | None = None,
    progress: bool = True,
    view: ModelView | None = None,
) -> Result:
    """``geomlens report``: every analysis on one capture, then ``report.html``.

    Args:
        task: the multiple-choice task of the concept tests (None: the default task).
        limit: items of that task scored.
        skip_first: the primary view leaves position 0 out (both views are computed).

    The other arguments are ``capture``'s; ``out`` defaults to ``runs/report-<model>``.
    The page is ``result.folder / "report.html"``.
    """
    from geomlens.commands.report import run_report

    config, engine_config = configs(locals())
    run = run_report(
        config,
        folder_for("report", out, model),
        task=None if task is None else str(task),
        limit=limit,
        skip_first=skip_first,
        view=view,
        progress=progress,
        checkpoint_every_s=checkpoint_every,
        engine=engine_config,
    )
    return result_of("report", run)
