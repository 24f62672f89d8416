"""``--contexts auto``: the looks' decision on planted group sums, the schedule, the
prefix-stable windows and the chunks' merge (``analyses/decomposition/sequential.py``)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from threadpoolctl import threadpool_limits

from geomlens.analyses.common import spectra
from geomlens.analyses.decomposition import intervals, position_noise, sequential
from geomlens.config.options import AUTO_MAX_CONTEXTS
from geomlens.engines.merge import extend
from geomlens.stats import CapturedBatch, DecompositionAccumulator

LENGTH, D, GROUPS, FIRST, LOOKS = 32, 24, 16, 128, 5
"""Planted positions and dimension, the groups, the first look and the looks planned."""

REPLICATIONS = 100
"""Planted corpora at the threshold (each up to five looks)."""


def planted_truth(low_share: float) -> np.ndarray:
    """[LENGTH, D] P with ||P||_F = 1, rank 4, ``low_share`` of its energy in the lowest
    10% of frequencies over positions (two DCT columns in the low band, two above)."""
    rng = np.random.default_rng(5)
    columns = [1, 2, 9, 13]
    energy = np.array([low_share / 2, low_share / 2, (1 - low_share) / 2, (1 - low_share) / 2])
    basis = spectra.dct_basis(LENGTH)[:, columns] * np.sqrt(energy)
    directions = np.linalg.qr(rng.standard_normal((D, len(columns))))[0]
    return np.asarray(basis @ directions.T)


def planted_atoms(seed: int, truth: np.ndarray, first_share: float) -> np.ndarray:
    """[16 * 2^(LOOKS-1), LENGTH, D] sums over blocks of FIRST / 16 contexts, each context
    the truth plus white noise making ``first_share`` of the pooled estimate's energy at
    FIRST contexts. Look k's groups are 16 contiguous runs of 2^k blocks: the groups a
    capture grown by doubling keeps (``engines.merge.extend``)."""
    rng = np.random.default_rng([seed, 41])
    per_block = FIRST // GROUPS
    noise_energy = first_share / (1 - first_share)  # at FIRST contexts, ||P|| = 1
    sigma = np.sqrt(noise_energy * FIRST / ((LENGTH - 1) * D))
    n = GROUPS * 2 ** (LOOKS - 1)
    noise = rng.standard_normal((n, LENGTH, D)) * sigma * np.sqrt(per_block)
    return per_block * truth + noise


def look_at(atoms: np.ndarray, k: int) -> tuple[list[dict], list[list[dict]]]:
    """The look at 2^k FIRST contexts through the run's steps: the corrected row and its
    half-sample draws (``look_metrics`` then gives the intervals at a level)."""
    blocks = GROUPS * 2**k
    sums = atoms[:blocks].reshape(GROUPS, 2**k, LENGTH, D).sum(1)
    sizes = np.full(GROUPS, FIRST // GROUPS * 2**k, dtype=np.float64)
    groups = position_noise.from_sums(sums, sizes, skip_first=False)
    contexts = int(sizes.sum())
    ctx = np.zeros((contexts, D))  # no context part: the coherence claims are not measured
    row = {"layer": 0, "skip_first": True, "n_contexts": contexts, "n_positions": LENGTH}
    row.update(sequential.corrected_row(groups, ctx))
    draws = intervals.group_draws(GROUPS, intervals.N_DRAWS, 0)
    drawn = sequential.draw_numbers(
        groups, row.get("pos_rank_corrected"), lambda w: ctx[: contexts // 2], draws
    )
    # The rank claim waits for windows of 5 x 20 positions (its short-window guard): without
    # its number the looks wait on the low-frequency claim alone, the one planted.
    row.pop("pos_rank_corrected")
    return [row], [drawn]


def sequential_verdicts(atoms: np.ndarray, levels: tuple[float, ...]) -> list[tuple[int, str]]:
    """Per interval level, (the look the procedure stopped at, the low-frequency claim's
    verdict there): each look's numbers computed once, judged at every level."""
    found: dict[float, tuple[int, str]] = {}
    for k in range(LOOKS):
        rows, drawn = look_at(atoms, k)
        for level in levels:
            if level in found:
                continue
            metrics = sequential.look_metrics(rows, drawn, GROUPS, level)
            if sequential.decided(metrics) or k == LOOKS - 1:
                verdicts = {c.id: c.verdict for c in sequential.position_claims(metrics, {})}
                found[level] = (k, verdicts["song.pos_low_frequency"])
        if len(found) == len(levels):
            break
    return [found[level] for level in levels]


@pytest.fixture(autouse=True)
def one_blas_thread():
    """As the pipeline runs the looks: multi-threaded BLAS on small matrices only spins."""
    with threadpool_limits(limits=1, user_api="blas"):
        yield


def test_the_planted_truth_sits_where_it_is_planted():
    truth = planted_truth(0.5)
    assert spectra.low_freq_energy(truth @ truth.T) == pytest.approx(0.5, abs=1e-12)
    assert np.linalg.matrix_rank(truth) == 4


def test_at_the_threshold_the_looks_decide_at_most_at_the_nominal_rate():
    """Truth exactly at the low-frequency claim's threshold (0.5): any decided verdict is
    an error. With the 5% spent over the 5 looks, the sequential procedure decides in at
    most 5% of replications; the same looks with 95% intervals each decide more often
    than 5% (14-18% measured)."""
    truth = planted_truth(0.5)
    adjusted, naive = [], []
    for seed in range(REPLICATIONS):
        atoms = planted_atoms(seed, truth, first_share=0.3)
        (_, spent), (_, plain) = sequential_verdicts(atoms, (sequential.level(LOOKS), 0.95))
        adjusted.append(spent)
        naive.append(plain)
    rate = np.mean([v in ("reproduced", "not reproduced") for v in adjusted])
    naive_rate = np.mean([v in ("reproduced", "not reproduced") for v in naive])
    assert rate <= sequential.ALPHA, adjusted
    assert naive_rate > sequential.ALPHA  # what spending the error over the looks prevents
    assert set(adjusted) <= {"inconclusive", "reproduced", "not reproduced"}


def test_away_from_the_threshold_the_looks_decide_early():
    """Truth well above the threshold (0.8) with the noise already low: decided at the
    first look, and the right way."""
    truth = planted_truth(0.8)
    stops = [
        sequential_verdicts(planted_atoms(seed, truth, 0.05), (sequential.level(LOOKS),))[0]
        for seed in range(8)
    ]
    assert [v for _, v in stops] == ["reproduced"] * 8
    assert max(k for k, _ in stops) == 0


def test_a_truth_near_the_threshold_waits_for_more_contexts():
    """A truth just above the threshold (0.54) with 30% noise at the first look: the
    first look's interval still holds 0.5, so the capture grows; a later look decides it,
    the right way, before the last."""
    truth = planted_truth(0.54)
    stops = [
        sequential_verdicts(planted_atoms(s, truth, 0.3), (sequential.level(LOOKS),))[0]
        for s in range(4)
    ]
    assert all(v == "reproduced" for _, v in stops)
    assert all(1 <= k < LOOKS - 1 for k, _ in stops), stops


def test_the_schedule_doubles_within_the_corpus():
    assert sequential.looks(128, 2225) == (128, 256, 512, 1024, 2048)
    assert sequential.looks(128, 600) == (128, 256, 512)
    assert sequential.looks(128, 100) == (100,)
    assert sequential.looks(128, 10_000) == (128, 256, 512, 1024, 2048, 4096, 8192)
    # the default --max-contexts is the last of the five looks the spending was checked on
    assert sequential.looks(128, AUTO_MAX_CONTEXTS) == sequential.looks(128, 10**6, LOOKS)
    assert sequential.level(5) == pytest.approx(0.99)


def test_the_page_says_a_run_was_cut_short():
    """The page's line names the budget's cut and that the verdicts are a shorter run's;
    a run stopped at its last look names --max-contexts."""
    record = {"looks": [128], "contexts": 128, "planned": [128, 256], "level": 0.975}
    cut = {**record, "stopped": "budget", "cut_short": "cut short by the wall-clock safety"}
    line = sequential.auto_contexts_reading({"decomposition": {"auto_contexts": cut}})
    assert line is not None and "cut it short: cut short by the wall-clock safety" in line
    last = {**record, "stopped": "last look"}
    line = sequential.auto_contexts_reading({"decomposition": {"auto_contexts": last}})
    assert line is not None and "(--max-contexts)" in line


def test_a_capture_extended_by_a_chunk_is_the_capture_of_both():
    """Two halves captured apart and extended equal one capture of all the windows: the
    per-context parts placed, the sums added, the interval groups folded pairwise."""
    torch.manual_seed(0)
    layers, n, length, d = [0, 2], 32, 6, 5
    hidden = {layer: torch.randn(2 * n, length, d) for layer in layers}

    def captured(rows: slice, count: int) -> DecompositionAccumulator:
        acc = DecompositionAccumulator(layers, count, length, d, True, groups=GROUPS)
        batch = {layer: h[rows] for layer, h in hidden.items()}
        acc.update(CapturedBatch(batch, torch.arange(count)))
        return acc

    whole = captured(slice(0, 2 * n), 2 * n)
    grown = extend(captured(slice(0, n), n), captured(slice(n, 2 * n), n))
    assert torch.equal(grown.group_of, whole.group_of)
    for key, value in whole.state_dict().items():
        scale = float(value.double().abs().max())  # second moments: float32 products
        assert torch.allclose(
            grown.state_dict()[key].double(), value.double(), atol=1e-6 * scale
        ), key
    with pytest.raises(ValueError, match="as many contexts"):
        extend(whole, captured(slice(0, n), n))


def test_the_windows_of_a_look_are_the_first_of_the_next(minilm, bbc):
    """Chunked windows: the first look's are exactly ``--contexts 128``'s, a later look's
    hold the documents of as many contexts (balanced or not)."""
    from geomlens.corpus import make_windows
    from geomlens.corpus.windows import window_range

    for balance in (False, True):
        grown = make_windows(
            bbc, minilm.tokenizer, 512, 32, seed=3, balance=balance, chunks=(128, 256, 512)
        )
        assert window_range(grown, 0, 128) == make_windows(
            bbc, minilm.tokenizer, 128, 32, seed=3, balance=balance
        )
        fixed = make_windows(bbc, minilm.tokenizer, 256, 32, seed=3, balance=balance)
        assert set(window_range(grown, 0, 256).doc_ids) == set(fixed.doc_ids)


def random_accumulator(n: int = 64, length: int = 12, d: int = 8) -> DecompositionAccumulator:
    """Two layers of random hidden states with interval groups (no outlier window)."""
    torch.manual_seed(1)
    layers = [0, 1]
    acc = DecompositionAccumulator(layers, n, length, d, True, groups=GROUPS)
    hidden = {layer: torch.randn(n, length, d) for layer in layers}
    acc.update(CapturedBatch(hidden, torch.arange(n)))
    return acc


def test_a_look_tests_only_the_claims_still_undecided(monkeypatch):
    """A claim an earlier look decided keeps its verdict; when only the counted claim (no
    interval) is left, the look draws no half-samples, and its verdict is the one the
    look with draws gives."""
    acc = random_accumulator()
    calls: list[int] = []
    real = sequential.draw_numbers

    def counted(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(sequential, "draw_numbers", counted)
    first = sequential.RULE.look(acc, None, None, 4, 0.99, {})
    assert len(calls) == len(acc.layers) and "song.pos_low_rank" in first.verdicts
    rank = first.verdicts["song.pos_low_rank"]
    calls.clear()
    earlier = {
        c: "inconclusive" if c in sequential.COUNTED else "reproduced" for c in first.verdicts
    }
    later = sequential.RULE.look(acc, None, None, 4, 0.99, {}, earlier)
    assert calls == []  # the counted claim alone waits: no half-samples drawn
    assert later.verdicts == {**earlier, "song.pos_low_rank": rank}
    assert later.undecided == ([] if rank != "inconclusive" else ["song.pos_low_rank"])
    pending = {**earlier, "song.incoherence": "inconclusive"}
    again = sequential.RULE.look(acc, None, None, 4, 0.99, {}, pending)
    assert len(calls) == len(acc.layers)  # an interval claim waits: the draws are taken
    assert again.verdicts["song.pos_low_frequency"] == "reproduced"  # kept
    assert again.verdicts["song.incoherence"] == first.verdicts["song.incoherence"]
