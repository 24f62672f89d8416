"""Two threads reading one view at once: how many calls return another text's states or fail.

    python benchmarks/view_threads.py [--calls 200]

Builds a tiny random GPT-2 (2 blocks, d=32, a character tokenizer) in a temporary folder,
loads it once, and has two threads call ``geomlens.activations(view, text)`` ``--calls``
times each, on texts of unequal length (11 and 23 characters), all started together.
Each result is compared with the same call made alone. Prints the calls made, those that
returned other hidden states, and those that raised (by exception type).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
from collections import Counter
from pathlib import Path

import torch
from transformers import GPT2Config, GPT2LMHeadModel

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from tiny_models import char_tokenizer  # noqa: E402 (the tests' tokenizer builder)

import geomlens  # noqa: E402

TEXTS = ("the cat sat", "a dog ran far from home")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200, help="calls per thread")
    calls = parser.parse_args().calls
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch) / "tiny-gpt2"
        torch.manual_seed(0)
        config = GPT2Config(n_layer=2, n_embd=32, n_head=4, vocab_size=64, n_positions=32)
        GPT2LMHeadModel(config).save_pretrained(folder)
        char_tokenizer(64).save_pretrained(folder)
        view = geomlens.load_model(str(folder))
    alone = [geomlens.activations(view, text).hidden_states[0] for text in TEXTS]
    wrong, raised = [0], Counter[str]()
    start = threading.Barrier(len(TEXTS))

    def read(i: int) -> None:
        start.wait()
        for _ in range(calls):
            try:
                got = geomlens.activations(view, TEXTS[i]).hidden_states[0]
            except Exception as error:  # noqa: BLE001 (counted, the point of the benchmark)
                raised[type(error).__name__] += 1
                continue
            if got.shape != alone[i].shape or not torch.equal(got, alone[i]):
                wrong[0] += 1

    threads = [threading.Thread(target=read, args=(i,)) for i in range(len(TEXTS))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    print(f"{len(TEXTS) * calls} calls: {wrong[0]} returned other states, raised {dict(raised)}")


if __name__ == "__main__":
    main()
