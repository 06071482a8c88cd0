"""The node agent's peak memory, the figure the DaemonSet's request is sized from.

    python benchmarks/bench_agent_memory.py [--root fixtures/hosts/gpu-node]

Runs `decode-doctor agent --once` with the DaemonSet's own selection and options on a fixture host,
twice: with the bandwidth probe's buffer as this machine sizes it, and at its largest default size
(512 MiB, what a server with 64 MiB of last-level cache or more gets), sampling the resident memory
of the whole process tree (the agent and its forked checks: what the container's cgroup counts)
every 20 ms. A bare `python -c pass` is measured in the same run as the baseline.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parent.parent
RUN = (
    "import sys; from decode_doctor.checks.bandwidth import membw; "
    "membw.MIN_BUFFER = membw.MAX_BUFFER if sys.argv.pop(1) == 'largest' else membw.MIN_BUFFER; "
    "from decode_doctor.cli.main import main; main(sys.argv[1:])"
)


def peak(argv: list[str]) -> tuple[float, float]:
    """(peak resident MiB of the process tree, seconds)."""
    began = time.monotonic()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    top = psutil.Process(proc.pid)
    highest = 0
    while proc.poll() is None:
        try:
            highest = max(highest, sum(p.memory_info().rss for p in [top, *top.children(recursive=True)]))
        except psutil.Error:
            pass
        time.sleep(0.02)
    return highest / 2**20, time.monotonic() - began


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=REPO / "fixtures/hosts/gpu-node")
    args = parser.parse_args()
    base, _ = peak([sys.executable, "-c", "pass"])
    print(f"baseline (python -c pass): {base:.0f} MiB")
    for buffer in ("as sized here", "largest"):
        with tempfile.TemporaryDirectory() as scratch:
            argv = [sys.executable, "-c", RUN, "largest" if buffer == "largest" else "here", "agent", "--root", str(args.root)]
            argv += ["--same-host", "--textfile-directory", scratch, "--once", "--select", "swappiness,bandwidth,gpu"]
            argv += ["--cpu-bandwidth-only", "--reuse-bandwidth", "1d"]
            env_state = Path(scratch) / "state"
            mib, seconds = peak(["env", f"XDG_STATE_HOME={env_state}", *argv])
            print(f"agent --once, bandwidth buffer {buffer}: peak {mib:.0f} MiB ({mib / base:.1f}× the baseline), {seconds:.1f} s")


if __name__ == "__main__":
    main()
