"""What a model's whole-content identity costs, first and cached, measured in one run.

    python benchmarks/identity_hash.py [--model smollm2-135m] [--repeats 3]

``geomlens.runs.runfolder.model_fingerprint`` hashes the whole config, tokenizer and weight
files (sha256, streamed) and remembers each file's hash by size, inode and times under
the user cache. Measured here, each the median of ``--repeats``:

(a) first, cold: no remembered hash, the files evicted from the page cache first
    (``posix_fadvise(DONTNEED)``: they are read from the disk, as on a first run);
(b) first, warm: no remembered hash, the files in the page cache (a model just loaded);
(c) cached: the hashes remembered (every rerun on unchanged files): a stat per file;
(d) the baseline it replaced: config plus the first and last MiB of each weight file;
(e) loading the model (``geomlens.load_model``), what every run does anyway.

Prints the seconds, the bytes hashed, the hashing rate and the ratios a/e, b/e and c/e.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import statistics
import tempfile
from pathlib import Path

from capture import timed  # the capture benchmark's timer (one copy)


def evict(paths: list[Path]) -> None:
    """Drop the files' pages from the page cache (clean pages only; no root needed)."""
    for path in paths:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def head_tail_fingerprint(folder: Path) -> str:
    """The earlier fingerprint: config, then each weight file's size, first and last MiB."""
    h = hashlib.sha256()
    h.update((folder / "config.json").read_bytes())
    for path in sorted(folder.glob("*.safetensors")):
        size = path.stat().st_size
        h.update(f"{path.name}|{size}".encode())
        with open(path, "rb") as f:
            h.update(f.read(1 << 20))
            f.seek(max(0, size - (1 << 20)))
            h.update(f.read(1 << 20))
    return h.hexdigest()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    import geomlens
    from geomlens.io import files
    from geomlens.models.loading import resolve_folder
    from geomlens.runs.runfolder import identity_files, model_fingerprint

    folder = resolve_folder(args.model)
    paths = identity_files(folder)
    size = sum(p.stat().st_size for p in paths)
    with tempfile.TemporaryDirectory() as cache:
        os.environ["GEOMLENS_CACHE"] = cache  # a hash cache of this run only (the model
        # loads from its folder, resolved above, so nothing is converted again)
        hashes = Path(cache) / "hashes"

        def first(cold: bool) -> float:
            for entry in hashes.glob("*.json"):
                entry.unlink()
            if cold:
                evict(paths)
            return timed(lambda: model_fingerprint(folder))

        rows: dict[str, list[float]] = {k: [] for k in "abcde"}
        for _ in range(args.repeats):  # interleaved, so drift in machine load hits all alike
            rows["a"].append(first(cold=True))
            rows["b"].append(first(cold=False))
            rows["c"].append(timed(lambda: model_fingerprint(folder)))
            rows["d"].append(timed(lambda: head_tail_fingerprint(folder)))
            rows["e"].append(timed(lambda: geomlens.load_model(str(folder))))
        assert files.content_hash(paths[-1]) == files.content_hash(paths[-1], cache=False)
    med = {k: statistics.median(v) for k, v in rows.items()}
    names = {
        "a": "first, cold (read from disk)",
        "b": "first, warm (page cache)",
        "c": "cached (stat only)",
        "d": "baseline: head and tail MiB",
        "e": "load_model",
    }
    print(f"{args.model}: {len(paths)} files, {size / 2**20:.1f} MiB hashed ({folder})")
    for key, name in names.items():
        print(f"  ({key}) {name:32s} {med[key]:8.4f} s")
    print(f"  hashing rate, cold: {size / 2**20 / med['a']:.0f} MiB/s; warm: "
          f"{size / 2**20 / med['b']:.0f} MiB/s")  # fmt: skip
    for key in "abc":
        print(f"  ratio {key}/e (identity over load): {med[key] / med['e']:.3f}")


if __name__ == "__main__":
    main()
