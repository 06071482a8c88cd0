"""Every parser and reader against 10⁵ mutated inputs (tests/support/fuzzing.py's targets).

    python benchmarks/fuzz.py [--inputs 100000] [--only NAME] [--seed 0] [--no-cuts]

Per target: inputs/s, exceptions outside the parser's documented refusals (goal 0, the first few
printed with the input), the slowest input in ms per KB (goal: none above 100 ms/KB; inputs under
1 KB count as 1 KB), and this process's peak memory after the target. Targets whose seeds are real
captures also get each capture cut at every byte position (captures over 32 KB: every byte of their
first and last 4 KB and every line end between; counted in 'inputs'). Each input runs under a 10 s
alarm, so a hang is reported as one instead of stopping the run. Seeds run first, untimed (imports
and the chardet models load there).
"""

from __future__ import annotations

import argparse
import itertools
import resource
import signal
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.support import fuzzing

HANG_S = 10


class Hang(BaseException):
    """Raised by the alarm: not an Exception, so no parser's except clause swallows it."""


def _alarm(signum: int, frame: object) -> None:
    raise Hang


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--inputs", type=int, default=100_000)
    parser.add_argument("--only", default="")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-cuts", action="store_true", help="skip cutting each real capture at every byte")
    args = parser.parse_args()
    signal.signal(signal.SIGALRM, _alarm)
    total_errors = 0
    print(f"{'target':<38} {'inputs':>8} {'inputs/s':>9} {'errors':>6} {'slowest ms/KB':>13} {'peak RSS MiB':>12}")
    for target in fuzzing.targets():
        if args.only and args.only not in target.name:
            continue
        for seed in target.seeds:  # warm-up, untimed
            fuzzing.run_one(target, seed)
        errors: list[str] = []
        slowest = (0.0, b"")
        count = 0
        started = time.perf_counter()
        every_cut = fuzzing.cuts(target) if target.captures and not args.no_cuts else iter(())
        for data in itertools.chain(fuzzing.inputs(target, args.inputs, seed=args.seed), every_cut):
            count += 1
            begin = time.perf_counter()
            signal.setitimer(signal.ITIMER_REAL, HANG_S)
            try:
                exc = fuzzing.run_one(target, data)
            except Hang:
                exc = TimeoutError(f"no answer within {HANG_S} s")
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
            per_kb = (time.perf_counter() - begin) * 1000 / max(1.0, len(data) / 1024)
            if per_kb > slowest[0]:
                slowest = (per_kb, data)
            if exc is not None:
                errors.append(f"{fuzzing.describe(exc)} on {data[:120]!r}")
        elapsed = time.perf_counter() - started
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        total_errors += len(errors)
        print(f"{target.name:<38} {count:>8,} {count / elapsed:>9,.0f} {len(errors):>6} {slowest[0]:>13.2f} {peak:>12.0f}", flush=True)
        for line in errors[:3]:
            print(f"    {line}")
        if slowest[0] > 100:
            print(f"    slowest input ({len(slowest[1]):,} bytes): {slowest[1][:160]!r}")
    print(f"exceptions outside the documented refusals: {total_errors}")


if __name__ == "__main__":
    main()
