"""Measured memory bandwidth: the number every decode ceiling is divided out of."""

from __future__ import annotations

import re
from typing import Any

from decode_doctor.check import Check, Needs, Option
from decode_doctor.context import Context
from decode_doctor.model import Code, Finding, Severity

LOW_RATIO = 0.5  # measured / spec below this: something leaves bandwidth on the table
GPU_LOW_RATIO = 0.6
BUSY = 0.15  # other processes used more than this share of the CPUs while we measured
PER_CORE_GBPS = 12.0  # roughly what one server core can pull; used only to explain a low ratio

BW001 = Code(
    code="BW001",
    title="Measured CPU memory bandwidth",
    severity=Severity.INFO,
    what="Read and copy bandwidth of this host's memory, measured with one thread per usable core over "
    "a buffer far larger than the last-level cache; the best of several passes, with their spread.",
    why="A decode step reads every weight once: tokens/s can never exceed bandwidth ÷ bytes read per "
    "step. This figure (not the CPU's FLOPS) is the budget for CPU inference and for offloaded layers.",
    fix_by_hand="Nothing to fix: use it with `decode-doctor estimate --model DIR` to budget a model.",
    example="read 75.7 GB/s, copy 66.6 GB/s on 2 threads over 256 MiB.",
)
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
BW004 = Code(
    code="BW004",
    title="Measured GPU memory bandwidth",
    severity=Severity.INFO,
    what="Device-to-device copy bandwidth of each GPU, timed with device events, against the "
    "theoretical peak NVML reports (2 × max memory clock × bus width ÷ 8).",
    why="On a GPU, decode tokens/s per sequence is bounded by this bandwidth ÷ bytes read per step.",
    fix_by_hand="Nothing to fix; compare it with the card's datasheet.",
)
BW005 = Code(
    code="BW005",
    title="GPU memory bandwidth is far below its theoretical peak",
    severity=Severity.WARNING,
    what="The measured copy bandwidth is below 60 % of NVML's theoretical peak for the card.",
    why="Decode runs at the bandwidth actually reached: a throttled or misconfigured card loses tokens/s "
    "one for one.",
    fix_by_hand="Check `nvidia-smi -q -d PERFORMANCE,CLOCK` for clock-event reasons (power, thermal), "
    "that no other process uses the GPU, and that application clocks are not locked low.",
)


def _governor(ctx: Context) -> str | None:
    text = ctx.read_text("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor")
    return text.strip() if text else None


def _numa_nodes(ctx: Context) -> int:
    node_dir = ctx.host_path("/sys/devices/system/node")
    if not node_dir.is_dir():
        return 1
    return sum(1 for entry in node_dir.iterdir() if re.fullmatch(r"node\d+", entry.name)) or 1


def memory_spec(ctx: Context) -> tuple[Any, str | None]:
    """(MemorySpec or None, why it is unavailable)."""
    from decode_doctor.membw import parse_dmidecode_memory

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
    codes = (BW001, BW002, BW003, BW004, BW005)
    needs = Needs(exclusive=True, files=("/sys/devices/system/cpu/cpu0/cache", "/proc/meminfo"), commands=("dmidecode -t 17",))
    options = (Option("--thorough", "Measure bandwidth longer (about 4 s) with larger buffers.", is_flag=True, default=False),)
    timeout_s = 60.0

    def run(self, ctx: Context) -> list[Finding]:
        from decode_doctor.membw import buffer_size, llc_bytes, measure_cpu, measure_gpus, nvml_theoretical

        thorough = bool(ctx.options.get("thorough"))
        llc = llc_bytes(ctx.read_text)
        cpu = measure_cpu(buffer_size(llc, ctx.meminfo_bytes("MemAvailable"), thorough), budget_s=4.0 if thorough else 1.0)
        spec, spec_missing = memory_spec(ctx)
        evidence: dict[str, Any] = {**cpu.to_dict(), "llc_bytes": llc, "numa_nodes": _numa_nodes(ctx), "governor": _governor(ctx)}
        if not ctx.live_host:
            evidence["measured_on"] = "the machine running decode-doctor, not the --root host"
        if spec:
            evidence.update(
                spec_gbps=round(spec.peak_gbps, 1), memory_type=spec.memory_type, speed_mts=spec.speed_mts,
                channels=spec.channels, dimms_populated=spec.populated, dimm_slots=spec.slots,
            )
            evidence["measured_over_spec"] = round(cpu.read_gbps / spec.peak_gbps, 3)
        else:
            evidence["spec_unavailable"] = spec_missing
        message = (
            f"Memory read {cpu.read_gbps:.1f} GB/s, copy {cpu.copy_gbps:.1f} GB/s "
            f"({cpu.threads} threads over {cpu.buffer_bytes >> 20} MiB, spread {cpu.read_spread:.0%})"
        )
        message += f"; spec {spec.peak_gbps:.0f} GB/s ({evidence['measured_over_spec']:.0%} reached)." if spec else f"; spec unknown: {spec_missing}."
        findings = [self.finding("BW001", message, evidence=evidence)]
        facts: dict[str, Any] = {"cpu": evidence, "gpus": []}
        if spec and cpu.read_gbps / spec.peak_gbps < LOW_RATIO:
            findings.append(self.finding("BW002", self._low_ratio_message(cpu, spec, evidence), evidence=evidence))
        if cpu.other_load > BUSY:
            findings.append(self.finding("BW003", f"Other processes used {cpu.other_load:.0%} of the CPUs during the measurement; the figures understate the memory.", evidence={"other_load": round(cpu.other_load, 3)}))
        if _gpu_present(ctx):
            peaks = nvml_theoretical()
            for gpu in measure_gpus(budget_s=2.0 if thorough else 0.5):
                gpu.theoretical_gbps = peaks.get(gpu.index)
                gpu_evidence = {
                    "index": gpu.index, "name": gpu.name, "memory_bytes": gpu.memory_bytes,
                    "copy_gbps": round(gpu.copy_gbps, 1), "spread": round(gpu.spread, 3),
                    "theoretical_gbps": round(gpu.theoretical_gbps, 1) if gpu.theoretical_gbps else None,
                }
                facts["gpus"].append(gpu_evidence)
                text = f"GPU {gpu.index} ({gpu.name}): copy {gpu.copy_gbps:.0f} GB/s"
                if gpu.theoretical_gbps:
                    ratio = gpu.copy_gbps / gpu.theoretical_gbps
                    text += f" of {gpu.theoretical_gbps:.0f} GB/s theoretical ({ratio:.0%})"
                    if ratio < GPU_LOW_RATIO:
                        findings.append(self.finding("BW005", text + ".", evidence=gpu_evidence))
                findings.append(self.finding("BW004", text + ".", evidence=gpu_evidence))
        ctx.publish("bandwidth", facts)
        return findings

    @staticmethod
    def _low_ratio_message(cpu: Any, spec: Any, evidence: dict[str, Any]) -> str:
        causes = []
        if spec.populated < spec.slots:
            causes.append(f"{spec.populated} of {spec.slots} DIMM slots populated")
        if evidence["numa_nodes"] > 1:
            causes.append(f"{evidence['numa_nodes']} NUMA nodes")
        if evidence.get("governor") and evidence["governor"] != "performance":
            causes.append(f"CPU governor '{evidence['governor']}'")
        if cpu.threads * PER_CORE_GBPS < spec.peak_gbps * LOW_RATIO:
            causes.append(f"only {cpu.threads} cores to drive {spec.channels} channels")
        why = "; likely: " + ", ".join(causes) if causes else ""
        return f"Read {cpu.read_gbps:.1f} GB/s is {cpu.read_gbps / spec.peak_gbps:.0%} of the {spec.peak_gbps:.0f} GB/s the memory is rated for{why}."
