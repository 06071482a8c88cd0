"""The bandwidth feature's codes, each with its explanation in fixed sections."""

from __future__ import annotations

from decode_doctor.engine import Code, Severity

BW002 = Code(
    code="BW002",
    title="Measured memory bandwidth is far below the memory's specification",
    severity=Severity.WARNING,
    what="The measured read bandwidth is less than half of what the installed DIMMs can deliver "
    "(configured speed × populated channels × 8 bytes, from dmidecode). It does not apply on a virtual machine "
    "without SMBIOS memory tables (no /sys/firmware/dmi/tables or /dev/mem): there is no rating to compare with.",
    why="Decode tokens/s scales with the bandwidth actually reached. Common causes: channels left "
    "unpopulated (16 DIMMs in 48 slots), memory running below its rated speed, NUMA (threads reading "
    "the other socket's memory), power-saving governors, or too few cores to saturate many channels.",
    fix_by_hand="Populate every memory channel evenly; set the BIOS to the DIMMs' rated speed; pin the "
    "inference server to one NUMA node (numactl --cpunodebind=0 --membind=0) or interleave; use the "
    "performance governor (cpupower frequency-set -g performance).",
    example="An EPYC host reads 92 GB/s with numpy while dmidecode shows 8 of 24 DIMM slots populated at 4800 MT/s (307 GB/s rated): "
    "30 % reached.",
)

BW003 = Code(
    code="BW003",
    title="The host was busy while bandwidth was measured",
    severity=Severity.WARNING,
    what="Other processes used a noticeable share of the CPUs during the measurement.",
    why="The figures understate what the memory can do; budgets computed from them are pessimistic.",
    fix_by_hand="Measure again when the host is idle (decode-doctor check --select bandwidth --thorough).",
    example="Other processes used 41 % of the CPUs during the one-second measurement: the 38 GB/s it read is a lower bound.",
)

BW005 = Code(
    code="BW005",
    title="GPU memory bandwidth is far below its theoretical peak",
    severity=Severity.WARNING,
    what="The measured copy bandwidth is below 60 % of NVML's theoretical peak for the card.",
    why="Decode runs at the bandwidth actually reached: a throttled or misconfigured card loses tokens/s one for one.",
    fix_by_hand="Check `nvidia-smi -q -d PERFORMANCE,CLOCK` for clock-event reasons (power, thermal), "
    "that no other process uses the GPU, and that application clocks are not locked low.",
    example="GPU 0 (NVIDIA A10) copies at 301 GB/s against NVML's 600 GB/s theoretical peak: the card is throttled to its power limit.",
)

CODES = (BW002, BW003, BW005)
RETIRED = {
    "BW001": "the measured CPU bandwidth is now a fact (check --verbose, JSON facts.bandwidth)",
    "BW004": "the measured GPU bandwidth is now a fact (check --verbose, JSON facts.bandwidth)",
}
