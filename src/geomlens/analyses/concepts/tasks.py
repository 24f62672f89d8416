"""Multiple-choice tasks: HellaSwag JSONL and BIG-bench JSON, lookup by name, few-shot prompts.

A task is a list of items, each a query text, its answer choices and the gold index.
HellaSwag records are formatted as lm-evaluation-harness formats them
(``activity_label: ctx_a Ctx_b``, WikiHow bracket artefacts removed); BIG-bench records
keep their ``input`` (trailing whitespace removed: it is the space before the answer),
with the choices in ``target_scores`` order. A few-shot
prompt is K solved examples of the same task followed by the query, joined by blank lines.
"""

from __future__ import annotations

import hashlib
import math
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from geomlens.errors import FILE_LIMITS, GeomlensError, distinct_choices, within_limit
from geomlens.io.files import read_user_text
from geomlens.io.jsontext import JSONTextError, bad_text, loads

DATA_ENV = "GEOMLENS_DATA"
FEWSHOT_DELIMITER = "\n\n"
TARGET_DELIMITER = " "


@dataclass(frozen=True)
class Item:
    """One multiple-choice question.

    Attributes:
        index: position in the task file (0-based, file order).
        query: the text the choices continue.
        choices: the answer texts.
        gold: index of the correct choice.
    """

    index: int
    query: str
    choices: tuple[str, ...]
    gold: int


@dataclass(frozen=True)
class Task:
    """A task read from one file.

    Attributes:
        name: the task's name (file's task name, or its folder or file stem).
        path: the file read.
        format: "hellaswag" or "bigbench".
        items: every item, in file order.
        fingerprint: sha256 of the file's bytes.
    """

    name: str
    path: str
    format: str
    items: tuple[Item, ...]
    fingerprint: str

    def take(self, limit: int | None) -> list[Item]:
        """The first ``limit`` items in file order (all when None)."""
        if limit is not None and limit <= 0:
            raise GeomlensError(f"--limit must be at least 1 (got {limit}).")
        return list(self.items if limit is None else self.items[:limit])


# formatting ----------------------------------------------------------------------------
def hellaswag_preprocess(text: str) -> str:
    """lm-evaluation-harness's HellaSwag clean-up: strip, drop WikiHow bracket tags."""
    text = text.strip().replace(" [title]", ". ")
    text = re.sub(r"\[.*?\]", "", text)
    return text.replace("  ", " ")


def check_text(where: str, what: str, value: str) -> str:
    """``value`` if it is text a tokenizer can take; a lone surrogate is refused."""
    problem = bad_text(value)
    if problem is not None:
        raise GeomlensError(
            f"{where} has {problem} in its {what}, which is not text; fix that item "
            "(a surrogate pair must be written whole)."
        )
    return value


def whole_label(label: Any, where: str) -> int:
    """A HellaSwag label as an index: an integer, or text of one ("2"); 1.7 is refused,
    not rounded."""
    if isinstance(label, bool):
        value: Any = None
    elif isinstance(label, int):
        value = label
    elif isinstance(label, float) and math.isfinite(label) and label.is_integer():
        value = int(label)
    elif isinstance(label, str) and label.strip().lstrip("-").isdigit() and len(label) < 20:
        value = int(label.strip())
    else:
        value = None
    if value is None:
        shown = repr(label) if len(repr(label)) <= 30 else repr(label)[:27] + "..."
        raise GeomlensError(
            f"{where} has label {shown}, which is not the index of an ending (0, 1, 2, ...)."
        )
    return int(value)


def hellaswag_item(record: dict[str, Any], index: int, where: str) -> Item:
    try:
        ctx_a, ctx_b, endings_raw = record["ctx_a"], record["ctx_b"], record["endings"]
        label = record["label"]
    except KeyError:
        raise GeomlensError(
            f"{where} is not a HellaSwag record (needs ctx_a, ctx_b, endings, label)."
        ) from None
    activity = record.get("activity_label", "")
    if not all(isinstance(v, str) for v in (ctx_a, ctx_b, activity)):
        raise GeomlensError(f"{where} has a ctx_a, ctx_b or activity_label that is not text.")
    if not isinstance(endings_raw, list) or not all(isinstance(e, str) for e in endings_raw):
        raise GeomlensError(
            f"{where} has endings that are not a list of texts (got "
            f"{type(endings_raw).__name__}); give them as a JSON list of strings."
        )
    ctx = ctx_a + " " + ctx_b.capitalize()
    if "activity_label" in record:
        ctx = activity + ": " + ctx
    check_text(where, "context", ctx)
    endings = [hellaswag_preprocess(check_text(where, "endings", e)) for e in endings_raw]
    if label in ("", None):
        raise GeomlensError(f"{where} has no label; give a labelled split (train or validation).")
    gold = whole_label(label, where)
    if not endings or not 0 <= gold < len(endings):
        raise GeomlensError(f"{where} has label {gold} outside its {len(endings)} endings.")
    return Item(index, hellaswag_preprocess(ctx), tuple(endings), gold)


def bigbench_item(record: dict[str, Any], index: int, where: str) -> Item:
    query = record.get("input")
    scores = record.get("target_scores")
    if not isinstance(scores, dict):
        raise GeomlensError(
            f"{where} is not a BIG-bench multiple-choice example (needs input and target_scores "
            "as an object of option: score)."
        )
    if not isinstance(query, str) or len(scores) < 2:
        raise GeomlensError(f"{where} needs a text input and at least two target_scores.")
    check_text(where, "input", query)
    choices = [check_text(where, "options", str(c)) for c in scores]
    values = []
    for choice, score in scores.items():
        if isinstance(score, bool) or not isinstance(score, int | float):
            raise GeomlensError(f"{where} has a score for {choice[:40]!r} that is not a number.")
        if not math.isfinite(score):
            raise GeomlensError(
                f"{where} has the score {score} for {choice[:40]!r}; scores must be finite numbers."
            )
        values.append(float(score))
    best = max(values)
    if best <= 0 or values.count(best) != 1:
        raise GeomlensError(f"{where} needs exactly one best option in target_scores.")
    # The context's trailing space becomes the space before the answer: " <option>" is
    # scored, as lm-evaluation-harness scores BIG-bench (its inputs end without it).
    return Item(index, query.rstrip(), tuple(choices), values.index(best))


def record_item(record: Any, index: int, where: str) -> tuple[str, Item]:
    """An item from a JSON record of either format, with the format's name."""
    if isinstance(record, dict) and "target_scores" in record:
        return "bigbench", bigbench_item(record, index, where)
    if isinstance(record, dict) and "endings" in record:
        return "hellaswag", hellaswag_item(record, index, where)
    raise GeomlensError(
        f"{where} is neither a HellaSwag record (ctx_a, ctx_b, endings, label) nor a "
        "BIG-bench example (input, target_scores)."
    )


# reading ---------------------------------------------------------------------------------
def read_task(path: str | Path, name: str | None = None) -> Task:
    """Read a HellaSwag JSONL file, a BIG-bench ``task.json``, or a JSONL of BIG-bench examples.

    Args:
        path: the file (a folder holding ``task.json`` is accepted).
        name: the task's name (default: the file's own name field, else its folder/stem).
    """
    path = Path(path)
    if path.is_dir():
        path = path / "task.json"
    text = read_user_text(path, f"task file {path}", FILE_LIMITS["task file"])
    records: list[tuple[Any, str]] = []
    file_name: str | None = None
    if path.suffix == ".jsonl":
        # Split on "\n" only: str.splitlines would also break at U+2028 inside JSON strings.
        for n, line in enumerate(text.split("\n"), 1):
            if not line.strip():
                continue
            try:
                records.append((loads(line), f"{path} line {n}"))
            except JSONTextError as exc:
                raise GeomlensError(f"{path} line {n} is not valid JSON ({exc.reason}).") from None
    else:
        try:
            data = loads(text)
        except JSONTextError as exc:
            raise GeomlensError(f"task file {path} is not valid JSON ({exc.reason}).") from None
        if not isinstance(data, dict) or not isinstance(data.get("examples"), list):
            raise GeomlensError(f"{path} is not a BIG-bench task (no list of 'examples').")
        file_name = data.get("name") if isinstance(data.get("name"), str) else None
        records = [(r, f"{path} example {i}") for i, r in enumerate(data["examples"])]
    if not records:
        raise GeomlensError(f"task file {path} holds no items.")
    within_limit(f"task file {path}", "items", len(records), "split the file")
    formats = set()
    items = []
    for i, (record, where) in enumerate(records):
        fmt, item = record_item(record, i, where)
        distinct_choices(where, item.choices)
        formats.add(fmt)
        items.append(item)
    if len(formats) > 1:
        raise GeomlensError(f"{path} mixes HellaSwag and BIG-bench records; use one format.")
    default = path.parent.name if path.name == "task.json" else path.stem
    return Task(
        name=name or file_name or default,
        path=str(path),
        format=formats.pop(),
        items=tuple(items),
        fingerprint=hashlib.sha256(text.encode("utf-8")).hexdigest(),
    )


def data_dir(given: str | Path | None = None) -> Path | None:
    """The data folder: ``given``, else the ``GEOMLENS_DATA`` variable, else None."""
    if given is not None:
        return Path(given)
    env = os.environ.get(DATA_ENV)
    return Path(env) if env else None


def task_files(folder: Path) -> dict[str, Path]:
    """Every task under ``folder`` by name: relative folder of a task.json, or file stem."""
    found: dict[str, Path] = {}
    for path in sorted(folder.rglob("task.json")):
        found[path.parent.relative_to(folder).as_posix()] = path
    for path in sorted(folder.rglob("*.jsonl")):
        found[path.relative_to(folder).with_suffix("").as_posix()] = path
    return found


def resolve_task(spec: str, data: str | Path | None = None) -> Path:
    """The file of a task given by path or by short name under the data folder.

    A short name matches a task's relative path under the data folder, or its last parts
    ("social_iqa", "step_inference", "goal_step_wikihow/step_inference",
    "bigbench/timedial").
    """
    path = Path(spec).expanduser()
    if path.exists() and not path.is_file() and not path.is_dir():
        raise GeomlensError(
            f"task file {spec} is not a regular file (a device, pipe or socket); give a "
            ".json or .jsonl task file."
        )
    if path.is_file() or (path.is_dir() and (path / "task.json").is_file()):
        return path / "task.json" if path.is_dir() else path
    if path.suffix in (".json", ".jsonl") or path.is_absolute() or spec.startswith("."):
        raise GeomlensError(f"task file {spec} does not exist.")
    folder = data_dir(data)
    if folder is None:
        raise GeomlensError(
            f"task {spec!r} is not a file; give a path, or a data folder with --data-dir or "
            f"{DATA_ENV} to look names up in."
        )
    if not folder.is_dir():
        raise GeomlensError(f"data folder {folder} does not exist.")
    tasks = task_files(folder)
    want = spec.strip("/")
    hits = [p for key, p in tasks.items() if key == want or key.endswith("/" + want)]
    if len(hits) == 1:
        return hits[0]
    if len(hits) > 1:
        names = [k for k, p in tasks.items() if p in hits]
        raise GeomlensError(f"task name {spec!r} is ambiguous: {', '.join(names)}.")
    names = sorted(tasks)
    shown = ", ".join(names[:12]) + (", ..." if len(names) > 12 else "")
    raise GeomlensError(
        f"unknown task {spec!r} in {folder}; known tasks: {shown or 'none'}."
        if names
        else f"unknown task {spec!r}: {folder} holds no tasks (run `geomlens data bigbench`)."
    )


def load_task(spec: str, data: str | Path | None = None) -> Task:
    """Resolve a task by path or name, then read it."""
    path = resolve_task(spec, data)
    folder = data_dir(data)
    name = None
    if folder is not None and path.name == "task.json":
        try:
            name = path.parent.relative_to(folder).as_posix().removeprefix("bigbench/")
        except ValueError:
            name = None
    return read_task(path, name=name)


# prompts ---------------------------------------------------------------------------------
def split_answer(context: str, choice: str) -> tuple[str, str]:
    """The lm-evaluation-harness request: context, and " " + choice as continuation.

    Trailing whitespace of the context moves to the front of the continuation (as
    lm-evaluation-harness's Hugging Face model does before tokenising).
    """
    continuation = TARGET_DELIMITER + choice
    stripped = context.rstrip()
    return stripped, context[len(stripped) :] + continuation


@dataclass(frozen=True)
class Prompt:
    """The context of one evaluated item: solved examples, then the query.

    Attributes:
        blocks: the K example texts (query + gold answer each), then the item's query.
        shots: indices of the example items (in the task).
        completions: per block, its completion passage (the tail of the block: an
            example's gold continuation as it is scored; "" for the query), or () when
            unknown (contexts handed over as text, as lm-eval does).
    """

    blocks: tuple[str, ...]
    shots: tuple[int, ...]
    completions: tuple[str, ...] = ()

    @property
    def text(self) -> str:
        return FEWSHOT_DELIMITER.join(self.blocks)


def fewshot_indices(n_items: int, index: int, k: int, seed: int) -> tuple[int, ...]:
    """K distinct item indices other than ``index``, drawn from (seed, index) alone."""
    if k == 0:
        return ()
    if k >= n_items:
        raise GeomlensError(f"--shots {k} needs more than {k} items in the task ({n_items}).")
    rng = np.random.default_rng([seed, index])
    picks = rng.choice(n_items - 1, size=k, replace=False)
    return tuple(int(p) + int(p >= index) for p in picks)


def solved(item: Item) -> str:
    """An example's text: its query followed by its gold answer, as it would be scored."""
    context, continuation = split_answer(item.query, item.choices[item.gold])
    return context + continuation


def completion(item: Item) -> str:
    """An example's completion passage: the tail of ``solved(item)`` after its context."""
    return split_answer(item.query, item.choices[item.gold])[1]


def build_prompt(task: Task, item: Item, shots: int, seed: int) -> Prompt:
    """The K-shot prompt of ``item`` (K = 0: the query alone)."""
    if shots < 0:
        raise GeomlensError(f"--shots must be 0 or more (got {shots}).")
    picks = fewshot_indices(len(task.items), item.index, shots, seed)
    blocks = tuple(solved(task.items[i]) for i in picks) + (item.query,)
    completions = tuple(completion(task.items[i]) for i in picks) + ("",)
    return Prompt(blocks, picks, completions)
