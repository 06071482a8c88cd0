"""--verify-hashes throughput: decode-doctor's sha256 of a model file against `sha256sum` on the same file.

    python benchmarks/bench_hashes.py [--size-mib 1024] [--rounds 3]

The file is written with real (random) bytes, not sparse, and read once before timing so both
readers see it in the page cache: the figure compares hashing, not the disk. Prints MB/s of each
and their ratio per round (goal: at least 0.9).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from decode_doctor.models.layout import HashProgress, digest


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--size-mib", type=int, default=1024)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    if shutil.which("sha256sum") is None:
        raise SystemExit("sha256sum is not installed")
    with tempfile.TemporaryDirectory(prefix="dd-bench-hashes-") as tmp:
        path = Path(tmp) / "model-00001-of-00001.safetensors"
        block = os.urandom(1 << 20)
        with open(path, "wb") as handle:
            for _ in range(args.size_mib):
                handle.write(block)
        size = path.stat().st_size
        expected = subprocess.run(["sha256sum", str(path)], capture_output=True, text=True, check=True).stdout.split()[0]
        print(f"file: {size / 1e9:.2f} GB of random bytes, in the page cache")
        for round_no in range(1, args.rounds + 1):
            started = time.perf_counter()
            ours = digest(path, "sha256", HashProgress(size, lambda text: None))
            ours_s = time.perf_counter() - started
            started = time.perf_counter()
            theirs = subprocess.run(["sha256sum", str(path)], capture_output=True, text=True, check=True).stdout.split()[0]
            theirs_s = time.perf_counter() - started
            assert ours == theirs == expected
            print(
                f"round {round_no}: decode-doctor {size / ours_s / 1e6:7.0f} MB/s, sha256sum {size / theirs_s / 1e6:7.0f} MB/s, "
                f"ratio {theirs_s / ours_s:.2f}× (hashlib {hashlib.sha256().name}, OpenSSL)"
            )


if __name__ == "__main__":
    main()
