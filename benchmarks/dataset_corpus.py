"""Python memory a corpus holds: the BBC articles as a saved dataset (streamed) against the
same rows as a .jsonl file (held), and the windows each gives.

    python benchmarks/dataset_corpus.py
"""

import json
import tempfile
import time
import tracemalloc
from pathlib import Path

import datasets
from transformers import AutoTokenizer

from geomlens.corpus import load_corpus, make_windows
from geomlens.models.loading import resolve_folder

tok = AutoTokenizer.from_pretrained(resolve_folder("smollm2-135m"))
bbc = load_corpus("bbc")
rows = {"text": [d.text for d in bbc.documents], "label": [d.label for d in bbc.documents]}
tmp = Path(tempfile.mkdtemp())
datasets.Dataset.from_dict(rows).save_to_disk(tmp / "saved")
pairs = zip(rows["text"], rows["label"], strict=True)
lines = [json.dumps({"text": text, "label": label}) + "\n" for text, label in pairs]
(tmp / "a.jsonl").write_text("".join(lines), encoding="utf-8")
del lines
del bbc, rows
ids = []
for source in (tmp / "a.jsonl", tmp / "saved"):
    tracemalloc.start()
    t = time.perf_counter()
    corpus = load_corpus(source)
    held = tracemalloc.get_traced_memory()[0]
    w = make_windows(corpus, tok, 128, 128, seed=0)
    cur, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    seconds = time.perf_counter() - t
    print(
        f"{source.name}: {len(corpus)} documents, the corpus holds {held / 2**20:.1f} MiB, "
        f"peak with 128 x 128 windows {peak / 2**20:.1f} MiB, {seconds:.1f} s"
    )
    ids.append(w.input_ids)
    del corpus, w
print("same token ids and labels:", (ids[0] == ids[1]).all())
