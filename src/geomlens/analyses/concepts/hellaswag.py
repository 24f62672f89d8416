"""``geomlens data hellaswag``: HellaSwag's validation split as the JSONL ``--task`` reads.

HellaSwag (Zellers et al. 2019, MIT licence) is on the Hugging Face hub as
``Rowan/hellaswag``, the copy lm-evaluation-harness reads. The ``datasets`` library fetches
and caches it when the hub is reachable; ``--source FILE`` reads a local copy instead (a
JSONL or parquet file of the same records, e.g. one copied from a machine that has the
hub), without the library. Every record is checked by the task reader's own rules
before anything is written, and the file is written whole or not at all.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from geomlens.analyses.concepts.tasks import data_dir, hellaswag_item
from geomlens.errors import GeomlensError, one_line
from geomlens.io.files import write_text_atomic

DATASET = "Rowan/hellaswag"
SPLIT = "validation"
FIELDS = (
    "ind",
    "activity_label",
    "ctx_a",
    "ctx_b",
    "ctx",
    "endings",
    "source_id",
    "split",
    "split_type",
    "label",
)
"""The fields kept, in the order of the hub's records."""


def default_out() -> Path:
    """``$GEOMLENS_DATA/hellaswag.jsonl`` when the variable is set, else
    ``data/hellaswag.jsonl``: where ``--task hellaswag`` finds it."""
    folder = data_dir()
    return (folder if folder is not None else Path("data")) / "hellaswag.jsonl"


def read_local(path: Path) -> list[dict[str, Any]]:
    """The records of a local JSONL or parquet copy (no cache is written)."""
    if not path.is_file():
        raise GeomlensError(
            f"{path} is not a file; give a JSONL or parquet file of HellaSwag records."
        )
    try:
        if path.suffix == ".parquet":
            import pyarrow.parquet as pq  # installed with datasets

            return list(pq.read_table(path).to_pylist())
        lines = path.read_text(encoding="utf-8").splitlines()
        return [json.loads(line) for line in lines if line.strip()]
    except (OSError, ValueError, ImportError) as exc:
        raise GeomlensError(f"cannot read {path}: {one_line(str(exc))}.") from None


def load_records(source: str | Path | None = None) -> list[dict[str, Any]]:
    """The validation split's records from the hub, or the records of a local file."""
    if source is not None:
        return read_local(Path(source))
    try:
        import datasets
    except ImportError:
        raise GeomlensError(
            "geomlens data hellaswag needs the datasets library: pip install datasets."
        ) from None
    datasets.disable_progress_bars()
    try:
        data = datasets.load_dataset(DATASET, split=SPLIT)
    except Exception as exc:  # ConnectionError offline, hub and cache errors
        raise GeomlensError(
            f"cannot fetch {DATASET} from the Hugging Face hub ({one_line(str(exc))[:200]}); "
            "where the hub is out of reach, copy the validation split as JSONL or parquet "
            "and pass it with --source FILE."
        ) from None
    return [dict(record) for record in data]


def write_hellaswag(records: Sequence[dict[str, Any]], out: str | Path) -> Path:
    """Check every record as ``--task`` will read it, then write them as JSONL."""
    if not records:
        raise GeomlensError("no HellaSwag records to write (the source is empty).")
    lines = []
    for i, record in enumerate(records):
        hellaswag_item(record, i, f"HellaSwag record {i + 1}")
        kept = {k: record[k] for k in FIELDS if k in record}
        lines.append(json.dumps(kept, ensure_ascii=False))
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    return write_text_atomic(out, "\n".join(lines) + "\n")


def fetch_hellaswag(
    out: str | Path | None = None, *, source: str | Path | None = None
) -> tuple[Path, int]:
    """Write the validation split (or a local copy) to ``out``; returns (path, records)."""
    records = load_records(source)
    path = write_hellaswag(records, Path(out) if out is not None else default_out())
    return path, len(records)
