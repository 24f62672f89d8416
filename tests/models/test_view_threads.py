"""One view read from several threads at once: each call gets its own text's hidden states
(equal to a call made alone), and nothing raises."""

from __future__ import annotations

import dataclasses
import threading

import pytest
import torch
from tiny_models import VOCAB, char_tokenizer

import geomlens
from geomlens.capturing.hooks import hidden_states, on_outputs
from geomlens.models import ModelView

TEXTS = ("the cat sat", "a dog ran far from home")  # unequal lengths


@pytest.fixture(scope="module")
def tiny_gpt2(gpt2: ModelView) -> ModelView:
    return dataclasses.replace(gpt2, tokenizer=char_tokenizer(VOCAB))


def run_threads(work: list, calls: int) -> list[BaseException]:
    """Run each of ``work``'s functions ``calls`` times in its own thread, all started
    together; the exceptions raised."""
    errors: list[BaseException] = []
    start = threading.Barrier(len(work))

    def loop(fn) -> None:
        start.wait()
        try:
            for _ in range(calls):
                fn()
        except BaseException as error:  # noqa: BLE001 (handed back to the test)
            errors.append(error)

    threads = [threading.Thread(target=loop, args=(fn,)) for fn in work]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return errors


def test_two_threads_each_get_their_own_text(tiny_gpt2: ModelView):
    alone = [geomlens.activations(tiny_gpt2, text).hidden_states[0] for text in TEXTS]
    wrong: list[str] = []

    def reader(i: int):
        def read() -> None:
            got = geomlens.activations(tiny_gpt2, TEXTS[i], attentions=i == 1).hidden_states[0]
            if got.shape != alone[i].shape or not torch.equal(got, alone[i]):
                wrong.append(TEXTS[i])

        return read

    errors = run_threads([reader(0), reader(1)], calls=40)
    assert not errors, errors[0]
    assert not wrong, f"{len(wrong)} of 80 calls returned another text's states"


def test_a_hook_sees_only_its_own_threads_forward(tiny_gpt2: ModelView):
    """A hook registered in one thread is not called by a forward pass run in another,
    even by a plain pass that holds no lock (so no other thread's record is polluted)."""
    ids = torch.tensor([[1, 2, 3, 4]])
    seen: list[int] = []
    block = {0: tiny_gpt2.blocks[0].module}
    ready, done = threading.Event(), threading.Event()

    def other() -> None:
        ready.wait()
        with torch.inference_mode():
            tiny_gpt2.base(input_ids=ids)  # not through geomlens: no lock taken
        done.set()

    thread = threading.Thread(target=other)
    thread.start()
    with on_outputs(block, lambda key, x, y: seen.append(threading.get_ident())):
        ready.set()
        done.wait()
        hidden_states(tiny_gpt2, ids, [1])
    thread.join()
    assert seen == [threading.get_ident()]
