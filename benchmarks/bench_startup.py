"""Wall time of decode-doctor's start and of a whole check run, against a bare interpreter start.

    python benchmarks/bench_startup.py [--runs N]

Prints the median and spread of each, and the ratio to `python -c pass` measured in the same run
(these machines are noisy: compare ratios, not absolute figures).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
HOST = REPO / "fixtures" / "hosts" / "swap60-rhel7"

CASES = {
    "python -c pass (baseline)": [sys.executable, "-c", "pass"],
    "python -c 'import decode_doctor.cli.main'": [sys.executable, "-c", "import decode_doctor.cli.main"],
    "decode-doctor --help": [sys.executable, "-m", "decode_doctor", "--help"],
    "decode-doctor list": [sys.executable, "-m", "decode_doctor", "list"],
    "decode-doctor check --root fixture": [sys.executable, "-m", "decode_doctor", "check", "--root", str(HOST)],
    "decode-doctor check (this host)": [sys.executable, "-m", "decode_doctor", "check"],
}


def measure(argv: list[str], runs: int) -> list[float]:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        times.append(time.perf_counter() - started)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args()
    measure(CASES["python -c pass (baseline)"], 2)  # warm the page cache
    results = {name: measure(argv, args.runs) for name, argv in CASES.items()}
    baseline = statistics.median(results["python -c pass (baseline)"])
    print(f"{'case':<40} {'median':>9} {'min':>9} {'max':>9} {'× baseline':>11}")
    for name, times in results.items():
        median = statistics.median(times)
        print(f"{name:<40} {median * 1000:8.1f}ms {min(times) * 1000:8.1f}ms {max(times) * 1000:8.1f}ms {median / baseline:10.2f}×")


if __name__ == "__main__":
    main()
