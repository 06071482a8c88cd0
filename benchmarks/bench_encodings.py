"""Encoding scan speed on a generated model directory, with and without 20 GB of sparse weights.

    python benchmarks/bench_encodings.py [--copies 40]

Prints files/s and MB/s of the encodings check (detection only, no fixing; best of three runs) and, in the same run,
of a naive loop that calls chardet.detect on every file (the approach that silently corrupts about one
file in six when its guess is used to convert), and the ratio.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from support.textcorpus import write_corpus

from decode_doctor.checks.encodings.check import Encodings, walk
from decode_doctor.engine import Context

REPEAT = 3  # each timing is the best of this many runs: a shared machine only ever adds time


def scan(root: Path) -> tuple[float, int, int]:
    best = float("inf")
    for _ in range(REPEAT):
        started = time.perf_counter()
        Encodings().run(Context(models=(root,)))
        best = min(best, time.perf_counter() - started)
    files = list(walk(root, lambda *a: None))
    return best, len(files), sum(f.target.stat().st_size for f in files)


def naive(root: Path) -> float:
    import chardet

    best = float("inf")
    for _ in range(REPEAT):
        started = time.perf_counter()
        for item in walk(root, lambda *a: None):
            chardet.detect(item.target.read_bytes())
        best = min(best, time.perf_counter() - started)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--copies", type=int, default=40, help="copies of the test corpus in the directory")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "model"
        for copy in range(args.copies):
            write_corpus(root / f"part{copy:03d}")
        Encodings().run(Context(models=(root / "part000",)))  # warm imports and caches
        elapsed, files, size = scan(root)
        print(
            f"configs only:        {files} files, {size / 1e6:.1f} MB in {elapsed:.2f} s → "
            f"{files / elapsed:,.0f} files/s, {size / 1e6 / elapsed:.1f} MB/s"
        )
        for i in range(4):
            with open(root / f"model-{i:05d}-of-00004.safetensors", "wb") as handle:
                handle.truncate(5 * 1024**3)
        elapsed_w, files_w, _ = scan(root)
        print(f"with 20 GB of weights: {files_w} files in {elapsed_w:.2f} s ({elapsed_w / elapsed:.2f}× the time without)")
        naive_s = naive(root)
        print(
            f"baseline, chardet.detect on each file (its default window, no strict decode, no parse or safety checks): "
            f"{naive_s:.2f} s → {files / naive_s:,.0f} files/s; decode-doctor takes {elapsed / naive_s:.1f}× its time"
        )


if __name__ == "__main__":
    main()
