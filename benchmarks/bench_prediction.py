"""estimate's calibrated decode prediction against llama.cpp's measured decode, row by row.

    python benchmarks/bench_prediction.py [--sizes 0.2,0.5,1,1.5,3] [--types F16,Q8_0,Q4_0]
        [--threads 1,2] [--depths 0,2048] [--tokens 32] [--repeat 1] [--scratch DIR] [--quick]

For each thread count and weight type it calibrates this host (calibration.calibrate: two small
random-weight GGUFs, about 10 s; again, up to three times, while it ran contended, since estimate
never reuses such a calibration) and measures the memory bandwidth (the bandwidth check's probe);
then it writes random-weight Llama GGUFs of each size (GB, grouped-query attention, vocabulary
32,000), decodes each with llama-cpp-python at each depth (the prompt evaluated first, then
--tokens single-token steps timed, in a child process), and prints for every row: llama.cpp's
median time per token, the prediction (calibration.predict, bounded by the ceiling as estimate
bounds it), its error, and the bandwidth ceiling; then the error distribution (rows within ±15 %
and ±25 %, the largest error), the rows where the measurement beat the ceiling, and the conditions
(host, engine, bandwidth, other processes' load over each run). The bandwidth is measured with a
buffer of 8× the last-level cache (up to 4 GiB), as `check --thorough` does. --quick: sizes 0.05 and
0.1 GB, depth 0 and 256, 8 tokens: the dry run CI executes (its models fit in a cache, so its
figures say nothing).

--repeat N measures every row N times, in N passes over the rows (minutes apart, so the host's drift
shows), predicting each from the same calibration; it then prints how far llama.cpp's own
measurements of one row lie apart: a prediction cannot be judged more finely than its reference
repeats on the host.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from decode_doctor.checks.bandwidth.membw import buffer_size, llc_bytes, measure_cpu
from decode_doctor.checks.models import calibration
from decode_doctor.checks.models.bwcache import host_id
from decode_doctor.checks.models.randomgguf import Shape, write

CALIBRATION_TRIES = 3
BYTES_PER_PARAM = {"F16": 2.0, "Q8_0": 34 / 32, "Q4_0": 18 / 32}
HIDDEN = (512, 768, 1024, 1536, 2048, 2560, 3072, 4096)


def shape_for(size_gb: float, weight_type: str) -> Shape:
    """A Llama shape whose file is about size_gb: the widest hidden size that still gets 4 layers."""
    params = size_gb * 1e9 / BYTES_PER_PARAM[weight_type]
    vocab = 32_000
    for hidden in reversed(HIDDEN):
        per_layer = 10.75 * hidden * hidden  # q, o; k, v at a quarter; three FFN matrices at 2.75×
        layers = round((params - 2 * vocab * hidden) / per_layer)
        if layers >= 4:
            return Shape(hidden, layers, int(2.75 * hidden) // 64 * 64, hidden // 64, hidden // 256, vocab)
    return Shape(512, 2, 1408, 8, 2, 8000)


def _read(path: str) -> str | None:
    try:
        return Path(path).read_text()
    except OSError:
        return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="0.2,0.5,1,1.5,3")
    parser.add_argument("--types", default="F16,Q8_0,Q4_0")
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--depths", default="0,2048")
    parser.add_argument("--tokens", type=int, default=32)
    parser.add_argument("--repeat", type=int, default=1, help="passes over the rows (the reference's repeatability)")
    parser.add_argument("--scratch", type=Path, default=None, help="where the models are written (a few GB)")
    parser.add_argument("--quick", action="store_true", help="tiny sizes, short depths: the dry run")
    args = parser.parse_args()
    if args.quick:
        args.sizes, args.depths, args.tokens = "0.05,0.1", "0,256", 8
    sizes = [float(s) for s in args.sizes.split(",")]
    types = args.types.split(",")
    threads_list = [int(t) for t in args.threads.split(",")]
    depths = [int(d) for d in args.depths.split(",")]
    engine = calibration.engine_version()
    if engine is None:
        sys.exit("llama-cpp-python is not installed (pip install 'decode-doctor[calibrate]')")
    print(f"host {host_id()}, llama-cpp-python {engine}, {time.strftime('%Y-%m-%d %H:%M %Z')}")
    # weight type, GB, depth, threads, measured, predicted, error, ceiling
    rows: list[tuple[str, float, int, int, float, float, float, float]] = []
    repeats: dict[tuple[str, float, int, int], list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="dd-prediction-", dir=args.scratch) as folder:
        state = Path(folder) / "state"
        for threads in threads_list:
            bandwidth = measure_cpu(buffer_size(llc_bytes(_read), None, thorough=True), budget_s=3.0, threads=threads)
            print(f"\n{threads} thread(s): bandwidth {bandwidth.read_gbps:.1f} GB/s (other processes {bandwidth.foreign_cores:.2f} cores)")
            for weight_type in types:
                cal = calibration.calibrate(threads, weight_type, state)
                for _ in range(CALIBRATION_TRIES - 1):
                    if not cal.contended:
                        break  # estimate never reuses a contended calibration: neither does this benchmark
                    print(f"  {cal.describe()}: calibrating again")
                    cal = calibration.calibrate(threads, weight_type, state)
                print(f"  {cal.describe()}")
                for repeat in range(args.repeat):
                    if args.repeat > 1:
                        print(f"    pass {repeat + 1} of {args.repeat}")
                    for size_gb in sizes:
                        path = Path(folder) / f"{weight_type}-{size_gb}.gguf"
                        if not path.exists():
                            write(path, shape_for(size_gb, weight_type), weight_type)
                        for depth in depths:
                            row = _row(path, weight_type, threads, depth, args.tokens, cal, bandwidth.read_gbps)
                            rows.append(row)
                            repeats.setdefault((weight_type, size_gb, depth, threads), []).append(row[4])
                if threads == threads_list[-1]:
                    for path in Path(folder).glob(f"{weight_type}-*.gguf"):
                        path.unlink()  # the last thread count done with them: a few GB back
    errors = [abs(row[6]) for row in rows]
    beaten = [row for row in rows if row[4] < row[7]]
    within = {limit: sum(e <= limit for e in errors) for limit in (0.15, 0.25)}
    print(
        f"\n{len(rows)} rows: within ±15 % {within[0.15]} ({within[0.15] / len(rows):.0%}), within ±25 % {within[0.25]} "
        f"({within[0.25] / len(rows):.0%}); median |error| {statistics.median(errors):.1%}, largest {max(errors):.1%}; "
        f"the ceiling beaten in {len(beaten)} row(s)"
    )
    if args.repeat > 1:
        _print_repeatability(repeats)


def _row(
    path: Path, weight_type: str, threads: int, depth: int, tokens: int, cal: calibration.Calibration, bandwidth_gbps: float
) -> tuple[str, float, int, int, float, float, float, float]:
    weights, units, kv = calibration.features(path, depth)
    run = calibration.time_decode(path, threads, depth, tokens, timeout_s=900)
    ceiling = (weights + kv) / (bandwidth_gbps * 1e9)
    predicted = calibration.bounded(calibration.predict(cal, weights, units, kv, depth), ceiling)
    error = predicted.tpot_s / run.seconds - 1
    gb = path.stat().st_size / 1e9
    print(
        f"    {weight_type:<5} {gb:5.2f} GB  T={threads}  depth {depth:>5}: "
        f"llama.cpp {run.seconds * 1e3:7.2f} ms  predicted {predicted.tpot_s * 1e3:7.2f} ms  error {error:+6.1%}  "
        f"ceiling {ceiling * 1e3:6.2f} ms (measured ÷ ceiling {ceiling / run.seconds:.2f})  "
        f"other processes {run.foreign_cores:.2f} cores, steal {run.steal:.0%}"
    )
    return weight_type, gb, depth, threads, run.seconds, predicted.tpot_s, error, ceiling


def _print_repeatability(repeats: dict[tuple[str, float, int, int], list[float]]) -> None:
    """How far llama.cpp's measurements of one row lie apart: each pass against the row's first."""
    apart = [abs(later / times[0] - 1) for times in repeats.values() for later in times[1:]]
    spread = [max(times) / min(times) - 1 for times in repeats.values()]
    over = sum(a > 0.15 for a in apart)
    print(
        f"the reference's repeatability over {len(repeats)} rows: a later pass differs from the first by more than 15 % "
        f"in {over} of {len(apart)} ({over / len(apart):.0%}); median {statistics.median(apart):.1%}, largest {max(apart):.1%}; "
        f"slowest ÷ fastest of a row − 1: median {statistics.median(spread):.1%}, largest {max(spread):.1%}"
    )


if __name__ == "__main__":
    main()
