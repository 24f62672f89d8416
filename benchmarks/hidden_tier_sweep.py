"""Every hidden-state-tier type of the reach table through ``geomlens report`` with its
default figures (static PNGs included), each type under a timeout.

    python benchmarks/hidden_tier_sweep.py [--jobs N] [--timeout S] [--types a,b,...]
        [--out DIR] [--keep]

For each type the reach table (docs/models.md, "Reach") lists as "hidden-state", a worker
process builds its tiny random model (``geomlens.models.tiny``: 2 layers, hidden 32) with
the tests' small tokenizer (WordPiece for a type transformers gives no causal-LM head,
byte-level BPE otherwise), saves it, and runs ``geomlens report --contexts 8 --length 16
--limit 2``. A worker runs its types one after another, so that the imports and the JIT
compilation of the figures' libraries are paid once per worker, not once per type; a type
that runs past ``--timeout`` seconds is recorded TIMEOUT, its worker is killed and a fresh
one takes the remaining types. One line per type: PASS, FAIL (``report`` exited non-zero
or raised, with the last line it printed), BUILD (transformers cannot build or reload the
tiny model; the reach table should say so) or TIMEOUT; then the counts. Run folders go to
DIR (a temporary folder unless given; removed unless ``--keep``). A check, not a test.
"""

from __future__ import annotations

import argparse
import queue
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ROW = re.compile(r"^\| `([^`]+)` \| hidden-state \|", re.M)

WORKER = """
import contextlib, io, sys, traceback
from pathlib import Path
from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES
from transformers import AutoTokenizer
from geomlens.cli import main
from geomlens.models.tiny import tiny_model

def last(text):
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1][:240] if lines else ""

root = Path(sys.argv[1])
tokenizers = {e: AutoTokenizer.from_pretrained(root / "tokenizers" / str(e)) for e in (0, 1)}
for model_type in sys.argv[2:]:
    print("START", model_type, flush=True)
    folder = root / model_type
    tok = tokenizers[int(model_type not in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES)]
    sizes = {"vocab_size": len(tok)}
    for key in ("bos", "eos", "pad"):
        if getattr(tok, f"{key}_token_id") is not None:
            sizes[f"{key}_token_id"] = getattr(tok, f"{key}_token_id")
    said = io.StringIO()
    try:
        with contextlib.redirect_stderr(said), contextlib.redirect_stdout(said):
            tiny_model(model_type, **sizes).save_pretrained(folder / "model")
            tok.save_pretrained(folder / "model")
    except Exception as exc:
        said = f"{type(exc).__name__}: {exc}".splitlines()[0][:200]
        print("DONE", model_type, "BUILD", said, flush=True)
        continue
    args = ["report", "--model", str(folder / "model"), "--contexts", "8", "--length", "16",
            "--limit", "2", "--quiet", "--out", str(folder / "run")]
    said = io.StringIO()
    try:
        with contextlib.redirect_stderr(said), contextlib.redirect_stdout(said):
            code = main(args)
    except BaseException:
        code, said = 1, io.StringIO(traceback.format_exc())
    status = "PASS" if code == 0 else "FAIL"
    print("DONE", model_type, status, "" if code == 0 else last(said.getvalue()), flush=True)
"""


def hidden_types() -> list[str]:
    """The reach table's hidden-state rows (docs/models.md)."""
    return ROW.findall((ROOT / "docs" / "models.md").read_text())


def save_tokenizers(folder: Path) -> None:
    """The tests' two small tokenizers (``tiny_models.small_tokenizer``: 0 byte-level BPE,
    1 WordPiece), trained once here and read by every worker."""
    sys.path.insert(0, str(ROOT / "tests"))
    from tiny_models import small_tokenizer

    for encoder in (0, 1):
        small_tokenizer(bool(encoder)).save_pretrained(folder / str(encoder))


def lines_of(proc: subprocess.Popen[str], out: queue.Queue[str | None]) -> None:
    assert proc.stdout is not None
    for line in proc.stdout:
        out.put(line.rstrip("\n"))
    out.put(None)


def worker(types: list[str], root: Path, timeout: float, report: queue.Queue[tuple]) -> None:
    """Run ``types`` in worker processes, one after another, respawning after a timeout
    or a crash; put (type, status, last line, seconds) on ``report`` for each."""
    code = WORKER
    left = list(types)
    while left:
        proc = subprocess.Popen(
            [sys.executable, "-c", code, str(root), *left],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=lines_of, args=(proc, lines), daemon=True).start()
        current, start = None, time.perf_counter()
        while True:
            try:
                line = lines.get(timeout=5)
            except queue.Empty:
                line = ""
            if line is None:  # the worker ended
                if current is not None:  # died inside a type
                    report.put((current, "FAIL", "the process died", time.perf_counter() - start))
                    left.remove(current)
                break
            if line.startswith("START "):
                current, start = line.split()[1], time.perf_counter()
            elif line.startswith("DONE "):
                _, model_type, status, *said = line.split(" ", 3)
                report.put((model_type, status, " ".join(said), time.perf_counter() - start))
                left.remove(model_type)
                current = None
            if current is not None and time.perf_counter() - start > timeout:
                proc.kill()
                report.put((current, "TIMEOUT", f"over {timeout:.0f} s", timeout))
                left.remove(current)
                break
        proc.wait()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=300.0)
    parser.add_argument("--types", default="", help="comma-separated types (default: all)")
    parser.add_argument("--out", default="")
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    types = [t for t in args.types.split(",") if t] or hidden_types()
    root = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="hidden-sweep-"))
    root.mkdir(parents=True, exist_ok=True)
    save_tokenizers(root / "tokenizers")
    jobs = max(1, min(args.jobs, len(types)))
    report: queue.Queue[tuple] = queue.Queue()
    threads = [
        threading.Thread(target=worker, args=(types[i::jobs], root, args.timeout, report))
        for i in range(jobs)
    ]
    for thread in threads:
        thread.start()
    counts: dict[str, int] = {}
    try:
        for _ in types:
            model_type, status, said, seconds = report.get()
            counts[status] = counts.get(status, 0) + 1
            print(f"{status:7s} {model_type:32s} {seconds:6.1f} s  {said}", flush=True)
        for thread in threads:
            thread.join()
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    print(f"{len(types)} types: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
