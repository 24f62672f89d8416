"""The commands as Python functions: the CLI's options as typed keyword arguments.

Each function builds its command's config (``geomlens.commands.decompose.DecomposeConfig``,
...) as ``geomlens <command>`` does from its flags (same defaults: SmolLM2, the BBC corpus,
128 windows of 128 tokens, ``runs/<command>-<model>``), and returns what the command's
``run(config)`` returns, a ``Result``. The same arguments write the same run folder as the
command line, so a run made one way is reused the other way.

Arguments only Python can give: ``view``, a model already loaded (``geomlens.load_model``)
for the same ``model``, so several calls load it once (``walk`` needs it loaded with
``attention="eager"``); ``progress`` is the CLI's ``--quiet`` the other way round.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from geomlens.api.checks import checked
from geomlens.commands.result import Result
from geomlens.errors import GeomlensError
from geomlens.models.view import ModelView

Dtype = Literal["float32", "bfloat16"]
Engine = Literal["local", "ray"]


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
    from geomlens.commands.capture import CaptureRunConfig, run

    return run(CaptureRunConfig.of(locals()), view=view)


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
    from geomlens.commands.decompose import DecomposeConfig, run

    return run(DecomposeConfig.of(locals()), view=view)


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
    from geomlens.commands.sphere import SphereConfig, run

    return run(SphereConfig.of(locals()), view=view)


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
    if text is not None and text_file is not None:
        raise GeomlensError("geomlens.walk() takes text or text_file, not both.")
    from geomlens.commands.walk import WalkConfig, run

    return run(WalkConfig.of(locals()), view=view)


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
    from geomlens.commands.concepts import ConceptsRunConfig, run

    return run(ConceptsRunConfig.of(locals()), view=view)


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
    from geomlens.commands.report import ReportConfig, run

    return run(ReportConfig.of(locals()), view=view)
