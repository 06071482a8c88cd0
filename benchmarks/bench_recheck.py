"""The re-check after a fix judges what the fix touched, not the dataset: 5 broken images among
10,000 are quarantined, and the re-check's time and what it decoded are set beside the first check's.

    python benchmarks/bench_recheck.py [--count 10000] [--broken 5]

Prints the first check's time and images, the re-check's, their ratio, and the journal's record of
the re-check (the paths it judged, the images it decoded).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from support.harness import Recorder
from support.imagegen import encode, picture

from decode_doctor.app import fixing, service
from decode_doctor.app.requests import FixRequest, RunRequest


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=10_000)
    parser.add_argument("--broken", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="dd-bench-recheck-") as top:
        root = Path(top) / "ds"
        root.mkdir()
        good = encode(picture(32, 24), "JPEG")
        for number in range(args.count - args.broken):
            (root / f"{number:05d}.jpg").write_bytes(good)
        for number in range(args.broken):
            (root / f"broken-{number}.jpg").write_bytes(good[: len(good) // 2])
        started = time.perf_counter()
        outcome = service.run(RunRequest(images=(root,), select=("images",)))
        first = time.perf_counter() - started
        request = FixRequest(Path(top) / "state", yes=True)
        started = time.perf_counter()
        fixing.fix(outcome, request, Recorder())
        fixed = time.perf_counter() - started
        (run_dir,) = (Path(top) / "state" / "runs").iterdir()
        records = [json.loads(line) for line in (run_dir / "journal.jsonl").read_text().splitlines()]
        (recheck,) = [r for r in records if r["type"] == "recheck"]
    print(f"first check:     {first:7.2f} s, {args.count:,} images decoded")
    print(f"fix + re-check:  {fixed:7.2f} s ({fixed / first:.1%} of the first check)")
    print(f"re-check judged: {recheck['scope']} paths ({args.broken} quarantined files and where they went)")
    print(f"re-check images: {recheck['judged']['images'][0]}")


if __name__ == "__main__":
    main()
