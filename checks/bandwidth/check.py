"""Measured memory bandwidth: the number every decode ceiling is divided out of."""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

from decode_doctor.engine import Check, Code, Context, EnvRow, Facts, Finding, Metric, Needs, Option, Sample, Severity
from decode_doctor.engine.units import whole

from .membw import CpuBandwidth, GpuBandwidth, MemorySpec

LOW_RATIO = 0.5  # measured / spec below this: something leaves bandwidth on the table
GPU_LOW_RATIO = 0.6
BUSY = 0.15  # other processes used more than this share of the CPUs while we measured
PER_CORE_GBPS = 12.0  # roughly what one server core can pull; used only to explain a low ratio

BW002 = Code(
    code="BW002",
    title="Measured memory bandwidth is far below the memory's specification",
    severity=Severity.WARNING,
    what="The measured read bandwidth is less than half of what the installed DIMMs can deliver "
    "(configured speed × populated channels × 8 bytes, from dmidecode).",
    why="Decode tokens/s scales with the bandwidth actually reached. Common causes: channels left "
    "unpopulated (16 DIMMs in 48 slots), memory running below its rated speed, NUMA (threads reading "
    "the other socket's memory), power-saving governors, or too few cores to saturate many channels.",
    fix_by_hand="Populate every memory channel evenly; set the BIOS to the DIMMs' rated speed; pin the "
    "inference server to one NUMA node (numactl --cpunodebind=0 --membind=0) or interleave; use the "
    "performance governor (cpupower frequency-set -g performance).",
)
BW003 = Code(
    code="BW003",
    title="The host was busy while bandwidth was measured",
    severity=Severity.WARNING,
    what="Other processes used a noticeable share of the CPUs during the measurement.",
    why="The figures understate what the memory can do; budgets computed from them are pessimistic.",
    fix_by_hand="Measure again when the host is idle (decode-doctor check --select bandwidth --thorough).",
)
BW005 = Code(
    code="BW005",
    title="GPU memory bandwidth is far below its theoretical peak",
    severity=Severity.WARNING,
    what="The measured copy bandwidth is below 60 % of NVML's theoretical peak for the card.",
    why="Decode runs at the bandwidth actually reached: a throttled or misconfigured card loses tokens/s one for one.",
    fix_by_hand="Check `nvidia-smi -q -d PERFORMANCE,CLOCK` for clock-event reasons (power, thermal), "
    "that no other process uses the GPU, and that application clocks are not locked low.",
)


MEASURED_ELSEWHERE = "the machine running decode-doctor, not the --root host"


@dataclass(frozen=True)
class CpuMemory:
    """The CPU measurement with what explains it: caches, NUMA, governor, and the DIMMs' rating."""

    measured: CpuBandwidth
    llc_bytes: int | None
    numa_nodes: int
    governor: str | None
    measured_on: str  # "this host", or MEASURED_ELSEWHERE under --root
    spec: MemorySpec | None = None
    spec_gbps: float | None = None
    spec_unavailable: str | None = None

    @property
    def reached(self) -> float | None:
        return round(self.measured.read_gbps / self.spec_gbps, 3) if self.spec_gbps else None


@dataclass(frozen=True)
class BandwidthFacts(Facts):
    cpu: CpuMemory
    gpus: list[GpuBandwidth] = field(default_factory=list)

    @property
    def cpu_read_gbps(self) -> float:
        return self.cpu.measured.read_gbps

    def gpu(self, index: int) -> GpuBandwidth | None:
        return next((gpu for gpu in self.gpus if gpu.index == index), None)

    def summary(self) -> list[str]:
        measured = self.cpu.measured
        line = (
            f"Memory read {measured.read_gbps:.1f} GB/s, copy {measured.copy_gbps:.1f} GB/s "
            f"({measured.threads} threads over {measured.buffer_bytes >> 20} MiB, spread {measured.read_spread:.0%})"
        )
        if self.cpu.spec_gbps:
            line += f"; spec {self.cpu.spec_gbps:.0f} GB/s ({self.cpu.reached:.0%} reached)"
        else:
            line += f"; spec unknown: {self.cpu.spec_unavailable}"
        return [line] + [f"GPU {g.index} ({g.name}): copy {g.copy_gbps:.0f} GB/s{_of_peak(g)}" for g in self.gpus]

    def environment(self) -> list[EnvRow]:
        measured = self.cpu.measured
        rows = [
            EnvRow("memory bandwidth", f"read {measured.read_gbps} GB/s, copy {measured.copy_gbps} GB/s (measured)", ("BW002", "BW003"))
        ]
        rows += [EnvRow(f"GPU {g.index} bandwidth", f"copy {g.copy_gbps} GB/s{_of_peak(g)}", ("BW005",)) for g in self.gpus]
        return rows

    def metrics(self) -> list[Metric]:
        measured = self.cpu.measured
        samples = [
            Sample({"device": "cpu", "kind": "read"}, measured.read_gbps),
            Sample({"device": "cpu", "kind": "copy"}, measured.copy_gbps),
        ]
        samples += [Sample({"device": f"cuda:{g.index}", "kind": "copy"}, g.copy_gbps) for g in self.gpus]
        return [Metric("decode_doctor_memory_bandwidth_gbps", "Measured memory bandwidth in GB/s.", tuple(samples))]

    def compared(self) -> dict[str, str | float]:
        values: dict[str, str | float] = {
            "CPU read bandwidth (GB/s)": self.cpu.measured.read_gbps,
            "CPU copy bandwidth (GB/s)": self.cpu.measured.copy_gbps,
        }
        values.update({f"GPU {g.index} copy bandwidth (GB/s)": g.copy_gbps for g in self.gpus})
        return values


def _of_peak(gpu: GpuBandwidth) -> str:
    if not gpu.theoretical_gbps:
        return ""
    return f" of {gpu.theoretical_gbps:.0f} GB/s theoretical ({gpu.copy_gbps / gpu.theoretical_gbps:.0%})"


def _governor(ctx: Context) -> str | None:
    text = ctx.read_text("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor")
    return text.strip() if text else None


def _numa_nodes(ctx: Context) -> int:
    node_dir = ctx.host_path("/sys/devices/system/node")
    if not node_dir.is_dir():
        return 1
    return sum(1 for entry in node_dir.iterdir() if re.fullmatch(r"node\d+", entry.name)) or 1


def memory_spec(ctx: Context) -> tuple[MemorySpec | None, str | None]:
    """(the DIMMs' description, or None with why it is unavailable)."""
    from .membw import parse_dmidecode_memory

    record = ctx.run(["dmidecode", "-t", "17"], timeout_s=10)
    if record.error and "not found" in record.error:
        return None, "dmidecode is not installed"
    if not record.ok:
        detail = (record.stderr or record.error or "").strip().splitlines()
        if record.exit_code and any(w in (record.stderr or "") for w in ("Permission denied", "/dev/mem", "/sys/firmware")):
            return None, "dmidecode needs root to read the memory tables"
        return None, f"dmidecode failed: {detail[-1] if detail else 'no output'}"
    spec = parse_dmidecode_memory(record.stdout)
    if spec is None or not spec.peak_gbps:
        return None, "dmidecode lists no memory devices with a speed (a virtual machine?)"
    return spec, None


def _gpu_present(ctx: Context) -> bool:
    gpus = ctx.host_path("/proc/driver/nvidia/gpus")
    return (gpus.is_dir() and any(gpus.iterdir())) or ctx.host_path("/dev/nvidia0").exists()


class Bandwidth(Check):
    name = "bandwidth"
    description = "measured CPU (and GPU) memory bandwidth against the memory's specification"
    codes = (BW002, BW003, BW005)
    needs = Needs(exclusive=True)
    options = (
        Option("--thorough", "Measure bandwidth longer (about 4 s) with larger buffers.", is_flag=True, default=False),
        Option(
            "--threads",
            "Threads the CPU bandwidth probe reads with [default: one per usable CPU].",
            type=whole(1, 4096, "a number of threads"),
            metavar="N",
        ),
    )
    timeout_s = 60.0
    facts_type = BandwidthFacts
    retired = {
        "BW001": "the measured CPU bandwidth is now a fact (check --verbose, JSON facts.bandwidth)",
        "BW004": "the measured GPU bandwidth is now a fact (check --verbose, JSON facts.bandwidth)",
    }

    def run(self, ctx: Context) -> list[Finding]:
        from .membw import buffer_size, llc_bytes, measure_cpu, measure_gpus, nvml_theoretical

        thorough = bool(ctx.options.get("thorough"))
        llc = llc_bytes(ctx.read_text)
        buffer = buffer_size(llc, ctx.meminfo_bytes("MemAvailable"), thorough)
        threads = ctx.options.get("threads")
        if threads is not None and threads < 1:
            raise ValueError(f"--threads {threads}: give at least 1")
        measured = measure_cpu(buffer, budget_s=4.0 if thorough else 1.0, threads=threads)
        spec, spec_missing = memory_spec(ctx)
        cpu = CpuMemory(
            measured=measured,
            llc_bytes=llc,
            numa_nodes=_numa_nodes(ctx),
            governor=_governor(ctx),
            measured_on="this host" if ctx.live_host else MEASURED_ELSEWHERE,
            spec=spec,
            spec_gbps=round(spec.peak_gbps, 1) if spec and spec.peak_gbps else None,
            spec_unavailable=spec_missing,
        )
        gpus = []
        if _gpu_present(ctx):
            peaks = nvml_theoretical()
            for gpu in measure_gpus(budget_s=2.0 if thorough else 0.5):
                peak = peaks.get(gpu.index)
                gpus.append(replace(gpu, theoretical_gbps=round(peak, 1) if peak else None))
        facts = BandwidthFacts(cpu, gpus)
        ctx.publish(facts)
        evidence = facts.to_dict()
        findings = []
        if cpu.reached is not None and cpu.reached < LOW_RATIO:
            findings.append(self.finding("BW002", self._low_ratio_message(cpu), evidence=evidence["cpu"]))
        if measured.other_load > BUSY:
            message = (
                f"Other processes used {measured.other_load:.0%} of the CPUs during the measurement; the figures understate the memory."
            )
            findings.append(self.finding("BW003", message, evidence={"other_load": measured.other_load}))
        for gpu in gpus:
            if gpu.theoretical_gbps and gpu.copy_gbps / gpu.theoretical_gbps < GPU_LOW_RATIO:
                message = f"GPU {gpu.index} ({gpu.name}): copy {gpu.copy_gbps:.0f} GB/s{_of_peak(gpu)}."
                findings.append(self.finding("BW005", message, evidence=vars(gpu)))
        return findings

    @staticmethod
    def _low_ratio_message(cpu: CpuMemory) -> str:
        spec, measured = cpu.spec, cpu.measured
        assert spec is not None and cpu.spec_gbps is not None
        causes = []
        if spec.populated < spec.slots:
            causes.append(f"{spec.populated} of {spec.slots} DIMM slots populated")
        if cpu.numa_nodes > 1:
            causes.append(f"{cpu.numa_nodes} NUMA nodes")
        if cpu.governor and cpu.governor != "performance":
            causes.append(f"CPU governor '{cpu.governor}'")
        if measured.threads * PER_CORE_GBPS < cpu.spec_gbps * LOW_RATIO:
            causes.append(f"only {measured.threads} cores to drive {spec.channels} channels")
        why = "; likely: " + ", ".join(causes) if causes else ""
        return f"Read {measured.read_gbps:.1f} GB/s is {cpu.reached:.0%} of the {cpu.spec_gbps:.0f} GB/s the memory is rated for{why}."
