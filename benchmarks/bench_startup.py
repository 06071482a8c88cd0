"""Wall time of decode-doctor's start and of a whole check run, against a bare interpreter start.

    python benchmarks/bench_startup.py [--runs N]

Prints the median and spread of each (a fresh subprocess per run), its difference to `python -c pass`
and the ratio, measured in the same run (these machines are noisy: compare differences and ratios,
not absolute figures). The acceptance of issue 50 (a registry that knows before it imports): a run of
one selected check (`check --select swappiness --root <fixture>`) at most bare Python + 150 ms; it
imports that check's package only, the others are known from the registry's index (engine/index.py).
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
HOST = REPO / "fixtures" / "hosts" / "swap60-rhel7"
HEALTHY = REPO / "fixtures" / "hosts" / "healthy-server"
SCRIPT = Path(sys.executable).parent / "decode-doctor"  # the console script pip installs beside the interpreter
DD = [str(SCRIPT)] if SCRIPT.is_file() else [sys.executable, "-m", "decode_doctor"]
BUDGET_MS = 150.0  # a selected check's run: at most bare Python + this
SELECTED = "decode-doctor check --select swappiness"

# the same run with the registry built the old way (every check and fixer imported), for comparison
WITHOUT_INDEX = (
    "import decode_doctor.engine.index as index; index.indexed = lambda: None; from decode_doctor.cli.main import main; "
    f"main(['check', '--select', 'swappiness', '--root', {str(HEALTHY)!r}])"
)

CASES = {
    "python -c pass (baseline)": [sys.executable, "-c", "pass"],
    "python -c 'import decode_doctor.cli.main'": [sys.executable, "-c", "import decode_doctor.cli.main"],
    "decode-doctor --help": [*DD, "--help"],
    "decode-doctor check --help": [*DD, "check", "--help"],
    SELECTED: [*DD, "check", "--select", "swappiness", "--root", str(HEALTHY)],
    f"{SELECTED} (without the index)": [sys.executable, "-c", WITHOUT_INDEX],
    "decode-doctor list": [*DD, "list"],
    "decode-doctor check --root fixture": [*DD, "check", "--root", str(HOST)],
    "decode-doctor check (this host)": [*DD, "check"],
}


CPU: dict[str, list[float]] = {}  # case → the CPU seconds (user + system) of each of its runs


def measure(argv: list[str], runs: int, name: str = "") -> list[float]:
    """Wall seconds of each run; its CPU seconds go to CPU[name] (steadier than wall time on a busy machine)."""
    times = []
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        times.append(time.perf_counter() - started)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        CPU.setdefault(name, []).append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--quick", action="store_true", help="only the baseline, --help and the selected check's run")
    args = parser.parse_args()
    cases = {name: argv for name, argv in CASES.items() if not args.quick or name in QUICK}
    for argv in cases.values():
        measure(argv, 1)  # warm the page cache and the bytecode
    results: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(args.runs):  # round-robin: a busy spell of a shared machine falls on every case alike
        for name, argv in cases.items():
            results[name] += measure(argv, 1, name)
    bare = "python -c pass (baseline)"
    baseline, cpu_baseline = statistics.median(results[bare]), statistics.median(CPU[bare])
    width = max(len(name) for name in results)
    print(f"{'case':<{width}} {'median':>9} {'min':>9} {'max':>9} {'- baseline':>11} {'× baseline':>11} {'CPU':>9} {'- baseline':>11}")
    for name, times in results.items():
        median, cpu = statistics.median(times), statistics.median(CPU[name])
        spread = f"{median * 1000:8.1f}ms {min(times) * 1000:8.1f}ms {max(times) * 1000:8.1f}ms"
        versus = f"{(median - baseline) * 1000:+9.1f}ms {median / baseline:10.2f}×"
        print(f"{name:<{width}} {spread} {versus} {cpu * 1000:7.1f}ms {(cpu - cpu_baseline) * 1000:+9.1f}ms")
    over = (statistics.median(results[SELECTED]) - baseline) * 1000
    verdict = "within" if over <= BUDGET_MS else "OVER"
    print(f"{SELECTED}: bare Python + {over:.0f} ms wall ({verdict} the budget of + {BUDGET_MS:.0f} ms)")


QUICK = ("python -c pass (baseline)", "decode-doctor --help", SELECTED, f"{SELECTED} (without the index)")


if __name__ == "__main__":
    main()
