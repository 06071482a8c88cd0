"""What the rest of the host did while a measurement ran: other processes' CPU time over the window
(in cores) and the share the hypervisor stole, from /proc/stat. A measurement taken beside other
work is a lower bound, never a host's figure."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

# A measurement beside a tenth of a core of other work, or 2 % stolen, is contended: a lower bound for
# a figure that must be the host's own (bandwidth), a widened interval for one that need not (a calibration).
CONTENDED_CORES = 0.1
CONTENDED_STEAL = 0.02


@dataclass(frozen=True)
class Load:
    other_load: float  # other processes' share of all the CPUs over the window
    foreign_cores: float  # other processes' CPU time over the window, in cores
    steal: float  # share of the CPUs' time the hypervisor took


def cpu_ticks() -> tuple[int, int, int] | None:
    """(busy, total, steal) jiffies of the whole host, from /proc/stat."""
    try:
        with open("/proc/stat") as handle:
            fields = [int(x) for x in handle.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    steal = fields[7] if len(fields) > 7 else 0
    return sum(fields) - idle - steal, sum(fields), steal


class Window:
    """Opened before the measured work, closed after it with the CPU seconds the work itself used."""

    def __init__(self) -> None:
        self.started = time.perf_counter()
        self.ticks = cpu_ticks()

    def close(self, own_cpu_s: float) -> Load:
        wall = time.perf_counter() - self.started
        after = cpu_ticks()
        if not self.ticks or not after or after[1] <= self.ticks[1]:
            return Load(0.0, 0.0, 0.0)
        hz = os.sysconf("SC_CLK_TCK")
        busy = (after[0] - self.ticks[0]) / hz
        total = (after[1] - self.ticks[1]) / hz
        other = max(0.0, (busy - own_cpu_s) / total) if total else 0.0
        foreign = max(0.0, (busy - own_cpu_s) / wall) if wall else 0.0
        stolen = (after[2] - self.ticks[2]) / hz / total if total else 0.0
        return Load(round(other, 3), round(foreign, 3), round(stolen, 3))
