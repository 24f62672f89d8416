"""The papers' claims as data: verdicts with intervals, each claim scoped to where its paper
made it, every guard that makes a claim inconclusive, and the summary counting claims
only."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest
import torch
from synthetic import planted
from threadpoolctl import threadpool_limits

from geomlens.analyses.attention.claims import DILUTION, IN_BASIS
from geomlens.analyses.decomposition.compute import analyse_layers
from geomlens.analyses.decomposition.intervals import decomposition_intervals
from geomlens.analyses.registry import claim_records, claims
from geomlens.reporting.claims import counted, decide
from geomlens.stats import CapturedBatch, DecompositionAccumulator
from geomlens.stats.intervals import mean_difference, wilson

PAPERS = ("song", "molina", "singh")
"""The id prefixes of the three papers' claims (the later analyses' claims have their own
tests)."""

DECODER = {"is_encoder": False, "n_heads": 12, "position": "rotary", "tied": True}
ENCODER = {"is_encoder": True, "n_heads": 12, "position": "learned", "tied": True}
T5 = {"is_encoder": False, "n_heads": 12, "position": "t5-relative", "tied": True}


def by_id(metrics: dict, model: dict | None = None) -> dict:
    return {c.id: c for c in claims(metrics, model)}


def test_an_interval_holding_the_threshold_decides_nothing() -> None:
    assert decide(0.9, 1.0, True, "", 0.6, 1.2) == "inconclusive"
    assert decide(1.3, 1.0, True, "", 1.1, 1.5) == "reproduced"
    assert decide(0.7, 1.0, True, "", 0.5, 0.9) == "not reproduced"
    assert decide(0.7, 1.0, False, "") == "reproduced"  # no interval: the number decides
    assert decide(None, 1.0, True, "no walk") == "not measured: no walk"


# ------------------------------------------------------------------ position and context


def position_metrics(share: float, **row: Any) -> dict:
    """A view without position 0 of three layers with noise share ``share``."""
    base = {
        "skip_first": True,
        "n_contexts": 128,
        "n_positions": 127,
        "pos_noise_share": share,
        "pos_rank_corrected": 4,
        "pos_rank95_corrected": 5,
        "pos_rank95": 40,
        "pos_rank95_noise": 80,
        "pos_stable_rank_corrected": 2.0,
        "pos_low_freq_energy_corrected": 0.8,
        "pos_low_freq_energy": 0.5,
        "pos_low_freq_energy_noise": 0.1,
        "pos_low_freq": 0.7,
        "coherence_max_corrected": 0.3,
        "coherence_max_noise": 0.5,
        "coherence_max": 0.4,
        "coherence_random_max": 0.2,
        "incoherence_mean_corrected": 0.1,
        "incoherence_mean_noise": 0.3,
        **row,
    }
    rows = [{**base, "layer": i} for i in range(3)]
    intervals = {
        "method": "delete-half jackknife",
        "n_draws": 30,
        "groups": 16,
        "not_resampled": {},
        "medians": {
            "pos_low_freq_energy_corrected": [0.7, 0.9],
            "coherence_max_corrected": [0.28, 0.32],
            "pos_stable_rank_corrected": [1.8, 2.2],
        },
    }
    view = {"skip_first": True, "layers": rows, "intervals": intervals}
    return {"decomposition": {"skip_first": False, "other_view": view}}


def test_position_claims_read_the_noise_corrected_numbers_with_their_intervals() -> None:
    found = by_id(position_metrics(0.07), DECODER)
    rank = found["song.pos_low_rank"]
    assert rank.verdict == "reproduced" and rank.number == 4 and rank.threshold == 20
    assert rank.noise_share == 0.07 and rank.contexts_needed == 128
    low = found["song.pos_low_frequency"]
    assert low.verdict == "reproduced" and (low.low, low.high) == (0.7, 0.9)
    assert (
        "low-frequency energy share 0.80 [0.70, 0.90] with the noise removed (0.50 with the "
        "noise in; noise alone 0.10)" in low.value
    )
    mu = found["song.incoherence"]  # 0.3 against 0.2 for isotropic random vectors
    assert mu.verdict == "reproduced" and mu.number == pytest.approx(1.5)
    assert mu.low == pytest.approx(1.4) and "against 0.200 for isotropic random" in mu.value
    assert "noise-only estimate treated alike reaches 0.500" in mu.value
    far = position_metrics(0.07, coherence_max_corrected=0.676, coherence_random_max=0.18)
    far["decomposition"]["other_view"]["intervals"]["medians"].pop("coherence_max_corrected")
    assert by_id(far)["song.incoherence"].verdict == "not reproduced"  # SmolLM2's 0.676
    assert "16 groups" in low.interval and "noise floor" in rank.interval
    # an interval holding the threshold: inconclusive, and the sentence says so
    wide = position_metrics(0.07, pos_low_freq_energy_corrected=0.55)
    wide["decomposition"]["other_view"]["intervals"]["medians"]["pos_low_freq_energy_corrected"] = [
        0.4,
        0.7,
    ]
    unsure = by_id(wide)["song.pos_low_frequency"]
    assert unsure.verdict == "inconclusive" and unsure.guard == "interval"
    assert "[0.4, 0.7] holds the threshold 0.5" in unsure.why


def test_noise_over_ten_percent_makes_every_claim_on_the_positional_estimate_inconclusive() -> None:
    found = by_id(position_metrics(0.36), DECODER)
    for name in (
        "song.pos_low_rank",
        "song.incoherence",
        "song.incoherence_subspaces",
    ):
        claim = found[name]
        assert claim.verdict == "inconclusive" and claim.guard == "noise"
        assert "36% of the positional estimate's energy at 128 contexts" in claim.why
        assert "about 648 contexts would bring it under 10%" in claim.why
        assert claim.contexts_needed == 648 and claim.number is not None
    # the topics claim reads the context vectors, not the positional estimate
    assert found["song.context_topics"].guard != "noise"
    # the low-frequency estimate is unbiased under noise: its interval decides, up to the
    # largest share the planted calibration covers (0.65)
    assert found["song.pos_low_frequency"].verdict == "reproduced"
    beyond = by_id(position_metrics(0.7), DECODER)["song.pos_low_frequency"]
    assert beyond.verdict == "inconclusive" and "more than 65%" in beyond.why


def test_a_run_without_noise_numbers_is_not_measured_and_short_windows_decide_nothing() -> None:
    old = position_metrics(0.05)
    for row in old["decomposition"]["other_view"]["layers"]:
        del row["pos_rank_corrected"], row["pos_noise_share"]
    rank = by_id(old)["song.pos_low_rank"]
    assert rank.verdict.startswith("not measured: this run has no noise-corrected")
    short = by_id(position_metrics(0.05, n_positions=63))["song.pos_low_rank"]
    assert short.verdict == "inconclusive" and short.guard == "short windows"
    assert "63 positions are too short" in short.why
    assert by_id({})["song.pos_low_rank"].verdict == "not measured: no decomposition in this run"


def stream_groups(hidden: np.ndarray, groups: int = 16) -> DecompositionAccumulator:
    """Planted [C, T, d] hidden states through the accumulator, with interval groups."""
    n, length, d = hidden.shape
    acc = DecompositionAccumulator([0], n, length, d, groups=groups)
    for start in range(0, n, 16):
        idx = np.arange(start, min(n, start + 16))
        batch = {0: torch.from_numpy(np.ascontiguousarray(hidden[idx]))}
        acc.update(CapturedBatch(hidden=batch, context_index=torch.from_numpy(idx)))
    return acc


@pytest.mark.parametrize(("noise", "decided"), [(0.25, True), (1.2, False)])
def test_planted_corpora_are_decided_only_when_their_noise_is_small(
    noise: float, decided: bool
) -> None:
    """A planted smooth rank-4 spiral with topic contexts and Gaussian residuals, through
    the accumulator, the analysis and its intervals: a quiet corpus decides the position
    claims (low rank and low frequency reproduced), a noisy one (about 65% of the
    positional energy noise) leaves them inconclusive and names the contexts it needs."""
    data = planted(
        n_contexts=128, length=104, d_model=128, noise=noise, exact=False, seed=2, ctx_dim=8
    )
    acc = stream_groups(data.hidden)
    with threadpool_limits(limits=1, user_api="blas"):  # as the commands run the analyses
        rows = [r.to_dict() for r in analyse_layers(acc, data.labels, skip_first=True)]
        intervals = decomposition_intervals(acc, rows, data.labels, n_draws=8)
    metrics = {"decomposition": {"skip_first": True, "layers": rows, "intervals": intervals}}
    found = by_id(metrics, DECODER)
    share = rows[0]["pos_noise_share"]
    assert (share < 0.1) if decided else (share > 0.5)
    for name in ("song.pos_low_rank", "song.pos_low_frequency"):
        claim = found[name]
        if decided:
            assert claim.verdict == "reproduced", claim
        else:
            assert claim.verdict == "inconclusive" and claim.guard == "noise"
            assert claim.contexts_needed is not None and claim.contexts_needed > 128 * 9
    assert rows[0]["pos_rank_corrected"] == 4


# ------------------------------------------------------------------ W_QK


def _qk(residual: float, rand: float, inside: float, k: int = 10) -> dict:
    head = {
        "head": 0,
        "residual": 0.4,
        "baseline_residual": 0.8,
        "share_in_basis": 0.3,
        "whole_residual": residual,
        "whole_baseline_residual": rand,
        "whole_low_rank_in_basis": inside,
        "whole_baseline_low_rank_in_basis": 0.02,
    }
    qk = {"attention": {"qk_basis": [{"layer": 1, "k": k, "rank": 2, "heads": [head]}]}}
    return {**position_metrics(0.05), **qk}


def test_w_qk_claims_read_the_whole_matrix_and_keep_the_block_fit_as_a_variant() -> None:
    fits = by_id(_qk(0.2, 0.9, 0.8))
    assert fits["song.wqk_low_rank_plus_diagonal"].verdict == "reproduced"
    assert fits["song.wqk_low_rank_positional"].verdict == "reproduced"
    assert fits["song.wqk_low_rank_plus_diagonal_block"].verdict == "reproduced"
    assert fits["song.wqk_low_rank_plus_diagonal_block"].kind == "variant"
    # a fit leaving most of the matrix, or no better than a random head, is not reproduced
    for args in ((0.93, 0.96, 0.8), (0.3, 0.25, 0.8)):
        assert by_id(_qk(*args))["song.wqk_low_rank_plus_diagonal"].verdict == "not reproduced"
    assert by_id(_qk(0.2, 0.9, 0.02))["song.wqk_low_rank_positional"].verdict == "not reproduced"
    # the two read in the positional basis carry the noise guard of the blocks' layers
    noisy = {**_qk(0.2, 0.9, 0.8), **position_metrics(0.4)}
    noisy_claims = by_id(noisy)
    assert noisy_claims["song.wqk_low_rank_positional"].guard == "noise"
    assert noisy_claims["song.wqk_low_rank_plus_diagonal"].verdict == "reproduced"
    # a share far under the threshold decides through the noise: noise can lower the share
    # read only to DILUTION of what it is (planted calibration), not from 0.5 to 0.05
    diluted = by_id({**_qk(0.2, 0.9, 0.05), **position_metrics(0.4)})
    assert diluted["song.wqk_low_rank_positional"].verdict == "not reproduced"
    near = by_id({**_qk(0.2, 0.9, IN_BASIS * DILUTION * 1.2), **position_metrics(0.4)})
    assert near["song.wqk_low_rank_positional"].guard == "noise"
    beyond = by_id({**_qk(0.2, 0.9, 0.05), **position_metrics(0.8)})  # past the calibration
    assert beyond["song.wqk_low_rank_positional"].guard == "noise"
    # a run made before the whole-matrix fit: not measured, the block variant still decides
    old = _qk(0.2, 0.9, 0.8)
    for h in old["attention"]["qk_basis"][0]["heads"]:
        for key in [k for k in h if k.startswith("whole_")]:
            del h[key]
    old_claims = by_id(old)
    assert old_claims["song.wqk_low_rank_plus_diagonal"].verdict.startswith("not measured")
    assert old_claims["song.wqk_low_rank_plus_diagonal_block"].verdict == "reproduced"


# ------------------------------------------------------------------ the sphere


def sphere(
    value: float,
    low: float,
    high: float,
    plain_ids: tuple = tuple(range(10, 20)),
    tokens: tuple = ("the",) * 10,
    zipf: tuple = (5.0, None),
) -> dict:
    shift = {"value": value, "low": low, "high": high, "method": "bootstrap", "n_boot": 1000}
    affine, plain = zipf[0], (zipf[1] if zipf[1] is not None else zipf[0] - value)
    top = {
        "k": 10,
        "affine": {"top_ids": list(range(10)), "top": ["of"] * 10},
        "plain": {"top_ids": list(plain_ids), "top": list(tokens)},
        "english_zipf_shift": shift,
        "mean_english_zipf": {"affine": affine, "plain": plain, "vocab_mean": 3.2},
    }
    return {"sphere": {"top_tokens": top, "identity": {"max_rel_err": 1e-9}}}


GAMMA = "molina.gamma_beta_common_words"


def test_gamma_beta_claim_reads_english_word_frequency_with_its_interval() -> None:
    assert by_id(sphere(1.5, 0.7, 2.3), DECODER)[GAMMA].verdict == "reproduced"
    unsure = by_id(sphere(0.4, -0.2, 1.0), DECODER)[GAMMA]
    assert unsure.verdict == "inconclusive" and unsure.guard == "interval"
    assert by_id(sphere(-1.0, -1.8, -0.3), DECODER)[GAMMA].verdict == "not reproduced"
    assert by_id({}, DECODER)[GAMMA].verdict.startswith("not measured")


def test_gamma_beta_unchanged_lists_answer_the_claim_and_guards_unscorable_tokens() -> None:
    # the same tokens, or all but one: gamma/beta leave the top tokens unchanged, which is
    # the answer (no shift toward common words), not a lack of one
    same = by_id(sphere(0.0, -0.5, 0.8, plain_ids=tuple(range(10))), DECODER)[GAMMA]
    assert same.verdict == "not reproduced" and same.guard == ""
    assert same.why.startswith("gamma/beta leave the top tokens unchanged")
    assert "hold the same tokens" in same.why
    one = by_id(sphere(0.5, 0.1, 0.9, plain_ids=(*range(9), 99)), DECODER)[GAMMA]
    assert one.verdict == "not reproduced" and "differ in only 1 token" in one.why
    # an encoder's unchanged lists stay outside the claim's scope
    assert by_id(sphere(0.0, -0.5, 0.8, plain_ids=tuple(range(10))), ENCODER)[
        GAMMA
    ].verdict.startswith("not applicable")
    # SmolLM2: Zipf 2.27 with and 2.27 without, different tokens: nothing to judge
    equal = by_id(sphere(0.004, 0.001, 0.01, zipf=(2.27, 2.266)), DECODER)[GAMMA]
    assert equal.guard == "identical" and "2.27 and 2.27" in equal.why
    # Gemma: Bengali and Hindi tokens are scored in Bengali and Hindi, so they decide
    foreign = ("অ", "ক", "ন", "হ", "र", "क", "स", "the", "of", "1")
    script = by_id(sphere(4.0, 3.0, 5.0, tokens=foreign), DECODER)[GAMMA]
    assert script.verdict == "reproduced" and script.guard == ""
    # punctuation and a script with no usable list are known to no wordfreq language
    unknown = (",", ".", "।", "!!", "?", "the", "of", "অ", "र", "1")
    junk = by_id(sphere(4.0, 3.0, 5.0, tokens=unknown), DECODER)[GAMMA]
    assert junk.verdict == "inconclusive" and junk.guard == "unscorable"
    assert "5 of the 10 tokens without gamma/beta are known to no wordfreq language" in junk.why
    # a low mean over known words is a finding, not an unscorable list
    rare = by_id(sphere(0.6, 0.2, 1.0, zipf=(0.9, 0.3)), DECODER)[GAMMA]
    assert rare.verdict == "reproduced"


def test_gamma_beta_guards_come_before_unchanged_lists_and_the_scope_names_a_missing_beta() -> None:
    # unchanged lists of word pieces wordfreq does not know decide nothing (the shortcut
    # "unchanged, so not reproduced" waits for the guards)
    pieces = (",", ".", "ing", "!!", "?", "##", "the", "of", ";", ":")
    top = sphere(0.0, -0.5, 0.8, plain_ids=tuple(range(10)), tokens=pieces)
    top["sphere"]["top_tokens"]["affine"]["top"] = list(pieces)
    unscorable = by_id(top, DECODER)[GAMMA]
    assert unscorable.verdict == "inconclusive" and unscorable.guard == "unscorable"
    # an RMSNorm's final norm: gamma only, and the scope and rule say so
    rms = sphere(1.5, 0.7, 2.3)
    rms["sphere"]["top_tokens"].update(readout_has_beta=False, readout_norm="final_norm")
    gamma = by_id(rms, DECODER)[GAMMA]
    assert "has no beta (gamma only" in gamma.scope and "half of the claim" in gamma.scope
    assert "with gamma minus without" in gamma.rule
    assert "no beta" not in by_id(sphere(1.5, 0.7, 2.3), DECODER)[GAMMA].scope
    # whole-word lists, where the run kept them, are what the claim compares
    words = sphere(1.5, 0.7, 2.3, plain_ids=tuple(range(10)))
    words["sphere"]["top_tokens"].update(
        affine_words={"top_ids": list(range(30, 40)), "top": ["the"] * 10},
        plain_words={"top_ids": list(range(50, 60)), "top": ["of"] * 10},
        zipf_compared="whole words",
    )
    compared = by_id(words, DECODER)[GAMMA]
    assert compared.verdict == "reproduced" and "top-10 whole words" in compared.rule


def test_whole_words_start_a_word_are_letters_and_are_known() -> None:
    from geomlens.analyses.sphere.compute import whole_words

    tokens = [" the", "the", " 12", " elig", " Paris", "ing", " qzx", " "]
    zipf = np.array([7.7, 7.7, 4.0, 1.2, 5.0, 2.0, 0.0, 0.0])
    listed = {"the", "Paris"}.__contains__
    assert whole_words(tokens, zipf, listed).tolist() == [
        True, False, False, False, True, False, False, False
    ]  # fmt: skip
    pytest.importorskip("wordfreq")
    # wordfreq's own list: a word's first piece is not a word, the word is
    assert whole_words([" elig", " eligible", " Paris"], np.ones(3)).tolist() == [
        False, True, True
    ]  # fmt: skip


def test_the_identity_is_listed_apart_and_gamma_beta_is_scoped_to_language_models() -> None:
    found = by_id(sphere(1.5, 0.7, 2.3), ENCODER)
    identity = found["molina.layernorm_sphere"]
    assert identity.kind == "identity" and identity.verdict == "reproduced"
    assert found[GAMMA].verdict.startswith("not applicable: this is an encoder-only model")
    assert found[GAMMA].number == 1.5  # still shown


# ------------------------------------------------------------------ movement


WALK = {
    "encoding": {"cos": {"frac_never_leave": 0.9}, "n_positions": 300},
    "kernels": {
        "negative_self_bias_fraction": 0.9,
        "negative_self_bias_fraction_per_layer": [0.9] * 6,
    },
}


def test_walk_claims_apply_to_the_stacks_the_paper_studied() -> None:
    decoder = by_id({"walk": WALK}, DECODER)
    assert decoder["singh.walk_leaves"].verdict == "not reproduced"
    assert decoder["singh.walk_leaves"].low == pytest.approx(wilson(270, 300)["low"])
    # Singh leaves BERT-style encoders out; an untied decoder is outside its argument
    encoder = by_id({"walk": WALK}, ENCODER)
    assert encoder["singh.walk_stays"].verdict.startswith("not applicable: Singh studies")
    assert encoder["singh.walk_stays"].number == 0.9
    untied = by_id({"walk": WALK}, {**DECODER, "tied": False})["singh.walk_leaves"]
    assert untied.verdict.startswith("not applicable: the readout is not tied")
    seq2seq = by_id({"walk": {**WALK, "stack": "encoder", "decoder": WALK}}, T5)
    assert seq2seq["singh.walk_stays.encoder"].verdict == "reproduced"
    assert seq2seq["singh.walk_leaves.decoder"].verdict == "not reproduced"
    assert "(decoder stack)" in seq2seq["singh.walk_leaves.decoder"].claim


def test_negative_self_bias_is_a_claim_about_t5s_learned_biases_only() -> None:
    rotary = by_id({"walk": WALK}, DECODER)["singh.negative_self_bias"]
    assert rotary.verdict.startswith("not applicable: Singh finds negative self-bias in T5")
    assert "(this one: rotary)" in rotary.verdict and rotary.kind == "variant"
    seq2seq = by_id({"walk": {**WALK, "stack": "encoder", "decoder": WALK}}, T5)
    bias = seq2seq["singh.negative_self_bias.encoder"]
    assert bias.verdict == "reproduced" and bias.threshold == 0.75  # 0.9 of 72 heads
    assert (bias.low, bias.high) == (wilson(65, 72)["low"], wilson(65, 72)["high"])
    assert seq2seq["singh.negative_self_bias.decoder"].verdict.startswith("not applicable")


def test_t5_bias_tables_are_judged_at_the_papers_own_numbers() -> None:
    def tables(neg: float, far: float | None, reason: str | None = None) -> dict:
        table = {
            "negative_self_bias_fraction": neg,
            "far_amplification_fraction": far,
            "far_amplification_reason": reason,
        }
        stack = {**WALK, "kernels": {**WALK["kernels"], "bias_table": table}}
        return by_id({"walk": {**stack, "decoder": stack}}, T5)

    found = tables(0.8, 0.3)
    # about 80% of encoder kernels attenuate self; about 30% of decoder heads amplify far
    assert found["singh.negative_self_bias_table.encoder"].verdict == "reproduced"
    assert found["singh.far_amplification_table.decoder"].verdict == "reproduced"
    assert found["singh.far_amplification_table.decoder"].threshold == 0.25
    assert tables(0.6, 0.2)["singh.negative_self_bias_table.encoder"].verdict == ("not reproduced")
    assert tables(0.8, 0.2)["singh.far_amplification_table.decoder"].verdict == "not reproduced"
    # each number applies to the stack the paper reports it for
    assert found["singh.far_amplification_table.encoder"].verdict.startswith("not applicable")
    assert found["singh.negative_self_bias_table.decoder"].verdict.startswith("not applicable")
    assert tables(0.8, None, "short")["singh.far_amplification_table.decoder"].verdict == (
        "not measured: short"
    )
    # ALiBi's fixed biases are not the paper's learned ones; no table, no table claims
    alibi = by_id(
        {"walk": {**WALK, "kernels": {**WALK["kernels"], "bias_table": {"x": 1}}}},
        {**DECODER, "position": "alibi"},
    )
    assert alibi["singh.negative_self_bias_table.decoder"].verdict.startswith("not applicable")
    assert not [i for i in by_id({"walk": WALK}, DECODER) if "table" in i]
    # the paper's own numbers stand beside a T5 run's
    assert (
        "about 80% of the position kernels"
        in found["singh.negative_self_bias_table.encoder"].published
    )
    assert "appendix A.2" in found["singh.far_amplification_table.decoder"].published


# ------------------------------------------------------------------ concept space


CONTEXT_USED = {"n": 40, "baseline_only": 9, "no_context_only": 1, "p": 0.021, "alpha": 0.05}


def concepts(schemes: dict, acc: float = 0.5, ci=(0.4, 0.6), none: float = 0.02) -> dict:
    baseline = {
        "acc": acc,
        "acc_ci": list(ci),
        "chance": 1 / 3,
        "no_context": {"acc": none},
        "context_test": {**CONTEXT_USED, "qualifies": True},
    }
    return {"concepts": {"headline": "normalised_vs_acc", "schemes": schemes, "baseline": baseline}}


IDENTITY = {  # one-token segments, mean, no norm: the input embeddings themselves
    "normalised_vs_acc": 1.0,
    "normalised_vs_acc_ci": [0.8, 1.2],
    "loglik_max_abs_diff_vs_baseline": 1.4e-5,
}
OTHER = {
    "normalised_vs_acc": 0.9,
    "normalised_vs_acc_ci": [0.63, 1.24],
    "loglik_max_abs_diff_vs_baseline": 12.3,
    "acc_ci": [0.35, 0.6],
    "retained_gain": 0.88,
    "retained_gain_ci": [0.6, 1.25],
}
LOW = {
    "normalised_vs_acc": 0.3,
    "normalised_vs_acc_ci": [0.2, 0.36],
    "retained_gain": 0.1,
    "retained_gain_ci": [-0.2, 0.4],
}


def test_a_scheme_that_gives_back_its_input_never_decides_the_concept_claim() -> None:
    found = by_id(concepts({"P:tokens|E": IDENTITY, "P:concat": OTHER, "S:x": LOW}), DECODER)
    pyramidal, similarity = found["singh.concepts_pyramidal"], found["singh.concepts_similarity"]
    assert pyramidal.number == 0.9 and "P:concat" in pyramidal.value
    # [0.63, 1.24] lies above 0.522, the least share of its baseline any of the paper's
    # decoder-only models kept in test 1 (none reached 1.0)
    assert pyramidal.verdict == "reproduced" and pyramidal.threshold == 0.522
    # [0.2, 0.36] lies under 0.379, the paper's least in test 2
    assert similarity.verdict == "not reproduced" and similarity.high == 0.36
    assert similarity.threshold == 0.379
    alone = by_id(concepts({"P:tokens|E": IDENTITY}), DECODER)
    assert alone["singh.concepts_pyramidal"].verdict == (
        "not measured: every pyramidal scheme in this run gives back the input itself"
    )


def test_concept_guards_chance_no_context_and_degenerate_schemes() -> None:
    sim = {"S:x": LOW}
    # Gemma-3-270M: a baseline of 0.30 on a 3-way task is below chance
    below = by_id(concepts(sim, acc=0.30, ci=(0.2, 0.4)), DECODER)["singh.concepts_similarity"]
    assert below.verdict == "inconclusive" and below.guard == "chance"
    assert "0.300 is at or below chance (0.333)" in below.why
    near = by_id(concepts(sim, acc=0.40, ci=(0.30, 0.50)), DECODER)["singh.concepts_similarity"]
    assert near.guard == "chance" and "not above chance" in near.why
    # SmolLM2: the choices alone score 0.85 of the baseline, inside [0.63, 1.24]
    inside = by_id(concepts({"P:c": OTHER}, acc=0.5, none=0.425), DECODER)
    pyramidal = inside["singh.concepts_pyramidal"]
    assert pyramidal.guard == "no-context" and "0.85 of the baseline" in pyramidal.why
    # a scheme flagged degenerate is left out; with none left the claim is inconclusive
    cosine = {**LOW, "normalised_vs_acc": 1.4, "degenerate": "the cosines of all choices tie"}
    mixed = by_id(concepts({"S:cos": cosine, "S:dot": LOW}), DECODER)["singh.concepts_similarity"]
    assert "S:dot" in mixed.value and "1 degenerate scheme(s) left out" in mixed.value
    assert mixed.verdict == "not reproduced"
    only = by_id(concepts({"S:cos": cosine}), DECODER)["singh.concepts_similarity"]
    assert only.verdict == "inconclusive" and only.guard == "degenerate"
    assert "(S:cos: the cosines of all choices tie)" in only.why
    # SmolLM2's cosine test 2 on timedial: 0.14 [0.06, 0.24] on a 3-way task, reliably
    # under chance, so its scores do not read the choices
    under = {**LOW, "acc": 0.14, "acc_ci": [0.06, 0.24]}
    tied = by_id(concepts({"S:cos": under}), DECODER)["singh.concepts_similarity"]
    assert tied.verdict == "inconclusive" and tied.guard == "degenerate"
    assert "below chance (0.333) by its own 95% interval (up to 0.240)" in tied.why
    # a scheme merely not above chance is a finding, not a degenerate scheme
    level = {**LOW, "acc": 0.3, "acc_ci": [0.18, 0.42]}
    assert by_id(concepts({"S:x": level}), DECODER)["singh.concepts_similarity"].guard == ""


def test_the_claims_and_the_concepts_section_name_the_same_best_scheme(tmp_path) -> None:
    """The ranking's first scheme gives back its input and the second is degenerate: both
    name the third, the best that can stand for the text."""
    from geomlens.analyses.concepts.claims import best_scheme
    from geomlens.analyses.concepts.schema import ConceptsMetrics
    from geomlens.analyses.concepts.section import concepts_section
    from geomlens.runs.runfolder import Run

    cosine = {**OTHER, "normalised_vs_acc": 1.2, "degenerate": "the cosines of all choices tie"}
    schemes = {"P:tokens|E": IDENTITY, "P:cos": cosine, "P:concat": OTHER, "S:x": LOW}
    metrics = concepts(schemes)
    section = metrics["concepts"]
    section["schemes"]["P:tokens|E"] = {**IDENTITY, "normalised_vs_acc": 1.3}
    section.update(
        task={"name": "timedial"}, shots=0, ranking=["P:tokens|E", "P:cos", "P:concat", "S:x"]
    )
    section["baseline"].update(n=40, acc_norm=0.5, acc_bytes=0.5)
    for scheme in section["schemes"].values():
        scheme.setdefault("acc", 0.4)
    read = ConceptsMetrics.from_dict(section)
    assert best_scheme(read) == "P:concat" and best_scheme(read, "S:") == "S:x"
    (tmp_path / "metrics.json").write_text(json.dumps(metrics))
    html = concepts_section(Run(tmp_path))
    # a label geomlens does not write stays as it is (words and tooltip alike)
    assert 'The best scheme (<span class="coded" title="P:concat">P:concat</span>) reaches' in html
    assert "P:concat" in by_id(metrics, DECODER)["singh.concepts_pyramidal"].value


def test_concept_claims_are_scoped_and_carry_singhs_published_scores() -> None:
    metrics = concepts({"P:c": OTHER, "S:x": LOW}, none=0.1)
    encoder = by_id(metrics, ENCODER)["singh.concepts_pyramidal"]
    assert encoder.verdict.startswith("not applicable: Singh studies decoder-only")
    neo = {**DECODER, "family": "gpt_neo", "n_layers": 24, "d_model": 2048}
    found = by_id(metrics, neo)
    assert "0.845 and 0.849 with its best schemes" in found["singh.concepts_pyramidal"].published
    assert "section 5.1.1" in found["singh.concepts_pyramidal"].published
    assert "0.826 zero-shot" in found["singh.concepts_similarity"].published
    flan = {**T5, "family": "t5", "n_layers": 24, "d_model": 1024}
    unnamed = by_id(metrics, flan)["singh.concepts_pyramidal"].published  # T5 v1.1 or Flan?
    assert "0.738 5-shot" not in unnamed and "nearest published model" in unnamed
    named = by_id(metrics, {**flan, "source": "/hub/models--google--flan-t5-large/snap"})
    assert "0.738 5-shot" in named["singh.concepts_pyramidal"].published
    assert "up to 0.96" in named["singh.concepts_similarity"].published
    # any other decoder: the nearest of the paper's decoders with its position scheme
    rotary = by_id(metrics, DECODER)["singh.concepts_pyramidal"].published
    assert rotary.startswith("pythia-1b-deduped on HellaSwag (test 1)") and "Fig. 10" in rotary


# ------------------------------------------------------------------ records and summary


def test_claim_records_are_plain_json_and_the_summary_counts_claims_only() -> None:
    metrics = {
        **position_metrics(0.05),
        **sphere(1.5, 0.7, 2.3),
        **concepts({"P:tokens": IDENTITY}),
        "walk": WALK,
    }
    records = claim_records(metrics, ENCODER)
    assert len({r["id"] for r in records}) == len(records)
    for r in records:
        assert set(r) >= {"id", "claim", "paper", "rule", "verdict", "number", "low", "high"}
        assert set(r) >= {"kind", "scope", "threshold_source", "why", "guard", "noise_share"}
        assert r["kind"] in ("claim", "variant", "identity") and r["scope"]
        assert r["threshold_source"] or r["verdict"].startswith("not ")
        if r["verdict"] == "inconclusive":
            assert r["why"]
    # the three papers' claims (the analyses beyond them have their own tests)
    count = counted([r for r in records if r["id"].split(".")[0] in PAPERS])
    apart = {
        "song.incoherence_subspaces",
        "song.wqk_low_rank_plus_diagonal_block",
        "molina.layernorm_sphere",
        "singh.negative_self_bias",
    }
    assert set(count["apart"]) == apart
    # every claim is counted: low rank, low frequency and incoherence reproduced; three not
    # measured (no topic labels, no attention split); four not applicable (gamma/beta, the
    # walk, both concept tests)
    assert (count["claims"], count["reproduced"], count["not applicable"]) == (10, 3, 4)
    assert count["not measured"] == 3 and count["inconclusive"] == count["not reproduced"] == 0


def test_wilson_interval_matches_its_closed_form_and_covers_95_percent() -> None:
    z2 = 1.959963984540054**2
    assert wilson(0, 10)["high"] == pytest.approx(z2 / (10 + z2), rel=1e-7)
    rng = np.random.default_rng(0)
    hits = [
        (w := wilson(int(rng.binomial(200, 0.3)), 200))["low"] <= 0.3 <= w["high"]
        for _ in range(2000)
    ]
    assert 0.93 <= np.mean(hits) <= 0.97


def test_bootstrap_difference_covers_a_planted_difference_about_95_percent() -> None:
    rng = np.random.default_rng(1)
    hits = []
    for seed in range(300):
        a, b = rng.normal(0.5, 1.0, 60), rng.normal(0.0, 1.0, 60)
        d = mean_difference(a, b, seed)
        hits.append(d["low"] <= 0.5 <= d["high"])
    assert 0.90 <= np.mean(hits) <= 0.98


def walk_with_control(never: float, ci: tuple, control: float | None, control_ci: tuple) -> dict:
    """A decoder walk whose never-leave fraction has a block-bootstrap interval, with the
    control walk of the shuffled text beside it (None: no control)."""
    encoding: dict = {
        "cos": {
            "frac_never_leave": never,
            "frac_never_leave_ci": {"low": ci[0], "high": ci[1], "method": "b", "n_boot": 1000},
        },
        "n_positions": 300,
    }
    if control is not None:
        encoding["control"] = {
            "kind": "the same model on the walk text shuffled at token level",
            "seed": 0,
            "frac_never_leave": control,
            "frac_never_leave_ci": {"low": control_ci[0], "high": control_ci[1]},
        }
    return {"walk": {**WALK, "encoding": encoding}}


def test_the_walk_leaves_only_when_it_leaves_more_often_than_its_control() -> None:
    leaves = "singh.walk_leaves"
    beats = by_id(walk_with_control(0.05, (0.02, 0.09), 0.4, (0.3, 0.5)), DECODER)[leaves]
    assert beats.verdict == "reproduced" and "shuffled text (control): 0.40" in beats.value
    # the control equals the model: leaving is what any pass does, not reading the text
    same = by_id(walk_with_control(0.05, (0.02, 0.09), 0.05, (0.02, 0.09)), DECODER)[leaves]
    assert same.verdict == "inconclusive" and same.guard == "control"
    assert "not below it by their intervals" in same.why
    close = by_id(walk_with_control(0.05, (0.02, 0.12), 0.2, (0.1, 0.3)), DECODER)[leaves]
    assert close.verdict == "inconclusive" and close.guard == "control"
    # a run with no control withholds "reproduced"; a walk that stays is not reproduced
    alone = by_id(walk_with_control(0.05, (0.02, 0.09), None, ()), DECODER)[leaves]
    assert alone.verdict == "inconclusive" and "no control text" in alone.why
    stays = by_id(walk_with_control(0.9, (0.85, 0.95), 0.9, (0.85, 0.95)), DECODER)[leaves]
    assert stays.verdict == "not reproduced"


def test_the_control_walk_shuffles_the_same_tokens_and_keeps_the_first() -> None:
    from geomlens.analyses.walk.walks import shuffled_ids

    ids = torch.arange(100, 140)
    mixed = shuffled_ids(ids, 3)
    assert mixed[0] == 100 and sorted(mixed.tolist()) == ids.tolist()
    assert not torch.equal(mixed, ids) and torch.equal(mixed, shuffled_ids(ids, 3))
