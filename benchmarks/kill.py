"""SIGKILL at random moments: the state files and the fixes must lose nothing whenever a process dies.

    python benchmarks/kill.py [--kills 400] [--seed 0]

Two harnesses, each killing a forked child after a random delay (0 to 20 ms, where the writes are):
- state files: a child appends calibration records (statefile.append_record) and quiet bandwidth
  figures (quiet.store_quiet) in a loop; after each kill the files must read clean (no record ignored,
  no temporary file left), hold at least the records they held before the kill, and every file the
  writer kept aside must still be there;
- fixes: `check --select encodings --fix --yes` on a model with GBK configs, killed at a random moment,
  then `undo`: every file byte-identical to the original, no temporary file left.
Prints the kills made, where the fix kills landed (before any file was converted, between, after),
and the failures (goal 0).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from decode_doctor.checks.bandwidth.contract import BandwidthFacts, CpuBandwidth, CpuMemory
from decode_doctor.checks.bandwidth.quiet import QuietFigure, load_quiet, store_quiet
from decode_doctor.engine.statefile import append_record, read_state
from decode_doctor.models.calibration import CACHE_NAME, Calibration

ZH = "这是一个大型语言模型的配置文件，请勿修改。模型支持中文和英文对话。"


def _calibration(number: int) -> Calibration:
    return Calibration("h/cpu", "llama.cpp", "0.3.36", 2, "F16", 1e-4, 3e-11, 1e-12, 1e-11, 0.05, time.time() - number)


def _figure(number: int) -> QuietFigure:
    measured = CpuBandwidth(40.0 + number % 7, 30.0, 0.01, 0.01, 2, 1 << 28, 3, 1.0, 0.0)
    return QuietFigure(time.time() - number, "h/cpu/64 GiB", BandwidthFacts(CpuMemory(measured, None, 2, None, "this host")))


def _writer(state: Path) -> None:
    number = 0
    while True:
        number += 1
        append_record(state / CACHE_NAME, _calibration(number), Calibration, 64)
        store_quiet(_figure(number), state)


def state_files(kills: int, rng: random.Random) -> tuple[int, list[str]]:
    failures: list[str] = []
    with tempfile.TemporaryDirectory(prefix="dd-kill-state-") as folder:
        state = Path(folder)
        before_calibrations = before_figures = 0
        for kill in range(kills):
            pid = os.fork()
            if pid == 0:
                try:
                    _writer(state)
                finally:
                    os._exit(0)
            time.sleep(rng.uniform(0.0, 0.02))
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            calibrations = read_state(state / CACHE_NAME, Calibration)
            figures = load_quiet(state)
            leftovers = [p.name for p in state.iterdir() if p.name.endswith(".dd-tmp")]
            for leftover in leftovers:
                (state / leftover).unlink()  # a temporary file of a killed write: never read, removed here
            if not calibrations.clean or figures.ignored or figures.unusable:
                failures.append(f"kill {kill}: {[str(w) for w in (*calibrations.ignored, *figures.ignored)]}")
            if len(calibrations.records) < min(before_calibrations, 64) or len(figures.figures) < min(before_figures, 32):
                failures.append(f"kill {kill}: records lost ({len(calibrations.records)} < {before_calibrations})")
            before_calibrations, before_figures = len(calibrations.records), len(figures.figures)
    return kills, failures


def fixes(kills: int, rng: random.Random) -> tuple[int, list[str]]:
    failures: list[str] = []
    landed = [0, 0, 0]  # killed before any file was converted, with some converted, after all were
    with tempfile.TemporaryDirectory(prefix="dd-kill-fix-") as folder:
        for kill in range(kills):
            model = Path(folder) / f"m{kill}"
            model.mkdir()
            originals = {}
            for number in range(6):
                data = json.dumps({"n": number, "d": ZH}, ensure_ascii=False).encode("gbk")
                (model / f"f{number}.json").write_bytes(data)
                originals[f"f{number}.json"] = data
            state = Path(folder) / f"s{kill}"
            argv = [sys.executable, "-m", "decode_doctor", "check", "--select", "encodings", "--model", str(model)]
            child = subprocess.Popen(
                [*argv, "--fix", "--yes", "--state-dir", str(state)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
            )
            time.sleep(rng.uniform(0.2, 1.2))  # the interpreter starts, the check runs, then the writes
            child.kill()
            child.wait()
            converted = sum(1 for name, data in originals.items() if (model / name).read_bytes() != data)
            landed[min(converted, 1) + (converted == len(originals))] += 1
            undo = subprocess.run(
                [sys.executable, "-m", "decode_doctor", "undo", "--state-dir", str(state)], capture_output=True, text=True
            )
            found = {p.name: p.read_bytes() for p in model.iterdir()}
            if found != originals:
                extra = sorted(set(found) - set(originals))
                changed = sorted(n for n in originals if found.get(n) != originals[n])
                failures.append(f"kill {kill}: changed {changed}, left {extra}; undo said {undo.stdout.strip()[-200:]}")
    print(f"fixes: killed before any conversion {landed[0]}, with some files converted {landed[1]}, after all {landed[2]}")
    return kills, failures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=400)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    total = 0
    for name, harness, kills in (("state files", state_files, args.kills), ("fixes", fixes, max(1, args.kills // 10))):
        started = time.monotonic()
        made, failures = harness(kills, rng)
        total += len(failures)
        print(f"{name:<12} {made:>6} kills  {len(failures)} failures  {time.monotonic() - started:.0f} s", flush=True)
        for failure in failures[:5]:
            print(f"    {failure}")
    sys.exit(1 if total else 0)


if __name__ == "__main__":
    main()
