"""``geomlens data hellaswag`` on local copies (the hub is out of reach here and in CI)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import datasets
import pytest

from geomlens.analyses.concepts.tasks import read_task
from geomlens.cli import main

RECORDS = [
    {
        "ind": 24,
        "activity_label": "Roof shingle removal",
        "ctx_a": "A man is sitting on a roof.",
        "ctx_b": "he",
        "ctx": "A man is sitting on a roof. he",
        "endings": [
            "is using wrap to wrap a pair of skis.",
            "is ripping level tiles off.",
            "is holding a rubik's cube.",
            "starts pulling up roofing on a roof.",
        ],
        "source_id": "activitynet~v_-JhWjGDPHMY",
        "split": "val",
        "split_type": "indomain",
        "label": "3",
    },
    {
        "ind": 92,
        "activity_label": "Clean and jerk",
        "ctx_a": "A lady walks to a barbell. She bends down and grabs the pole.",
        "ctx_b": "the lady",
        "ctx": "A lady walks to a barbell. She bends down and grabs the pole. the lady",
        "endings": [
            "swings and lands in her arms.",
            "pulls the barbell forward.",
            "pulls a rope attached to the barbell.",
            "stands and lifts the weight over her head.",
        ],
        "source_id": "activitynet~v_-lJS58hyo1c",
        "split": "val",
        "split_type": "zeroshot",
        "label": "3",
    },
]


def write_jsonl(path, records) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")


@pytest.mark.parametrize("kind", ["jsonl", "parquet"])
def test_local_copy_becomes_the_task_file(tmp_path, kind, capsys):
    source = tmp_path / f"validation.{kind}"
    if kind == "jsonl":
        write_jsonl(source, RECORDS)
    else:
        datasets.Dataset.from_list(RECORDS).to_parquet(str(source))
    out = tmp_path / "data" / "hellaswag.jsonl"
    assert main(["data", "hellaswag", "--source", str(source), "--out", str(out)]) == 0
    assert "2 items written" in capsys.readouterr().out
    task = read_task(out)
    assert task.format == "hellaswag"
    assert [it.gold for it in task.items] == [3, 3]
    # the same items as reading the records directly (lm-eval's preprocessing)
    write_jsonl(tmp_path / "direct.jsonl", RECORDS)
    assert task.items == read_task(tmp_path / "direct.jsonl").items
    assert task.items[0].query == "Roof shingle removal: A man is sitting on a roof. He"


def test_bad_record_writes_nothing(tmp_path, capsys):
    bad = [RECORDS[0], {**RECORDS[1], "label": "7"}]
    source = tmp_path / "validation.jsonl"
    write_jsonl(source, bad)
    out = tmp_path / "hellaswag.jsonl"
    assert main(["data", "hellaswag", "--source", str(source), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert "HellaSwag record 2" in err and "\n" not in err
    assert not out.exists()
    assert main(["data", "hellaswag", "--source", str(tmp_path / "none.jsonl")]) == 2
    assert "is not a file" in capsys.readouterr().err


def test_hub_out_of_reach_is_one_sentence(tmp_path):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf")}
    out = tmp_path / "hellaswag.jsonl"
    done = subprocess.run(
        [sys.executable, "-m", "geomlens.cli", "data", "hellaswag", "--out", str(out)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "cannot fetch Rowan/hellaswag" in lines[0]
    assert "--source FILE" in lines[0] and "Traceback" not in done.stderr
    assert not out.exists()
