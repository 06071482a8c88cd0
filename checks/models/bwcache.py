"""The host's recent bandwidth measurements, kept in the state directory so that a ceiling can reuse
the best one measured on a quiet host instead of a fresh, busy, low one."""

from __future__ import annotations

import platform
import time
from dataclasses import dataclass
from pathlib import Path

from decode_doctor.i18n import Said, said

from .statefile import READ_LIMIT, age_text, append_record, read_records

CACHE_NAME = "bandwidth.json"
MAX_AGE_S = 7 * 24 * 3600
BUSY = 0.15  # other processes' share of the CPUs above which a figure is a lower bound
KEEP = 64


@dataclass(frozen=True)
class Measurement:
    host: str
    threads: int
    read_gbps: float
    other_load: float
    buffer_bytes: int
    measured_at: float
    contended: bool = False  # something competed with the probe (CpuBandwidth.contended): a lower bound only

    @property
    def busy(self) -> bool:
        return self.other_load > BUSY or self.contended

    def age(self, now: float | None = None) -> float:
        return (now or time.time()) - self.measured_at

    def describe(self, now: float | None = None) -> Said:
        return said(
            "measured {when} with {threads} thread(s), other processes {load:.0%} busy",
            when=age_text(self.age(now)),
            threads=self.threads,
            load=self.other_load,
        )


def host_id() -> str:
    model = ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as handle:
            for line in handle.read(READ_LIMIT).splitlines():
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return f"{platform.node()}/{model or platform.machine()}"


def load(state_dir: Path) -> list[Measurement]:
    return read_records(state_dir / CACHE_NAME, Measurement)


def best(records: list[Measurement], host: str, threads: int, now: float | None = None) -> Measurement | None:
    """The highest quiet measurement of this host with this many threads, at most a week old."""
    fitting = [m for m in records if m.host == host and m.threads == threads and not m.busy and m.age(now) <= MAX_AGE_S]
    return max(fitting, key=lambda m: m.read_gbps, default=None)


def record(state_dir: Path, measurement: Measurement) -> None:
    """Appended, the oldest dropped past KEEP, written atomically."""
    append_record(state_dir / CACHE_NAME, measurement, Measurement, KEEP)
