"""The CPU bandwidth probe against a C STREAM-style read kernel measured in the same run.

    python benchmarks/bench_bandwidth.py [--rounds 5] [--thorough]

Prints the probe's read and copy GB/s, its wall time and spread, and (where a C compiler with
OpenMP is available) the ratio of the probe's read figure to the C kernel's over the same buffer
size and thread count, interleaving the two so that machine noise hits both alike.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from decode_doctor.checks.bandwidth.membw import buffer_size, llc_bytes, measure_cpu
from decode_doctor.engine.workers import usable_cpus

HERE = Path(__file__).resolve().parent


def read_sysfs(path: str) -> str | None:
    try:
        return Path(path).read_text()
    except OSError:
        return None


def build_kernel(workdir: Path) -> Path | None:
    compiler = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")
    if not compiler:
        return None
    binary = workdir / "stream_read"
    proc = subprocess.run(
        [compiler, "-O3", "-march=native", "-fopenmp", str(HERE / "stream_read.c"), "-o", str(binary)], capture_output=True, text=True
    )
    if proc.returncode != 0:
        print(f"C kernel not built: {proc.stderr.strip()[:200]}")
        return None
    return binary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--thorough", action="store_true")
    args = parser.parse_args()
    llc = llc_bytes(lambda p: read_sysfs(p))
    size = buffer_size(llc, None, args.thorough)
    threads = usable_cpus()
    print(f"threads {threads}, LLC {llc and llc >> 20} MiB, buffer {size >> 20} MiB")
    with tempfile.TemporaryDirectory() as tmp:
        kernel = build_kernel(Path(tmp))
        probe_best = c_best = 0.0
        for round_no in range(1, args.rounds + 1):
            result = measure_cpu(size, budget_s=4.0 if args.thorough else 1.0)
            probe_best = max(probe_best, result.read_gbps)
            line = (
                f"round {round_no}: probe read {result.read_gbps:6.1f} GB/s (spread {result.read_spread:.0%}), "
                f"copy {result.copy_gbps:6.1f} GB/s (spread {result.copy_spread:.0%}), wall {result.wall_s:.2f} s, {result.passes} passes"
            )
            if kernel:
                env = {**os.environ, "OMP_NUM_THREADS": str(threads), "OMP_PROC_BIND": "false"}
                c_gbps = float(subprocess.run([str(kernel), str(size), "20"], capture_output=True, text=True, env=env, check=True).stdout)
                c_best = max(c_best, c_gbps)
                line += f"; C read {c_gbps:6.1f} GB/s, ratio {result.read_gbps / c_gbps:.2f}"
            print(line)
    print(
        f"best probe read {probe_best:.1f} GB/s"
        + (f", best C read {c_best:.1f} GB/s, ratio of bests {probe_best / c_best:.2f}" if c_best else ", no C compiler: no ratio")
    )


if __name__ == "__main__":
    main()
