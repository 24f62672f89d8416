"""Song & Zhong's claims about the positional and context parts, decided on the view
without position 0 with the sampling noise removed (see ``schema.PositionView``)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from geomlens.analyses.decomposition.schema import (
    PositionView,
    interval_note,
    median_interval,
    published_section,
    skip_first_intervals,
    skip_first_layers,
)
from geomlens.reporting import guards
from geomlens.reporting.claims import SONG, SONG_SCOPE, Claim, judge, text
from geomlens.reporting.published import published_text

LOW_RANK = 20
"""The rank a low-rank positional part stays within: the ScreeNOT bound of Song & Zhong's
code, under which their GPT-2 ranks lie (9-15 by layer, Table 1)."""


def _median_claim(view: PositionView, key: str, scale: float | None, **fields: Any) -> Claim:
    """A position/context claim on the median over layers of ``key`` (divided by
    ``scale``), with that median's interval and the noise in the positional estimate."""
    number = view.median(key)
    number = None if number is None or not scale else number / scale
    low, high = median_interval(view.intervals, key, scale) if number is not None else (None, None)
    share, needed = view.noise()
    return Claim(
        verdict="",
        number=number,
        low=low,
        high=high,
        interval=interval_note(view.intervals, key),
        paper=SONG,
        noise_share=share,
        contexts_needed=needed,
        **fields,
    )


def _low_rank(view: PositionView, published: dict[str, Any] | None) -> Claim:
    n_pos = next((r.get("n_positions") for r in view.rows), None)
    rank = view.median("pos_rank_corrected")
    claim = _median_claim(
        view,
        "pos_rank_corrected",
        1.0,
        id="song.pos_low_rank",
        claim="The positional part is low-rank",
        rule="median over layers of the number of directions of pos standing above its noise "
        f"floor (eigenvalues of the noise-free Gram matrix) <= {LOW_RANK}",
        value="–"
        if rank is None
        else f"{rank:g} direction(s) above the noise floor; with the noise removed 95% of the "
        f"energy in {view.shown('pos_rank95_corrected', '.3g')} (plain "
        f"{text(view.median('pos_rank95'), 'g')}, noise alone "
        f"{text(view.median('pos_rank95_noise'), 'g')}), stable rank "
        f"{view.shown('pos_stable_rank_corrected', '.2f')}",
        threshold=float(LOW_RANK),
        scope=SONG_SCOPE,
        threshold_source="the ScreeNOT rank bound k = 20 of the authors' code, under which "
        "their GPT-2 ranks lie (9-15 by layer; Table 1)",
        published=published_text(published, "pos_rank"),
    )
    if rank is not None:
        claim = replace(
            claim,
            interval="none: a count of eigenvalues above the whole corpus's noise floor (the "
            "floor is not redrawn per resample)",
        )
    return judge(
        claim,
        False,
        view.missing,
        [view.noise_guard(), guards.short_windows(n_pos, LOW_RANK)],
    )


def _low_frequency(view: PositionView) -> Claim:
    key = "pos_low_freq_energy_corrected"
    claim = _median_claim(
        view,
        key,
        1.0,
        id="song.pos_low_frequency",
        claim="The positional basis is low-frequency (smooth Gram matrix)",
        rule="median over layers of the share of pos's energy, noise removed, in the lowest "
        "10% of frequencies over positions >= 0.5",
        value="–"
        if view.median(key) is None
        else f"{view.shown(key, '.2f')} with the noise removed (plain "
        f"{text(view.median('pos_low_freq_energy'), '.2f')}; noise alone "
        f"{text(view.median('pos_low_freq_energy_noise'), '.2f')}); the normalised Gram "
        f"matrix's low-frequency share {text(view.median('pos_low_freq'), '.2f')} (plain)",
        threshold=0.5,
        scope=SONG_SCOPE,
        threshold_source="geomlens: half of the energy, five times the 10% that white noise "
        "puts there (the paper states the property, not a number)",
    )
    return judge(claim, True, view.missing, [view.noise_guard()])


def _incoherence(view: PositionView) -> Claim:
    baseline = view.median("coherence_max_noise")
    gauss = view.median("coherence_random_max")
    claim = _median_claim(
        view,
        "coherence_max_corrected",
        baseline,
        id="song.incoherence",
        claim="Positional and context vectors are incoherent (nearly orthogonal)",
        rule="median over layers of the mutual coherence max |cos(pos_t, ctx_c)|, noise "
        "removed, <= 1.25 x that of a split-half noise-only positional estimate treated alike",
        value="–"
        if baseline is None or view.median("coherence_max_corrected") is None
        else f"{view.shown('coherence_max_corrected', '.3f')} with the noise removed "
        f"(plain {text(view.median('coherence_max'), '.3f')}) against "
        f"{baseline:.3f} for noise alone (isotropic Gaussian vectors: {text(gauss, '.3f')})",
        threshold=1.25,
        scope=SONG_SCOPE,
        threshold_source="geomlens: within a quarter of the baseline (the paper states no "
        "number); the baseline keeps the hidden states' anisotropy, which Gaussian vectors "
        "lack",
    )
    return judge(claim, False, view.missing, [view.noise_guard()])


def _incoherence_subspaces(view: PositionView) -> Claim:
    baseline = view.median("incoherence_mean_noise")
    claim = _median_claim(
        view,
        "incoherence_mean_corrected",
        baseline,
        id="song.incoherence_subspaces",
        claim="Position and context subspaces are nearly orthogonal (geomlens variant)",
        rule="median mean principal-angle cosine between the top-r positional directions "
        "(noise removed) and the top-r context directions <= 1.25 x that of a split-half "
        "noise-only estimate",
        value="–"
        if baseline is None or view.median("incoherence_mean_corrected") is None
        else f"{view.shown('incoherence_mean_corrected', '.3f')} against {baseline:.3f} for "
        "noise alone",
        threshold=1.25,
        kind="variant",
        scope=SONG_SCOPE,
        threshold_source="geomlens, as the coherence claim",
    )
    return judge(claim, False, view.missing, [view.noise_guard()])


def _topics(view: PositionView) -> Claim:
    """Song & Zhong: context vectors cluster by topic (ARI, and |cos| within > between)."""
    ari, within, between = (
        view.median("ctx_cluster_ari"),
        view.median("ctx_cos_within"),
        view.median("ctx_cos_between"),
    )
    topics = None if ari is None or within is None or between is None else ari
    claim = _median_claim(
        view,
        "ctx_cluster_ari",
        1.0,
        id="song.context_topics",
        claim="Context vectors cluster by document topic",
        rule="median ARI of k-means against topics >= 0.1 and within-topic |cos| > between",
        value="–"
        if topics is None
        else f"ARI {view.shown('ctx_cluster_ari', '.2f')}; |cos| within {within:.3f}, "
        f"between {between:.3f}",
        threshold=0.1,
        scope=SONG_SCOPE + "; needs documents with topic labels",
        threshold_source="geomlens: clearly above the 0 of a random clustering",
    )
    claim = replace(claim, number=topics, noise_share=None, contexts_needed=None)
    judged = judge(claim, True, "no topic labels" if view.rows else view.missing)
    if topics is not None and within is not None and between is not None and within <= between:
        return replace(judged, verdict="not reproduced", why="", guard="")
    return judged


def position_claims(metrics: dict[str, Any], model: dict[str, Any]) -> list[Claim]:
    view = PositionView(skip_first_layers(metrics), skip_first_intervals(metrics))
    return [
        _low_rank(view, published_section(metrics, model)),
        _low_frequency(view),
        _incoherence(view),
        _incoherence_subspaces(view),
        _topics(view),
    ]
