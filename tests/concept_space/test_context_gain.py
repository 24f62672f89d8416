"""The concept claims decided by the retained context gain, on planted item scores.

Each test plants 0/1 correctness per item for the baseline, the no-context control and a
scheme, builds the run's concepts block with the functions a run uses (``summary``,
``retained_gain``, ``context_test``) and reads the claim's verdict.
"""

from __future__ import annotations

from importlib.resources import files

import numpy as np
import pytest
from scipy.stats import binomtest

from geomlens.analyses.concepts.choice import choose_task
from geomlens.analyses.concepts.claims import GAIN_FLOOR, concept_claims
from geomlens.analyses.concepts.gain import context_test, retained_gain
from geomlens.analyses.concepts.scores import accuracy_ci, summary

DECODER = {"is_encoder": False, "n_heads": 9, "position": "rotary", "tied": True}


def items(n: int, right: int, seed: int) -> np.ndarray:
    """[n] correctness with exactly ``right`` items right, in a seeded order."""
    out = np.zeros(n, dtype=bool)
    out[np.random.default_rng(seed).permutation(n)[:right]] = True
    return out


def block(base: np.ndarray, none: np.ndarray, scheme: np.ndarray, chance: float) -> dict:
    """A concepts block with one pyramidal scheme, as a run writes it."""
    acc, lo, hi = accuracy_ci(base)
    none_acc = float(none.mean())
    gain, glo, ghi = retained_gain(scheme, base, none)
    scores = summary(scheme, {"acc": base, "acc_norm": base})
    scores.update(retained_gain=gain, retained_gain_ci=[glo, ghi])
    return {
        "concepts": {
            "headline": "normalised_vs_acc",
            "shots": 0,
            "baseline": {
                "acc": acc,
                "acc_ci": [lo, hi],
                "chance": chance,
                "no_context": {"acc": none_acc},
                "context_test": context_test(base, none).to_dict(),
            },
            "schemes": {"P:planted": scores},
        }
    }


def pyramidal(metrics: dict):
    return next(c for c in concept_claims(metrics, DECODER) if c.id.endswith("pyramidal"))


N = 400
BASE = items(N, 204, 1)  # 0.51, SmolLM2's step_inference baseline
NONE = BASE & items(N, 300, 2)  # the control: right on a subset of the baseline's items


def test_the_context_test_is_an_exact_mcnemar_test_over_items() -> None:
    base = np.array([1, 1, 1, 1, 1, 1, 0, 1, 0, 0], dtype=bool)
    none = np.array([0, 0, 0, 0, 0, 1, 1, 1, 0, 0], dtype=bool)
    test = context_test(base, none)
    assert (test.baseline_only, test.no_context_only) == (5, 1)
    assert test.p == pytest.approx(binomtest(5, 6, 0.5).pvalue)
    assert not test.qualifies  # p = 0.22
    assert context_test(BASE, NONE).qualifies
    assert not context_test(NONE, BASE).qualifies  # the control above the baseline
    assert context_test(BASE, BASE).p == 1.0


def test_the_retained_gain_is_one_for_the_baseline_and_zero_for_the_control() -> None:
    assert retained_gain(BASE, BASE, NONE) == (1.0, 1.0, 1.0)
    assert retained_gain(NONE, BASE, NONE) == (0.0, 0.0, 0.0)
    assert retained_gain(NONE, NONE, NONE) == (None, None, None)  # no gain to keep
    # three items, one discordant: most draws have no denominator; both ends unbounded
    value, low, high = retained_gain(*(np.array(x, dtype=bool) for x in ([1, 0, 0],) * 2), [0] * 3)
    assert value == 1.0 and low is None and high is None


def test_a_scheme_at_the_no_context_level_is_not_reproduced_though_its_share_passes() -> None:
    """SmolLM2 on step_inference: every scheme near the control (0.38 of 0.51 keeps 0.75 of
    the baseline, above the paper's least share 0.522), so the share rule alone said yes."""
    scheme = NONE | items(N, 8, 3)
    claim = pyramidal(block(BASE, NONE, scheme, 0.25))
    assert claim.number > claim.threshold and claim.low > claim.threshold
    assert claim.verdict == "not reproduced"
    assert f"below {GAIN_FLOOR:g} by its 95% interval" in claim.why
    below = pyramidal(block(BASE, NONE, NONE & items(N, 300, 4), 0.25))
    assert below.verdict == "not reproduced"  # under the control: never reproduced


def test_a_scheme_keeping_most_of_the_gain_is_reproduced() -> None:
    scheme = BASE & items(N, 390, 5)
    claim = pyramidal(block(BASE, NONE, scheme, 0.25))
    assert claim.verdict == "reproduced" and "retained context gain 0.9" in claim.value


def test_a_task_whose_baseline_does_not_beat_its_control_decides_nothing() -> None:
    none = BASE & items(N, 395, 6)  # the control within 4 items of the baseline
    claim = pyramidal(block(BASE, none, BASE & items(N, 390, 7), 0.25))
    assert claim.verdict == "inconclusive" and claim.guard == "context"
    assert "does not show the model using its context" in claim.why
    # the report's default: the list as tried says no task qualified
    metrics = block(BASE, none, BASE & items(N, 390, 7), 0.25)
    test = metrics["concepts"]["baseline"]["context_test"]
    metrics["concepts"]["task_choice"] = [
        {"task": "step_inference", "available": True, "test": test},
        {"task": "goal_inference", "available": False},
    ]
    listed = pyramidal(metrics)
    assert "no task of the report's preference list qualified" in listed.why
    assert "goal_inference (not on this machine)" in listed.why


def test_a_scheme_at_chance_is_never_reproduced() -> None:
    """The control below chance (a bias against the gold answers): a scheme at chance keeps
    more than half of the gain and passes the share, but reads no choice."""
    base, none = items(N, 136, 8), np.zeros(N, dtype=bool)  # 0.34 and 0.0, chance 0.25
    scheme = items(N, 100, 9)  # 0.25
    claim = pyramidal(block(base, none, scheme, 0.25))
    assert claim.number > claim.threshold
    assert claim.verdict == "inconclusive" and claim.guard == "gain"
    assert "not above chance" in claim.why


def test_a_gain_interval_across_the_floor_and_above_zero_leaves_the_share_rule() -> None:
    few = 60
    base, none = items(few, 36, 10), np.zeros(few, dtype=bool)
    none[np.flatnonzero(base)[:12]] = True  # 0.6 against 0.2
    scheme = none.copy()
    scheme[np.flatnonzero(base & ~none)[:14]] = True  # 0.43: gain 0.58
    claim = pyramidal(block(base, none, scheme, 0.2))
    gain_low, gain_high = retained_gain(scheme, base, none)[1:]
    assert 0 < gain_low < GAIN_FLOOR < gain_high
    assert claim.verdict in ("reproduced", "inconclusive") and claim.guard != "gain"


def test_the_report_takes_the_first_task_whose_baseline_uses_its_context(smollm2, tmp_path) -> None:
    """Unavailable tasks are passed over, a task that does not qualify too; the first that
    qualifies is taken with the scores it was tested on. With none, the first available."""
    import json
    from pathlib import Path

    from geomlens.analyses.concepts.choice import PACKAGED, task_spec

    step = str(files("geomlens") / "data" / PACKAGED["goal_step_wikihow/step_inference"])
    # the same answers after a context that says nothing: the baseline is the control's
    # (12 of them: a blind task cannot qualify at any size, and each item scored costs time)
    examples = json.loads(Path(step).read_text(encoding="utf-8"))["examples"][:12]
    blind = tmp_path / "blind.json"
    blind.write_text(json.dumps({"examples": [{**e, "input": "The answer is "} for e in examples]}))
    assert task_spec("no/such/task") is None
    tasks = [("missing", None), ("blind", str(blind)), ("step_inference", step)]
    found = choose_task(smollm2, 40, 0, tasks=tasks)
    assert [t.task for t in found.tried] == ["missing", "blind", "step_inference"]
    assert not found.tried[0].available and found.tried[0].test is None
    assert not found.tried[1].test.qualifies and found.tried[2].test.qualifies
    assert found.spec == step and len(found.scored[0]) == len(found.scored[1]) == 40
    none = choose_task(smollm2, 12, 0, tasks=tasks[:2])
    assert none.spec == str(blind) and not none.tried[-1].test.qualifies
