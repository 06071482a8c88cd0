"""Image scan throughput: decode-doctor's parallel strict decoding against a single-process Pillow
open()+load() loop over the same files, measured in the same run.

    python benchmarks/bench_images.py [--count 600] [--size 640x480]

Goal: at least 1.8× the Pillow loop on two cores, while also catching libjpeg's warnings
(which the Pillow loop does not); the workers' peak memory is printed beside it.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from PIL import Image
from support.imagegen import encode, picture

from decode_doctor.checks.images.check import Images
from decode_doctor.engine import Context
from decode_doctor.engine.workers import usable_cpus


def pillow_loop(paths: list[Path]) -> float:
    started = time.perf_counter()
    for path in paths:
        with Image.open(path) as image:
            image.load()
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=600)
    parser.add_argument("--size", default="640x480")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    width, height = (int(v) for v in args.size.split("x"))
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "dataset"
        paths = []
        for i in range(args.count):
            path = root / f"{i // 100:03d}" / f"{i:06d}.jpg"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(encode(picture(width, height, seed=i), "JPEG", quality=90))
            paths.append(path)
        pillow_loop(paths[:50])
        print(f"{args.count} JPEGs of {width}×{height}, {sum(p.stat().st_size for p in paths) / 1e6:.1f} MB, {usable_cpus()} CPUs")
        ratios = []
        for round_no in range(1, args.rounds + 1):
            baseline = pillow_loop(paths)
            started = time.perf_counter()
            ctx = Context(images=(root,))
            findings = Images().run(ctx)
            ours = time.perf_counter() - started
            peak = max(scan.peak_worker_rss_mib for scan in ctx.published.datasets)
            assert not [f for f in findings if f.severity.value != "info"], findings[:3]
            ratios.append(baseline / ours)
            print(
                f"round {round_no}: Pillow open()+load() loop {args.count / baseline:6.0f} files/s; "
                f"decode-doctor {args.count / ours:6.0f} files/s; ratio {baseline / ours:.2f}×; peak {peak:.0f} MiB per worker"
            )
        print(f"best ratio {max(ratios):.2f}×, median {sorted(ratios)[len(ratios) // 2]:.2f}×")


if __name__ == "__main__":
    main()
