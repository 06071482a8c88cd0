"""estimate's calibrated decode prediction against llama.cpp's measured decode, row by row: the point
error, and whether the measurement falls inside the interval the prediction states.

    python benchmarks/bench_prediction.py [--sizes 0.2,0.5,1,1.5,3] [--types F16,Q8_0,Q4_0]
        [--threads 1,2] [--depths 0,2048] [--tokens 32] [--repeat 2] [--scratch DIR] [--quick]

For each thread count and weight type it calibrates this host as `estimate --calibrate` does for the
largest size (calibration.calibrate: two small random-weight GGUFs and a third near the largest size,
up to 1.5 GB, each decoded in passes until two agree; a calibration beside other work is kept and its
interval widened, as estimate keeps it), then writes random-weight Llama GGUFs of each size (GB,
grouped-query attention, vocabulary 32,000) and decodes each with llama-cpp-python at each depth (the
prompt evaluated first, then at least --tokens and at least half a second of single-token steps, each
at that depth, in a child process: calibration.time_decode, the calibration's own timer). A llama.cpp
that crashes on the batched prompt (its AMX kernel, ENG001) is measured with the prompt fed one token
at a time, as the calibration does.

The memory bandwidth (the bandwidth check's probe, a buffer of 8× the last-level cache up to 4 GiB, as
`check --thorough`) is measured in a window before each weight type and once more at the end; the
ceiling is the best quiet window's (a slow first minute would make a ceiling the rows beat).

For every row it prints llama.cpp's median time per token, the prediction (calibration.predict,
bounded by the ceiling as estimate bounds it) with its interval, the error, whether the measurement
is inside the interval, and the ceiling; then, over all rows and per thread count: the rows within
±15 % and ±25 %, the interval's coverage (how often the measurement fell inside), the median and
largest error, and the rows that beat the ceiling. --repeat N (default 2) measures every row N times,
in N passes minutes apart, and prints the reference's own repeatability: how far llama.cpp's passes of
one row lie apart. ±15 % is only decidable on rows whose passes agree within 15 %; the script prints
the ±15 % share over those rows too. --quick: sizes 0.05 and 0.1 GB, depth 0 and 256, 8 tokens, one
type and thread count: a dry run of the script (its models fit in a cache, so its figures
say nothing).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from decode_doctor.checks.bandwidth.contract import CpuBandwidth
from decode_doctor.checks.bandwidth.membw import buffer_size, llc_bytes, measure_cpu
from decode_doctor.engine.statefile import host_id
from decode_doctor.models import calibration
from decode_doctor.models.randomgguf import shape_for, write

GAP = 0.15


def _read(path: str) -> str | None:
    try:
        return Path(path).read_text()
    except OSError:
        return None


@dataclass
class Measured:
    weight_type: str
    gb: float
    depth: int
    threads: int
    weights: float
    units: float
    kv: float
    runs: list[calibration.Run] = field(default_factory=list)


@dataclass(frozen=True)
class Row:
    measured: Measured
    seconds: float  # this pass's llama.cpp median
    predicted: calibration.Prediction
    ceiling_s: float

    @property
    def error(self) -> float:
        return self.predicted.tpot_s / self.seconds - 1

    @property
    def inside(self) -> bool:
        return self.predicted.low_s <= self.seconds <= self.predicted.high_s


def bandwidth_window(threads: int) -> CpuBandwidth:
    return measure_cpu(buffer_size(llc_bytes(_read), None, thorough=True), budget_s=3.0, threads=threads)


def best_window(windows: list[CpuBandwidth]) -> tuple[CpuBandwidth, bool]:
    """The fastest quiet window (True), else the fastest of all (False: every window was contended)."""
    quiet = [w for w in windows if not w.contended]
    return (max(quiet, key=lambda w: w.read_gbps), True) if quiet else (max(windows, key=lambda w: w.read_gbps), False)


def decode(path: Path, threads: int, depth: int, tokens: int, crashed: dict[str, str]) -> calibration.Run:
    """time_decode, with the prompt fed one token at a time once a batched prompt crashed llama.cpp."""
    prompt = "one-token" if crashed.get("prompt") else "batched"
    try:
        return calibration.time_decode(path, threads, depth, tokens, timeout_s=1800, prompt=prompt if depth else "batched")
    except calibration.EngineCrash as crash:
        if not crash.in_batched_prompt or prompt != "batched":
            raise
        crashed["prompt"] = crash.describe()
        print(f"    {crash.describe()}: the prompt fed one token at a time from here on")
        return calibration.time_decode(path, threads, depth, tokens, timeout_s=1800, prompt="one-token")


def _rows(
    folder: Path, weight_type: str, threads: int, sizes: list[float], depths: list[int], repeat: int, tokens: int, crashed: dict[str, str]
) -> dict[tuple[float, int], Measured]:
    """llama.cpp's decode measured over every size and depth of one weight type, in passes."""
    rows = {}
    for size_gb in sizes:
        path = folder / f"{weight_type}-{size_gb}.gguf"
        if not path.exists():
            write(path, shape_for(size_gb, weight_type), weight_type)
        for depth in depths:
            weights, units, kv = calibration.features(path, depth)
            rows[(size_gb, depth)] = Measured(weight_type, path.stat().st_size / 1e9, depth, threads, weights, units, kv)
    for done in range(repeat):
        print(f"  pass {done + 1} of {repeat}", flush=True)
        for (size_gb, depth), row in rows.items():
            path = folder / f"{weight_type}-{size_gb}.gguf"
            run = decode(path, threads, depth, tokens, crashed)
            row.runs.append(run)
            print(
                f"    {weight_type:<5} {row.gb:5.2f} GB depth {depth:>5}: llama.cpp {run.seconds * 1e3:8.2f} ms "
                f"(other processes {run.foreign_cores:.2f} cores, steal {run.steal:.1%})",
                flush=True,
            )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="0.2,0.5,1,1.5,3")
    parser.add_argument("--types", default="F16,Q8_0,Q4_0")
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--depths", default="0,2048")
    parser.add_argument("--tokens", type=int, default=32)
    parser.add_argument("--repeat", type=int, default=2, help="passes over the rows (the reference's repeatability)")
    parser.add_argument("--scratch", type=Path, default=None, help="where the models are written (a few GB)")
    parser.add_argument("--quick", action="store_true", help="tiny sizes, short depths: the dry run")
    args = parser.parse_args()
    if args.quick:
        args.sizes, args.depths, args.tokens, args.types, args.threads = "0.05,0.1", "0,256", 8, "F16", "1"
    sizes = [float(s) for s in args.sizes.split(",")]
    types = args.types.split(",")
    threads_list = [int(t) for t in args.threads.split(",")]
    depths = [int(d) for d in args.depths.split(",")]
    engine = calibration.engine_version()
    if engine is None:
        sys.exit("llama-cpp-python is not installed (pip install 'decode-doctor[calibrate]')")
    started = time.time()
    print(f"host {host_id()}, llama-cpp-python {engine}, {time.strftime('%Y-%m-%d %H:%M %Z')}", flush=True)
    measured: list[Measured] = []
    calibrations: dict[tuple[int, str], calibration.Calibration] = {}
    windows: dict[int, list[CpuBandwidth]] = {}
    crashed: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="dd-prediction-", dir=args.scratch) as folder:
        state = Path(folder) / "state"
        for threads in threads_list:
            for weight_type in types:
                window = bandwidth_window(threads)
                windows.setdefault(threads, []).append(window)
                print(
                    f"\n{threads} thread(s), {weight_type}: bandwidth window {window.read_gbps:.1f} GB/s "
                    f"(other processes {window.foreign_cores:.2f} cores, steal {window.steal:.1%})",
                    flush=True,
                )
                cal = calibration.calibrate(threads, weight_type, state, lambda line: print(f"  {line}", flush=True),
                                            scratch=args.scratch, target_bytes=max(sizes) * 1e9)  # fmt: skip
                calibrations[(threads, weight_type)] = cal
                if cal.crash:
                    crashed["prompt"] = cal.crash
                rows = _rows(Path(folder), weight_type, threads, sizes, depths, args.repeat, args.tokens, crashed)
                measured.extend(rows.values())
                if threads == threads_list[-1]:
                    for path in Path(folder).glob(f"{weight_type}-*.gguf"):
                        path.unlink()  # the last thread count done with them: a few GB back
        for threads in threads_list:
            windows[threads].append(bandwidth_window(threads))
        again: dict[tuple[int, str], calibration.Calibration] = {}
        if args.repeat > 1:
            print("\nthe calibrations again, after the rows (the host's repeatability over the run):", flush=True)
            for (threads, weight_type), first in calibrations.items():
                again[(threads, weight_type)] = calibration.calibrate(
                    threads, weight_type, state, scratch=args.scratch, target_bytes=max(sizes) * 1e9
                )
                minutes = (again[(threads, weight_type)].measured_at - first.measured_at) / 60
                print(f"  {again[(threads, weight_type)].describe()} ({minutes:.0f} min after the first)", flush=True)
    report(measured, calibrations, windows, args.repeat, crashed, again)
    print(f"\n{(time.time() - started) / 60:.0f} min in all")


def report(
    measured: list[Measured],
    calibrations: dict[tuple[int, str], calibration.Calibration],
    windows: dict[int, list[CpuBandwidth]],
    repeat: int,
    crashed: dict[str, str],
    again: dict[tuple[int, str], calibration.Calibration],
) -> None:
    ceilings = {threads: best_window(found) for threads, found in windows.items()}
    print("\nceilings from the best quiet bandwidth window of each thread count:")
    for threads, (window, quiet) in ceilings.items():
        every = ", ".join(f"{w.read_gbps:.1f}{'' if not w.contended else '*'}" for w in windows[threads])
        print(f"  {threads} thread(s): {window.read_gbps:.1f} GB/s{'' if quiet else ' (every window contended)'} of {every} (* contended)")
    print("\ncalibrations:")
    for cal in calibrations.values():
        print(f"  {cal.describe()}; ±{cal.spread:.1%} at the widest ({cal.interval_text()})")
    if crashed.get("prompt"):
        print(f"  crash: {crashed['prompt']}")
    rows: list[Row] = []
    print("\nrows (measured, predicted with its interval, error, inside the interval, ceiling):")
    for item in measured:
        cal = calibrations[(item.threads, item.weight_type)]
        bandwidth = ceilings[item.threads][0].read_gbps
        ceiling = (item.weights + item.kv) / (bandwidth * 1e9)
        predicted = calibration.bounded(calibration.predict(cal, item.weights, item.units, item.kv, item.depth), ceiling)
        for number, run in enumerate(item.runs, 1):
            row = Row(item, run.seconds, predicted, ceiling)
            rows.append(row)
            print(
                f"  {item.weight_type:<5} {item.gb:5.2f} GB T={item.threads} depth {item.depth:>5} pass {number}: "
                f"llama.cpp {run.seconds * 1e3:8.2f} ms  predicted {predicted.tpot_s * 1e3:8.2f} ms "
                f"({predicted.low_s * 1e3:.2f}–{predicted.high_s * 1e3:.2f})  error {row.error:+6.1%}  "
                f"{'inside' if row.inside else 'OUTSIDE'}  ceiling {ceiling * 1e3:7.2f} ms "
                f"(ceiling ÷ measured {ceiling / run.seconds:.2f}){'  BOUNDED' if predicted.bounded else ''}"
            )
    _summary("all rows", rows)
    for threads in sorted({row.measured.threads for row in rows}):
        _summary(f"{threads} thread(s)", [row for row in rows if row.measured.threads == threads])
    if repeat > 1:
        _repeatability(measured, rows, calibrations, again, ceilings)


def _summary(label: str, rows: list[Row]) -> None:
    if not rows:
        return
    errors = [abs(row.error) for row in rows]
    within = {limit: sum(e <= limit for e in errors) for limit in (GAP, 0.25)}
    inside = sum(row.inside for row in rows)
    beaten = sum(row.seconds < row.ceiling_s for row in rows)
    print(
        f"\n{label}: {len(rows)} rows, a prediction for each; within ±15 % {within[GAP]} ({within[GAP] / len(rows):.0%}), "
        f"within ±25 % {within[0.25]} ({within[0.25] / len(rows):.0%}); median |error| {statistics.median(errors):.1%}, "
        f"largest {max(errors):.1%}; the interval held the measurement in {inside} ({inside / len(rows):.0%}); "
        f"the ceiling beaten in {beaten} row(s)"
    )


def _repeatability(
    measured: list[Measured],
    rows: list[Row],
    calibrations: dict[tuple[int, str], calibration.Calibration],
    again: dict[tuple[int, str], calibration.Calibration],
    ceilings: dict[int, tuple[CpuBandwidth, bool]],
) -> None:
    """How far the host repeats itself: llama.cpp's own passes of one row, and the calibration taken
    again after the rows; ±15 % is decidable on a row whose passes agree within 15 % and whose two
    calibrations predict it within 15 % of each other. Then the second calibrations' intervals, which
    know the host's drift (calibration.with_drift), against the same measurements."""
    apart = {id(item): max(r.seconds for r in item.runs) / min(r.seconds for r in item.runs) - 1 for item in measured if item.runs}
    values = list(apart.values())
    print(
        f"\nthe reference's repeatability over {len(values)} rows: slowest ÷ fastest pass − 1: median {statistics.median(values):.1%}, "
        f"largest {max(values):.1%}; {sum(v <= GAP for v in values)} rows repeat within 15 %"
    )
    second: dict[int, calibration.Prediction] = {}
    moved: dict[int, float] = {}
    for item in measured:
        later = again.get((item.threads, item.weight_type))
        if later is None:
            continue
        ceiling = (item.weights + item.kv) / (ceilings[item.threads][0].read_gbps * 1e9)
        second[id(item)] = calibration.bounded(calibration.predict(later, item.weights, item.units, item.kv, item.depth), ceiling)
        first = calibration.predict(calibrations[(item.threads, item.weight_type)], item.weights, item.units, item.kv, item.depth)
        moved[id(item)] = abs(calibration.predict(later, item.weights, item.units, item.kv, item.depth).tpot_s / first.tpot_s - 1)
    for threads in sorted({item.threads for item in measured}):
        drift = [moved[id(item)] for item in measured if item.threads == threads and id(item) in moved]
        if drift:
            print(
                f"{threads} thread(s): the second calibration predicts the rows {statistics.median(drift):.1%} (median) and "
                f"{max(drift):.1%} (largest) away from the first"
            )
    decidable = [row for row in rows if apart[id(row.measured)] <= GAP and moved.get(id(row.measured), 0.0) <= GAP]
    for threads in [None, *sorted({row.measured.threads for row in rows})]:
        chosen = [row for row in decidable if threads is None or row.measured.threads == threads]
        label = "all" if threads is None else f"{threads} thread(s)"
        total = sum(1 for row in rows if threads is None or row.measured.threads == threads)
        if not chosen:
            print(f"{label}: no row is decidable at ±15 % on this host (its passes or its calibrations differ by more)")
            continue
        within = sum(abs(row.error) <= GAP for row in chosen)
        held = sum(row.inside for row in chosen)
        print(
            f"{label}: decidable at ±15 % on {len(chosen)} of {total} measurements; within ±15 % {within} "
            f"({within / len(chosen):.0%}); the interval held {held} ({held / len(chosen):.0%})"
        )
    if second:
        for threads in [None, *sorted({row.measured.threads for row in rows})]:
            chosen = [row for row in rows if (threads is None or row.measured.threads == threads) and id(row.measured) in second]
            held = sum(second[id(row.measured)].low_s <= row.seconds <= second[id(row.measured)].high_s for row in chosen)
            label = "all" if threads is None else f"{threads} thread(s)"
            share = held / len(chosen)
            print(f"{label}: the second calibration's interval (with the host's drift) held {held} of {len(chosen)} ({share:.0%})")


if __name__ == "__main__":
    main()
