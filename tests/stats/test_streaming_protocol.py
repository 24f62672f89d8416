"""Every streaming statistic follows one protocol (``stats.base.Accumulator``).

For ``NormStats``, ``KernelAccumulator`` and ``RefactorAccumulator``: filling on batches
A then B equals filling A and B apart and merging (either order); a state saved with
``state_dict`` (through torch.save and safetensors) and loaded into a new instance
continues exactly as if never interrupted; accumulators of other settings refuse to merge.
Tiny random inputs and a tiny random GPT-2; nothing is read from disk.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch
from safetensors.torch import load as load_safetensors
from safetensors.torch import save as save_safetensors

from geomlens.analyses.sphere.compute import NormStats
from geomlens.analyses.walk.kernels import KernelAccumulator
from geomlens.analyses.walk.refactor import AttentionRecord, RefactorAccumulator, record_attention
from geomlens.errors import GeomlensError
from geomlens.models import ModelView
from geomlens.models.view import NormView
from geomlens.stats import Accumulator, DecompositionAccumulator

# --------------------------------------------------------------------------- the cases


def _norm() -> NormView:
    g = torch.Generator().manual_seed(1)
    d = 8
    w, b = 1 + 0.2 * torch.randn(d, generator=g), 0.2 * torch.randn(d, generator=g)
    return NormView("layernorm", w, b, 1e-5, torch.nn.Identity())


def _norm_batches() -> list[tuple[torch.Tensor, torch.Tensor]]:
    norm, g = _norm(), torch.Generator().manual_seed(2)
    out = []
    for shape in ((2, 5, 8), (3, 5, 8), (4, 8)):  # the last is 2-D: no skip-first part
        x = torch.randn(*shape, generator=g) * 3 + 1
        y = torch.nn.functional.layer_norm(x, (8,), norm.weight, norm.bias, norm.eps)
        out.append((x, y))
    return out


def _norm_stats(name: str = "blocks.0.norm_attn", d: int = 8) -> NormStats:
    return NormStats(name, "layernorm", d, 0)


def _norm_update(acc: NormStats, batch: tuple[torch.Tensor, torch.Tensor]) -> None:
    acc.update(*batch, _norm())


def _attention(causal: bool, T: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Random logits [B, H, T, T] and their (causally masked) softmax."""
    logits = torch.randn(2, 3, T, T, generator=torch.Generator().manual_seed(seed))
    mask = torch.ones(T, T, dtype=torch.bool).tril() if causal else torch.ones(T, T).bool()
    attn = logits.masked_fill(~mask, float("-inf")).softmax(-1)
    return attn, logits


def _kernel_batches(causal: bool = True, T: int = 12) -> list[list[Any]]:
    """Per batch, per layer: (attention, logits)."""
    return [[_attention(causal, T, 10 * b + l) for l in range(2)] for b in range(3)]


def _kernel(causal: bool = True, n_offsets: int = 8, n_heads: int = 3) -> KernelAccumulator:
    return KernelAccumulator(2, n_heads, causal=causal, n_offsets=n_offsets)


def _kernel_update(acc: KernelAccumulator, batch: list[Any], logits: bool = True) -> None:
    for layer, (attn, scores) in enumerate(batch):
        acc.update(layer, attn, scores if logits else None)


def _tiny_gpt2(n_head: int = 2) -> ModelView:
    import transformers

    from geomlens.models.families.gpt2 import GPT2

    config = transformers.GPT2Config(
        vocab_size=48, n_positions=16, n_embd=16, n_layer=2, n_head=n_head, n_inner=24
    )
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(config, attn_implementation="eager")
    model.eval().requires_grad_(False)
    return GPT2.build(model, None, "tiny-gpt2", "memory")


@pytest.fixture(scope="module")
def gpt2() -> ModelView:
    return _tiny_gpt2()


@pytest.fixture(scope="module")
def records(gpt2: ModelView) -> list[AttentionRecord]:
    g = torch.Generator().manual_seed(3)
    return [record_attention(gpt2, torch.randint(0, 48, (b, 6), generator=g)) for b in (2, 3, 1)]


Case = tuple[Callable[[], Any], Callable[[Any, Any], None], list[Any]]


@pytest.fixture(params=["norm", "kernel", "refactor"])
def case(request: pytest.FixtureRequest) -> Case:
    """(new accumulator, update with one batch, three batches)."""
    if request.param == "norm":
        return _norm_stats, _norm_update, _norm_batches()
    if request.param == "kernel":
        return _kernel, _kernel_update, _kernel_batches()
    view = request.getfixturevalue("gpt2")
    recs = request.getfixturevalue("records")
    return (lambda: RefactorAccumulator(view)), RefactorAccumulator.update, recs


def _filled(case: Case, batches: list[Any]) -> Any:
    new, update, _ = case
    acc = new()
    for batch in batches:
        update(acc, batch)
    return acc


def _assert_same_state(a: Any, b: Any, exact: bool) -> None:
    sa, sb = a.state_dict(), b.state_dict()
    assert sa.keys() == sb.keys()
    for name in sa:
        if exact or not sa[name].is_floating_point():
            assert torch.equal(sa[name], sb[name]), name
        else:
            torch.testing.assert_close(sa[name], sb[name], rtol=1e-12, atol=1e-12, msg=name)


# --------------------------------------------------------------------------- protocol


def test_every_statistic_is_an_accumulator(case: Case):
    assert isinstance(case[0](), Accumulator)
    assert isinstance(DecompositionAccumulator([0], 2, 3, 4), Accumulator)


def test_state_is_tensors_only_float64_sums(case: Case):
    new, update, batches = case
    state = _filled(case, batches).state_dict()
    assert state and all(isinstance(v, torch.Tensor) for v in state.values())
    floats = {v.dtype for v in state.values() if v.is_floating_point()}
    assert floats == {torch.float64}


def test_merge_equals_one_pass_in_both_orders(case: Case):
    _, _, batches = case
    whole = _filled(case, batches)
    first, rest = batches[:1], batches[1:]
    ab = _filled(case, first).merge(_filled(case, rest))
    ba = _filled(case, rest)
    assert ba.merge(_filled(case, first)) is ba
    for merged in (ab, ba):
        _assert_same_state(merged, whole, exact=False)
    empty = case[0]().merge(_filled(case, batches))  # an empty accumulator merges with any
    _assert_same_state(empty, whole, exact=True)


def test_resume_from_state_continues_exactly(case: Case):
    new, update, batches = case
    whole = _filled(case, batches)
    state = _filled(case, batches[:2]).state_dict()
    buffer = io.BytesIO()
    torch.save(state, buffer)
    buffer.seek(0)
    for saved in (torch.load(buffer), load_safetensors(save_safetensors(state))):
        resumed = new()
        resumed.load_state_dict(saved)
        update(resumed, batches[2])
        _assert_same_state(resumed, whole, exact=True)
        assert _final(resumed.finalize()) == _final(whole.finalize())


def _final(result: Any) -> Any:
    """A finalize() result in a form ``==`` compares (nan as a string)."""
    if isinstance(result, dict):
        return repr(result)
    return repr({k: np.asarray(v).tolist() for k, v in vars(result).items()})


def test_load_refuses_other_settings():
    with pytest.raises(GeomlensError, match="width"):
        _norm_stats(d=4).load_state_dict(_norm_stats().state_dict())
    with pytest.raises(GeomlensError, match="offsets"):
        _kernel(n_offsets=4).load_state_dict(_kernel().state_dict())
    with pytest.raises(GeomlensError, match="does not match"):
        _kernel(causal=False, n_offsets=1).load_state_dict(_kernel(n_offsets=1).state_dict())
    state = _kernel().state_dict()
    del state["count"]
    with pytest.raises(GeomlensError, match="count"):
        _kernel().load_state_dict(state)


def test_kernel_from_state_dict():
    for causal in (True, False):
        acc = _kernel(causal=causal)
        for batch in _kernel_batches(causal):
            _kernel_update(acc, batch)
        again = KernelAccumulator.from_state_dict(acc.state_dict())
        assert again.causal == causal and again.n_offsets == acc.n_offsets
        _assert_same_state(again, acc, exact=True)


def test_refactor_load_refuses_other_shapes(gpt2: ModelView, records: list[AttentionRecord]):
    acc = RefactorAccumulator(gpt2)
    acc.update(records[0])
    with pytest.raises(GeomlensError, match="norm"):
        RefactorAccumulator(_tiny_gpt2(n_head=4)).load_state_dict(acc.state_dict())


# --------------------------------------------------------------------------- refusals


def test_norm_merge_refuses_other_norms():
    acc = _norm_stats()
    for other in (_norm_stats(d=4), _norm_stats(name="final_norm")):
        with pytest.raises(GeomlensError, match="different norms"):
            acc.merge(other)
    with pytest.raises(GeomlensError):
        acc.merge(NormStats("blocks.0.norm_attn", "rmsnorm", 8, 0))
    with pytest.raises(GeomlensError):
        acc.merge(NormStats("blocks.0.norm_attn", "layernorm", 8, 1))


@pytest.mark.parametrize(
    "other", [{"n_offsets": 4}, {"causal": False}, {"n_heads": 2}], ids=lambda o: str(o)
)
def test_kernel_merge_refuses_other_shapes(other: dict[str, Any]):
    with pytest.raises(GeomlensError, match="different shapes"):
        _kernel().merge(_kernel(**other))


def test_kernel_merge_refuses_other_lengths_and_scores():
    short, long_ = _kernel(), _kernel()
    _kernel_update(short, _kernel_batches(T=10)[0])
    _kernel_update(long_, _kernel_batches(T=12)[0])
    with pytest.raises(GeomlensError, match="windows of 12 tokens"):
        short.merge(long_)
    scored, unscored = _kernel(), _kernel()
    _kernel_update(scored, _kernel_batches()[0])
    _kernel_update(unscored, _kernel_batches()[1], logits=False)
    with pytest.raises(GeomlensError, match="pre-softmax"):
        scored.merge(unscored)
    assert _kernel().merge(unscored).finalize().logits is None


def test_refactor_merge_refuses_other_models(gpt2: ModelView):
    with pytest.raises(GeomlensError, match="different shapes"):
        RefactorAccumulator(gpt2).merge(RefactorAccumulator(_tiny_gpt2(n_head=4)))
