"""The papers' claims as data: verdicts with intervals, the papers' expectations per model
kind, and the concept claim never decided by a scheme that gives back its input."""

from __future__ import annotations

import numpy as np
import pytest

from geomlens.report.claims import claim_records, claims, decide
from geomlens.stats.intervals import mean_difference, wilson


def by_id(metrics: dict, model: dict | None = None) -> dict:
    return {c.id: c for c in claims(metrics, model)}


def test_an_interval_holding_the_threshold_decides_nothing() -> None:
    assert decide(0.9, 1.0, True, "", 0.6, 1.2) == "inconclusive"
    assert decide(1.3, 1.0, True, "", 1.1, 1.5) == "reproduced"
    assert decide(0.7, 1.0, True, "", 0.5, 0.9) == "not reproduced"
    assert decide(0.7, 1.0, False, "") == "reproduced"  # no interval: the number decides
    assert decide(None, 1.0, True, "no walk") == "not measured: no walk"


def _concepts(schemes: dict) -> dict:
    return {"concepts": {"headline": "normalised_vs_acc", "schemes": schemes}}


IDENTITY = {  # one-token segments, mean, no norm: the input embeddings themselves
    "normalised_vs_acc": 1.0,
    "normalised_vs_acc_ci": [0.8, 1.2],
    "loglik_max_abs_diff_vs_baseline": 1.4e-5,
}


def test_a_scheme_that_gives_back_its_input_never_decides_the_concept_claim() -> None:
    other = {
        "normalised_vs_acc": 0.9,
        "normalised_vs_acc_ci": [0.63, 1.24],
        "loglik_max_abs_diff_vs_baseline": 12.3,
    }
    sim = {"normalised_vs_acc": 0.3, "normalised_vs_acc_ci": [0.09, 0.67]}
    found = by_id(
        _concepts({"P:tokens|E|mean|none|none|none": IDENTITY, "P:concat": other, "S:x": sim})
    )
    pyramidal, similarity = found["singh.concepts_pyramidal"], found["singh.concepts_similarity"]
    assert pyramidal.number == 0.9 and "P:concat" in pyramidal.value
    assert pyramidal.verdict == "inconclusive"  # [0.63, 1.24] holds the paper's 1.0
    assert similarity.verdict == "not reproduced" and similarity.high == 0.67
    alone = by_id(_concepts({"P:tokens|E|mean|none|none|none": IDENTITY}))
    assert alone["singh.concepts_pyramidal"].verdict == (
        "not measured: every pyramidal scheme in this run gives back the input itself"
    )


WALK = {
    "encoding": {"cos": {"frac_never_leave": 0.9}, "n_positions": 300},
    "kernels": {
        "negative_self_bias_fraction": 0.8,
        "negative_self_bias_fraction_per_layer": [0.8] * 6,
    },
}


def test_encoders_and_decoders_get_the_expectation_each_paper_states() -> None:
    encoder = by_id({"walk": WALK}, {"is_encoder": True, "n_heads": 12})
    decoder = by_id({"walk": WALK}, {"is_encoder": False, "n_heads": 12})
    assert encoder["singh.walk_stays"].verdict == "reproduced"
    assert decoder["singh.walk_leaves"].verdict == "not reproduced"
    # Wilson over 300 positions, and over 6 layers x 12 heads
    assert encoder["singh.walk_stays"].low == pytest.approx(wilson(270, 300)["low"])
    bias = encoder["singh.negative_self_bias"]
    assert (bias.low, bias.high) == (wilson(58, 72)["low"], wilson(58, 72)["high"])
    seq2seq = by_id({"walk": {**WALK, "stack": "encoder", "decoder": WALK}}, {"n_heads": 12})
    assert seq2seq["singh.walk_stays.encoder"].verdict == "reproduced"
    assert seq2seq["singh.walk_leaves.decoder"].verdict == "not reproduced"
    assert "(decoder stack)" in seq2seq["singh.walk_leaves.decoder"].claim


def test_gamma_beta_claim_reads_english_word_frequency_with_its_interval() -> None:
    def sphere(value: float, low: float, high: float, plain_ids: tuple = (3, 4)) -> dict:
        shift = {"value": value, "low": low, "high": high, "method": "bootstrap", "n_boot": 1000}
        zipf = {"affine": 5.0, "plain": 5.0 - value, "vocab_mean": 3.2}
        top = {
            "k": 2,
            "affine": {"top_ids": [1, 2]},
            "plain": {"top_ids": list(plain_ids)},
            "english_zipf_shift": shift,
            "mean_english_zipf": zipf,
        }
        return {"sphere": {"top_tokens": top}}

    name = "molina.gamma_beta_common_words"
    assert by_id(sphere(1.5, 0.7, 2.3))[name].verdict == "reproduced"
    assert by_id(sphere(0.4, -0.2, 1.0))[name].verdict == "inconclusive"
    assert by_id(sphere(-1.0, -1.8, -0.3))[name].verdict == "not reproduced"
    assert by_id({})[name].verdict.startswith("not measured")
    # the same tokens with and without gamma/beta: nothing moved, whatever the resample says
    same = by_id(sphere(0.0, -0.5, 0.8, plain_ids=(2, 1)))[name]
    assert same.verdict == "not reproduced" and same.low is None
    assert same.value.startswith("the same 2 tokens")


def test_claim_records_are_plain_json_with_the_interval_fields() -> None:
    records = claim_records(_concepts({"P:tokens": IDENTITY}))
    assert len({r["id"] for r in records}) == len(records)
    for r in records:
        assert set(r) >= {"id", "claim", "paper", "rule", "verdict", "number", "low", "high"}


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
    return {"attention": {"qk_basis": [{"layer": 3, "k": k, "rank": 2, "heads": [head]}]}}


def test_w_qk_claims_read_the_whole_matrix_and_keep_the_block_fit_as_a_variant() -> None:
    fits = by_id(_qk(0.2, 0.9, 0.8))
    assert fits["song.wqk_low_rank_plus_diagonal"].verdict == "reproduced"
    assert fits["song.wqk_low_rank_positional"].verdict == "reproduced"
    assert fits["song.wqk_low_rank_plus_diagonal_block"].verdict == "reproduced"
    # a fit leaving most of the matrix, or no better than a random head, is not reproduced
    assert by_id(_qk(0.93, 0.96, 0.8))["song.wqk_low_rank_plus_diagonal"].verdict == (
        "not reproduced"
    )
    assert by_id(_qk(0.3, 0.25, 0.8))["song.wqk_low_rank_plus_diagonal"].verdict == (
        "not reproduced"
    )
    assert by_id(_qk(0.2, 0.9, 0.02))["song.wqk_low_rank_positional"].verdict == "not reproduced"
    # a run made before the whole-matrix fit: not measured, the block variant still decides
    old = _qk(0.2, 0.9, 0.8)
    for h in old["attention"]["qk_basis"][0]["heads"]:
        for key in [k for k in h if k.startswith("whole_")]:
            del h[key]
    old_claims = by_id(old)
    assert old_claims["song.wqk_low_rank_plus_diagonal"].verdict.startswith("not measured")
    assert old_claims["song.wqk_low_rank_plus_diagonal_block"].verdict == "reproduced"


def test_t5_bias_tables_are_scored_themselves_per_stack() -> None:
    table = {"negative_self_bias_fraction": 0.8, "far_amplification_fraction": 0.25}
    stack = {**WALK, "kernels": {**WALK["kernels"], "bias_table": table}}
    seq2seq = by_id({"walk": {**stack, "decoder": stack}}, {"n_heads": 12})
    assert seq2seq["singh.negative_self_bias_table.encoder"].verdict == "reproduced"
    assert seq2seq["singh.negative_self_bias_table.decoder"].number == 0.8
    assert seq2seq["singh.far_amplification_table.decoder"].verdict == "not reproduced"
    short = {**table, "far_amplification_fraction": None, "far_amplification_reason": "short"}
    stack["kernels"]["bias_table"] = short
    assert by_id({"walk": {**stack, "decoder": stack}})[
        "singh.far_amplification_table.encoder"
    ].verdict == ("not measured: short")
    # a model without a bias table gets no table claims
    assert not [i for i in by_id({"walk": WALK}) if "table" in i]


def test_position_claims_carry_the_intervals_over_contexts() -> None:
    row = {
        "skip_first": True,
        "pos_explained": 0.55,
        "pos_rank": 4,
        "pos_low_freq": 0.8,
        "pos_smoothness": 0.1,
        "coherence_max": 0.3,
        "coherence_random_max": 0.2,
        "incoherence_mean": 0.1,
        "incoherence_random": 0.1,
    }
    intervals = {
        "method": "delete-half jackknife",
        "n_draws": 30,
        "groups": 16,
        "not_resampled": {"incoherence_mean": "the principal-angle variant"},
        "medians": {
            "pos_explained": [0.45, 0.65],
            "pos_low_freq": [0.7, 0.9],
            "coherence_max": [0.28, 0.32],
        },
    }
    metrics = {
        "decomposition": {
            "skip_first": False,
            "other_view": {"skip_first": True, "layers": [row], "intervals": intervals},
        }
    }
    found = by_id(metrics)
    assert found["song.pos_low_rank"].verdict == "inconclusive"  # [0.45, 0.65] holds 0.5
    assert (found["song.pos_low_rank"].low, found["song.pos_low_rank"].high) == (0.45, 0.65)
    assert found["song.pos_low_frequency"].verdict == "reproduced"
    assert "0.80 [0.70, 0.90]" in found["song.pos_low_frequency"].value
    mu = found["song.incoherence"]  # 0.3 / 0.2 = 1.5, interval [1.4, 1.6]: above 1.25
    assert mu.verdict == "not reproduced" and mu.low == pytest.approx(1.4)
    assert found["song.incoherence_subspaces"].interval == "none: the principal-angle variant"
    assert "16 groups" in found["song.pos_low_rank"].interval
