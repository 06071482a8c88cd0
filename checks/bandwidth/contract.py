"""The bandwidth feature's contract: the facts it publishes (BandwidthFacts) and their value types.

Other features read the measured bandwidth through this module alone (ctx.facts.get(BandwidthFacts));
it imports nothing of the feature but its codes.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from decode_doctor.engine import EnvRow, Facts, Metric, Options, Sample, option
from decode_doctor.engine.hostload import CONTENDED_CORES, CONTENDED_STEAL
from decode_doctor.engine.units import duration, whole
from decode_doctor.i18n import N_, _, localized

from .codes import BW002, BW003, BW005

GB = 1e9


@dataclass(frozen=True)
class BandwidthOptions(Options):
    """The bandwidth check's options; threads is also the decode budget's and estimate's (its probe's
    thread count is the prediction's)."""

    thorough: bool = option(
        "--thorough", "Measure bandwidth longer (about 4 s) with a larger buffer (up to 4 GiB).", is_flag=True, default=False
    )
    reuse_bandwidth: float | None = option(
        "--reuse-bandwidth",
        "For a node agent on a serving host: measure only while it is idle and at most once per AGE (seconds, or 12h, 1d); "
        "otherwise reuse the best figure measured on a quiet host, said so [default: always measure].",
        parse=duration(1.0, 365 * 86400.0),
        metavar="AGE",
    )
    cpu_bandwidth_only: bool = option(
        "--cpu-bandwidth-only", "Measure the CPU's memory only, not GPU copies (which need torch or cupy).", is_flag=True, default=False
    )
    no_memory_spec: bool = option(
        "--no-memory-spec",
        "Do not compare the bandwidth with the DIMMs' rating (dmidecode, which needs root): BW002 is then not asked for.",
        is_flag=True,
        default=False,
    )
    threads: int | None = option(
        "--threads",
        "CPU threads: the bandwidth probe reads with them, and a CPU engine is predicted with them [default: one per usable CPU].",
        parse=whole(1, 4096, N_("a number of threads")),
        metavar="N",
    )


@dataclass(frozen=True)
class CpuBandwidth:
    read_gbps: float
    copy_gbps: float
    read_spread: float  # (max - min) / max over the passes, 0 = perfectly steady
    copy_spread: float
    threads: int
    buffer_bytes: int
    passes: int
    wall_s: float
    other_load: float  # fraction of the host's CPU time used by other processes meanwhile
    foreign_cores: float = 0.0  # other processes' CPU time over the window, in cores (0.25: a quarter of a core)
    steal: float = 0.0  # share of the host's CPU time the hypervisor took meanwhile

    @property
    def contended(self) -> bool:
        """Something competed with the probe: a tenth of a core of other work, or 2 % stolen. Such a
        figure is a lower bound, never reused as the host's own (a share of all CPUs hid a quarter of
        a core as "9 % busy")."""
        return self.foreign_cores >= CONTENDED_CORES or self.steal >= CONTENDED_STEAL


@dataclass(frozen=True)
class MemorySpec:
    """The CPU memory system as dmidecode (SMBIOS type 17) describes it."""

    populated: int
    slots: int
    channels: int
    speed_mts: int | None
    memory_type: str | None
    total_gib: float

    @property
    def peak_gbps(self) -> float | None:
        # Each DDR channel moves 8 bytes per transfer (DDR5's two 32-bit subchannels together).
        return self.speed_mts * 1e6 * 8 * self.channels / GB if self.speed_mts else None


@dataclass(frozen=True)
class GpuBandwidth:
    index: int
    name: str
    memory_bytes: int
    copy_gbps: float
    spread: float
    theoretical_gbps: float | None = None


# what reports written before --root without --same-host stopped measuring say (read back, never written)
MEASURED_ELSEWHERE = "the machine running decode-doctor, not the --root host"


@dataclass(frozen=True)
class CpuMemory:
    """The CPU measurement with what explains it: caches, NUMA, governor, and the DIMMs' rating."""

    measured: CpuBandwidth
    llc_bytes: int | None
    numa_nodes: int
    governor: str | None
    measured_on: str  # "this host" (MEASURED_ELSEWHERE in older reports of another host's files)
    spec: MemorySpec | None = None
    spec_gbps: float | None = None
    spec_unavailable: str | None = None
    caveat: str | None = None  # why the figure may not be the memory's (a buffer near the cache's size)

    @property
    def reached(self) -> float | None:
        return round(self.measured.read_gbps / self.spec_gbps, 3) if self.spec_gbps else None


@dataclass(frozen=True)
class BandwidthFacts(Facts):
    cpu: CpuMemory
    gpus: list[GpuBandwidth] = field(default_factory=list)
    measured_at: float | None = None  # Unix time of the measurement
    # why an earlier quiet figure stands in for a measurement now (--reuse-bandwidth): the host is serving,
    # or the figure is younger than the age asked for
    reused: str | None = None
    spec_unreadable: bool = False  # the DIMMs' rating was there to read and could not be (not a VM without one)
    # this host's best quiet CPU read figure at the same thread count over the last week (this one
    # included): the floor of a ceiling, which a slow window now must not lower
    best_quiet_gbps: float | None = None
    ignored_state: tuple[str, ...] = ()  # stored figures that could not be used, each with the reason

    def gpu(self, index: int) -> GpuBandwidth | None:
        return next((gpu for gpu in self.gpus if gpu.index == index), None)

    def summary(self) -> list[str]:
        measured = self.cpu.measured
        line = _(
            "Memory read {read:.1f} GB/s, copy {copy:.1f} GB/s ({threads} threads over {mib} MiB, spread {spread:.0%})",
            read=measured.read_gbps,
            copy=measured.copy_gbps,
            threads=measured.threads,
            mib=measured.buffer_bytes >> 20,
            spread=measured.read_spread,
        )
        if self.cpu.spec_gbps:
            line += _("; spec {spec:.0f} GB/s ({reached:.0%} reached)", spec=self.cpu.spec_gbps, reached=self.cpu.reached)
        else:
            line += _("; spec unknown: {why}", why=localized(self.cpu.spec_unavailable or ""))
        if self.cpu.caveat:
            line += _("; ") + localized(self.cpu.caveat)
        if self.reused:
            line += _("; ") + localized(self.reused)
        gpus = [
            _("GPU {index} ({name}): copy {copy:.0f} GB/s{of_peak}", index=g.index, name=g.name, copy=g.copy_gbps, of_peak=of_peak(g))
            for g in self.gpus
        ]
        return [line, *gpus, *(localized(why) for why in self.ignored_state)]

    def environment(self) -> list[EnvRow]:
        measured = self.cpu.measured
        value = _("read {read} GB/s, copy {copy} GB/s (measured)", read=measured.read_gbps, copy=measured.copy_gbps)
        judged = (BW002, BW003) if self.cpu.spec_gbps else (BW003,)  # no rating (a VM's): BW002 does not apply
        rows = [EnvRow(_("memory bandwidth"), value, judged)]
        rows += [
            EnvRow(
                _("GPU {index} bandwidth", index=g.index), _("copy {copy} GB/s{of_peak}", copy=g.copy_gbps, of_peak=of_peak(g)), (BW005,)
            )
            for g in self.gpus
        ]
        return rows

    def metrics(self) -> list[Metric]:
        measured = self.cpu.measured
        samples = [
            Sample({"device": "cpu", "kind": "read"}, round(measured.read_gbps * GB)),
            Sample({"device": "cpu", "kind": "copy"}, round(measured.copy_gbps * GB)),
        ]
        samples += [Sample({"device": f"cuda:{g.index}", "kind": "copy"}, round(g.copy_gbps * GB)) for g in self.gpus]
        found = [
            Metric("decode_doctor_memory_bandwidth_bytes_per_second", "Measured memory bandwidth, in bytes per second.", tuple(samples))
        ]
        if self.measured_at is not None:
            stamp = Sample({}, round(self.measured_at, 3))
            found.append(
                Metric("decode_doctor_memory_bandwidth_measured_timestamp_seconds", "When the bandwidth figures were measured.", (stamp,))
            )
        return found

    def compared(self) -> dict[str, str | float]:
        values: dict[str, str | float] = {
            "CPU read bandwidth (GB/s)": self.cpu.measured.read_gbps,
            "CPU copy bandwidth (GB/s)": self.cpu.measured.copy_gbps,
        }
        values.update({f"GPU {g.index} copy bandwidth (GB/s)": g.copy_gbps for g in self.gpus})
        return values


def of_peak(gpu: GpuBandwidth) -> str:
    if not gpu.theoretical_gbps:
        return ""
    return _(" of {peak:.0f} GB/s theoretical ({share:.0%})", peak=gpu.theoretical_gbps, share=gpu.copy_gbps / gpu.theoretical_gbps)
