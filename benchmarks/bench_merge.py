"""`merge` at fleet scale: N synthetic hosts' reports (one real `check --format json` report of a
fixture host, copied under N host names into small JSON files in a temporary directory), merged and
rendered as text and HTML; the time per size and its ratio to the 1,000-host run measured in the same
run (linear: 10,000 hosts ≈ 10× the 1,000 hosts' time). Untimed: a warm-up merge of 100 hosts first
(imports, the schema and the message catalogs load once, not inside the first size's time), and each
size's files flushed to disk (os.sync) before its merge, so the kernel writing back the benchmark's own
files does not land in the time of reading them. Each size is merged and rendered --repeat times (3) and
its fastest run kept: on a shared machine one 1,000-host run (a third of a second) varies by half.

    python benchmarks/bench_merge.py [--sizes 1000,10000,100000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from decode_doctor.app import compare

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "fixtures/hosts/swap60-rhel7"


def template() -> dict[str, Any]:
    """One real report: the swappiness and GPU checks of a fixture host (a warning and a skipped check)."""
    command = [sys.executable, "-m", "decode_doctor", "check", "--root", str(FIXTURE), "--select", "swappiness,gpu", "--format", "json"]
    found = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    return json.loads(found.stdout)


def write_reports(report: dict[str, Any], directory: Path, count: int) -> tuple[Path, ...]:
    paths = []
    for number in range(count):
        copy = {**report, "run": {**report["run"], "host": f"node-{number:06d}"}}
        path = directory / f"node-{number:06d}.json"
        path.write_text(json.dumps(copy))
        paths.append(path)
    return tuple(paths)


def timed(paths: tuple[Path, ...]) -> tuple[float, float, float]:
    """Seconds to merge (read every report), to render text, to render HTML."""
    began = time.perf_counter()
    merged = compare.merge(paths)
    merged_s = time.perf_counter() - began
    began = time.perf_counter()
    compare.render(merged, "text")
    text_s = time.perf_counter() - began
    began = time.perf_counter()
    compare.render(merged, "html")
    return merged_s, text_s, time.perf_counter() - began


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each size; the fastest is kept")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    report = template()
    with tempfile.TemporaryDirectory(prefix="bench-merge-") as tmp:
        timed(write_reports(report, Path(tmp), 100))  # the warm-up
    baseline: float | None = None
    print(f"{'hosts':>8} {'merge s':>9} {'text s':>8} {'html s':>8} {'total s':>8} {'× 1k':>7} {'per host ratio':>15}")
    for size in sizes:
        with tempfile.TemporaryDirectory(prefix="bench-merge-") as tmp:
            paths = write_reports(report, Path(tmp), size)
            if hasattr(os, "sync"):
                os.sync()
            merged_s, text_s, html_s = min((timed(paths) for _run in range(max(1, args.repeat))), key=sum)
        total = merged_s + text_s + html_s
        baseline = baseline if baseline is not None else total / size * 1000
        ratio = total / baseline
        print(f"{size:>8} {merged_s:>9.2f} {text_s:>8.2f} {html_s:>8.2f} {total:>8.2f} {ratio:>7.1f} {ratio / (size / 1000):>15.2f}")


if __name__ == "__main__":
    main()
