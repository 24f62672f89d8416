"""Layer norm and the hypersphere (Molina 2023, "Traveling Words"): the analysis step of
``geomlens sphere`` and of the report's sphere stage.

Joins the pure analyses and the figures. The capture also fills every norm's
statistics from the first few corpus windows (its "norms" tap: identity and radii); the
analysis step runs forward passes of its own only on the prompt (logit lens, FFN
contributions). Numbers
go to ``metrics.json`` under "sphere"; token tables to ``sphere_heads.json`` and
``sphere_ffn.json``; the UMAP coordinates to ``sphere_umap.json``; figures to
``figures/sphere_*``. See docs/sphere.md.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import torch

from geomlens.analyses.base import StageRequest
from geomlens.analyses.common.applicable import (
    NO_NORMS,
    NOT_APPLICABLE,
    modelled,
    norms_missing,
    not_applicable,
    readout_missing,
)
from geomlens.analyses.sphere import compute as sph
from geomlens.analyses.sphere import ffn as ffn_analysis
from geomlens.analyses.sphere import figures as figs
from geomlens.analyses.sphere import head_probe, lens
from geomlens.analyses.sphere.schema import (
    Ffn,
    HeadProbe,
    Identity,
    SphereMetrics,
    TopTokens,
    Trajectory,
)
from geomlens.analyses.sphere.word_frequency import english_zipf
from geomlens.capturing.capture import CaptureConfig
from geomlens.capturing.hooks import hidden_states, recording_inputs
from geomlens.capturing.taps import Taps, fill_taps
from geomlens.corpus import Windows, load_corpus
from geomlens.corpus.tokenized import document_ids
from geomlens.errors import FILE_LIMITS, GeomlensError, short_list, within_limit
from geomlens.io.extras import used
from geomlens.io.files import read_user_text, utf8_text
from geomlens.io.progress import Step, StepLines, quiet, step_bar
from geomlens.models.view import ModelView
from geomlens.pipeline.taps import filled_tap
from geomlens.reporting.figures import drawn, rendered_in_background, save_later
from geomlens.runs.runfolder import RunFolder, write_json
from geomlens.stats import DecompositionAccumulator

DEFAULT_PROMPT = "To kill two birds with one stone"
IDENTITY_WINDOWS = 4
UMAP_TOKENS = 3000


def identity_windows() -> int:
    """The windows whose norm statistics the capture fills (its "norms" tap)."""
    return IDENTITY_WINDOWS


def load_nouns(path: str | Path | None = None) -> list[str]:
    """The probe nouns: one per line from ``path``, else the packaged list."""
    if path is None:
        text = resources.files("geomlens").joinpath("data/nouns.txt").read_text()
    else:
        text = read_user_text(path, f"--nouns {path}", FILE_LIMITS["--nouns"])
    words = [w.strip() for w in text.splitlines() if w.strip() and not w.startswith("#")]
    if len(words) < 2:
        raise GeomlensError(f"--nouns {path}: needs at least 2 words, one per line.")
    if len(set(words)) < 2:  # one word repeated: every head would attend to "itself"
        shown = repr(words[0]) if len(words[0]) <= 40 else repr(words[0][:37] + "...")
        raise GeomlensError(
            f"--nouns {path}: holds one word only ({shown}, {len(words)} times), but the "
            "head probe compares different words; give at least 2 different ones."
        )
    within_limit(f"--nouns {path}", "nouns", len(words), "keep fewer words, one per line")
    return words


def norm_pass(view: ModelView, input_ids: torch.Tensor) -> list[sph.NormStats]:
    """Every norm's statistics over windows [n, T] alone (the capture's "norms" tap,
    filled without a capture)."""
    tap = sph.NormTap(view, len(input_ids))
    fill_taps(view, input_ids, Taps({"norms": tap}))
    return tap.finalize()


def mlp_inputs(view: ModelView, ids: torch.Tensor) -> dict[int, torch.Tensor]:
    """One forward pass of ``ids`` [1, T]; block -> [d] MLP input at the last position."""
    modules = {block.index: block.mlp().module for block in view.blocks}
    with torch.inference_mode(), recording_inputs(modules) as record:
        view.base(input_ids=ids.to(view.device))
    # [1, T, d], or [T, d] where the MLP's first module sees flattened tokens (OPT)
    return {i: x.reshape(-1, x.shape[-1])[-1] for i, x in record.items()}


def token_strings(view: ModelView) -> list[str]:
    """Every vocabulary id decoded on its own (what the tables show)."""
    V = int(view.W_E.shape[0])
    if view.tokenizer is None:
        return [str(i) for i in range(V)]
    return list(view.tokenizer.batch_decode([[i] for i in range(V)]))


def corpus_counts(view: ModelView, config: CaptureConfig) -> np.ndarray:
    """[vocab] token counts over the whole corpus of ``config`` (for frequency ranks)."""
    V = int(view.W_E.shape[0])
    counts = np.zeros(V, dtype=np.float64)
    corpus = load_corpus(config.corpus, config.text_column, config.label_column)
    documents = document_ids(corpus, view.tokenizer)
    while chunk := list(itertools.islice(documents, 1024)):  # one bincount per 1024 documents
        flat = np.concatenate(chunk)
        counts += np.bincount(flat[flat < V], minlength=V)
    return counts


def sphere_figures(
    out: Path,
    orient: sph.Orientation,
    top: sph.TopTokens | None,
    probe: head_probe.HeadProbe,
    traj: lens.Trajectory | None,
    map3: lens.TrajectoryMap | None,
    tokens: list[str],
) -> None:
    """Every sphere figure into ``out``, drawn in a forked process (see
    ``rendered_in_background``): the report draws them while its next stage runs. A part
    that does not apply draws no figure (the section says why): no norm read, no radii
    or cosines; no readout norm or no readout, no top tokens; no readout, no logit lens or
    map; without ``map3`` (umap-learn not installed) the trajectory map is left out;
    without a probed layer (every block's mixing not modelled) the head figure is."""
    with rendered_in_background():
        if orient.layers:
            save_later(figs.radius_figure(orient.layers), out / "sphere_radius.png")
        if orient.cosines:
            save_later(figs.cosine_figure(orient.cosines), out / "sphere_cosines.png")
        if top is not None:
            save_later(figs.top_tokens_figure(top), out / "sphere_top_tokens.png")
        if probe.layers:  # no layer probed: the hidden-state tier's blocks, not read
            save_later(figs.self_attention_figure(probe), out / "sphere_heads.png")
        if traj is None:
            return
        save_later(figs.lens_figure(traj), out / "sphere_lens.png")
        if map3 is None:
            return
        save_later(figs.trajectory_figure_3d(map3, traj, tokens), out / "sphere_trajectory.html")
        save_later(figs.trajectory_figure_2d(map3, traj, tokens), out / "sphere_trajectory.png")


def trajectory_map(
    view: ModelView,
    hidden: dict[int, torch.Tensor],
    prompt_ids: Sequence[int],
    seed: int,
    step: Step = quiet,
) -> lens.TrajectoryMap:
    """The 3-d UMAP of the prompt's trajectory among a sample of the vocabulary, with a
    bar over UMAP's epochs where ``step`` prints (a ``StepLines``)."""
    sample = lens.vocabulary_sample(int(view.W_E.shape[0]), UMAP_TOKENS, seed, include=prompt_ids)
    bar = None
    if isinstance(step, StepLines) and step.enabled:
        desc = f"{step.prefix}: {step.current}"
        bar = {"desc": desc, "unit": "epoch", "bar_format": None, "disable": False}
    return lens.trajectory_map(view, hidden, sample, n_components=3, seed=seed, epoch_bar=bar)


def umap_record(map3: lens.TrajectoryMap, seed: int) -> dict[str, Any]:
    """What metrics.json says about the map (the map itself is in sphere_umap.json)."""
    return {
        "n_tokens": len(map3.token_ids),
        "metric": map3.metric,
        "seed": seed,
        "file": "sphere_umap.json",
    }


def lens_and_ffn(
    view: ModelView, prompt_ids: list[int], layers: list[int], tokens: list[str], step: Step
) -> tuple[dict[int, torch.Tensor], lens.Trajectory, ffn_analysis.FfnResult]:
    """The prompt's hidden states [T, d] by layer, its logit-lens trajectory and the FFN
    sub-updates of ``layers``, with one bar over the readouts."""
    pid = torch.as_tensor([prompt_ids], dtype=torch.long)
    # one readout for the lens, one per layer's FFN rows, one for the prompt's FFN
    with step_bar(step, len(layers) + 2, "readout") as bar:
        hidden = {k: v[0] for k, v in hidden_states(view, pid, range(view.n_layers + 1)).items()}
        traj = lens.trajectory(view, prompt_ids, hidden, tokens)
        bar.update(1)
        ffn = ffn_analysis.ffn_subupdates(
            view,
            layers,
            tokens=tokens,
            prompt_inputs=None if view.not_modelled() else mlp_inputs(view, pid),
            target_id=traj.prediction_id,
            h_last=hidden[view.n_layers][-1],
            progress=bar.update,
        )
    return hidden, traj, ffn


@dataclass(frozen=True)
class SphereAnalysis:
    """The sphere's analysis step (an ``Analysis``): the layer-norm identity, orientation,
    top tokens, the head probe, the logit lens, FFN sub-updates and the UMAP map; ``step``
    hears each step start."""

    config: CaptureConfig
    nouns: list[str]
    prompt: str
    probe_layers: list[int] | None
    step: Step = quiet

    def __call__(
        self, folder: RunFolder, view: ModelView, windows: Windows, acc: DecompositionAccumulator
    ) -> None:
        config, nouns, prompt, probe_layers, step = (
            self.config,
            self.nouns,
            self.prompt,
            self.probe_layers,
            self.step,
        )
        step("norm statistics and top tokens")
        tokens = token_strings(view)
        n_id = min(IDENTITY_WINDOWS, windows.n_contexts)
        stats = filled_tap(folder, "norms", sph.NormTap(view, n_id)).finalize()
        identity = sph.identity_result(stats, n_id, config.dtype)
        orient = sph.orientation(view, stats)
        absent = unavailable_parts(view)
        top = None
        if "top_tokens" not in absent:
            counts = corpus_counts(view, config)
            zipf = english_zipf(tokens) if used("wordfreq") else None
            top = sph.top_tokens(view, tokens, counts, zipf=zipf, seed=config.seed)

        step("head probe")
        layers = probe_layers if probe_layers is not None else head_probe.default_probe_layers(view)
        skipped = not_applicable(view, "the head probe and the FFN sub-updates")
        layers = modelled(view, layers)  # the hidden-state tier reads no head or MLP weights
        kept, noun_ids = head_probe.single_token_ids(view.tokenizer, nouns)
        with step_bar(step, len(layers), "layer") as bar:
            probe = head_probe.probe_heads(
                view,
                noun_ids,
                layers,
                nouns=kept,
                tokens=tokens,
                n_dropped=len(nouns) - len(kept),
                progress=bar.update,
            )

        step("logit lens and FFN sub-updates")
        prompt_ids = check_prompt(view, prompt)
        traj = ffn = map3 = None
        if "trajectory" not in absent:
            hidden, traj, ffn = lens_and_ffn(view, prompt_ids, layers, tokens, step)
        if traj is not None and drawn() and used("umap"):  # it only feeds the map figures
            step("UMAP of the trajectory")
            map3 = trajectory_map(view, hidden, prompt_ids, config.seed, step)
        umap = None if map3 is None else umap_record(map3, config.seed)

        step("figures")
        block = SphereMetrics(
            readout=lens.readout_description(view),
            placement=view.blocks[0].placement,
            layout=view.blocks[0].layout,
            norm_kind=view.blocks[0].norm_attn.kind,
            identity=Identity.from_dict(
                identity.to_dict() | {"not_applicable": absent.get("identity")}
            ),
            orientation=orient.to_dict(),
            top_tokens=None if top is None else TopTokens.from_dict(top.to_dict()),
            heads=HeadProbe.from_dict(probe.to_dict()),
            ffn=None if ffn is None else Ffn.from_dict(ffn.to_dict()),
            trajectory=None
            if traj is None
            else Trajectory.from_dict({**traj.to_dict(), "umap": umap}),
            prompt=prompt,
            not_available=absent or None,
        )
        extra = {} if skipped is None else {"not_applicable": skipped}
        folder.merge_metrics("sphere", block.to_dict() | extra)
        write_json(folder.path / "sphere_heads.json", probe.tables_dict())
        if ffn is not None:
            write_json(folder.path / "sphere_ffn.json", ffn.tables_dict())
        if map3 is not None:
            write_json(folder.path / "sphere_umap.json", map3.to_dict())
        if drawn():
            sphere_figures(folder.path / "figures", orient, top, probe, traj, map3, tokens)


def unavailable_parts(view: ModelView) -> dict[str, str]:
    """Part -> the one sentence it writes instead of its numbers, for the parts that do not
    apply to ``view``: the layer-norm identity and radii where no norm is read
    (``norms_missing``); the top tokens where the readout has no norm to score through or
    the readout is not the model's (``readout_missing``); the logit lens, its map and the
    FFN sub-updates where the readout is not the model's. Empty for every full-tier model."""
    out: dict[str, str] = {}
    no_norms = norms_missing(view)
    if no_norms is not None:
        out["identity"] = no_norms
    no_readout = readout_missing(view)
    if no_readout is not None:
        out["top_tokens"] = out["trajectory"] = no_readout
    elif sph.readout_norm(view)[1].kind == "identity":
        why = NO_NORMS if no_norms else "the model has no final layer norm geomlens can read"
        out["top_tokens"] = (
            f"{NOT_APPLICABLE}: the top tokens score embeddings through the readout's norm, "
            f"and {why}"
        )
    return out


def check_probe_layers(model: str, view: ModelView | None, layers: list[int] | None) -> None:
    """Refuse an empty list of probe layers, and layers out of range (when the depth is
    known), before any capture; the message quotes at most a few layers."""
    from geomlens.models import BUNDLED

    if layers is None:
        return
    if not layers:
        raise GeomlensError(
            "--probe-layers names no block (a range like 5-2 is empty); give a list like "
            "0,4,8, a range like 0-6, or leave it out for the first, middle and last."
        )
    n = view.n_layers if view is not None else getattr(BUNDLED.get(model), "n_layers", None)
    bad = [x for x in layers if x < 0 or (n is not None and x >= n)]
    if bad:
        scope = f"blocks are 0..{n - 1}" if n is not None else "blocks count from 0"
        raise GeomlensError(f"--probe-layers {short_list(bad)} out of range: {scope}.")


def check_prompt(view: ModelView, prompt: str) -> list[int]:
    """The prompt's token ids; refused when under two tokens or longer than the model's
    positions (checked before the capture, not after it)."""
    utf8_text(prompt, "--prompt")
    prompt_ids = list(view.tokenizer(prompt)["input_ids"])
    shown = repr(prompt) if len(prompt) <= 40 else repr(prompt[:37] + "...")
    if len(prompt_ids) < 2:
        raise GeomlensError(f"--prompt {shown} is under two tokens; give a longer one.")
    if view.n_ctx is not None and len(prompt_ids) > view.n_ctx:
        raise GeomlensError(
            f"--prompt {shown} has {len(prompt_ids)} tokens, more than {view.name} allows "
            f"({view.n_ctx} positions); give a shorter prompt."
        )
    return prompt_ids


def sphere_stage(request: StageRequest, step: Step) -> SphereAnalysis:
    """The report's layer-norm stage (the packaged prompt, first, middle and last blocks)."""
    return SphereAnalysis(request.config, request.words, DEFAULT_PROMPT, None, step)
