"""What one reading of a host's GPUs says about their health: the values every source is turned into
(NVML live, `nvidia-smi -q` text and `-q -x`, `--query-gpu` CSV, the default table, `nvlink -s`,
`topo -m`, `lspci -vv`, sysfs), and that judge.py alone reads.

A field a source does not show is None: never 0, False or "Default" by guess. The judge says "not
judged (why)" for what a finding would need and the reading lacks; a parser never fills a gap.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field


class ClockEvent(str, enum.Enum):
    """Why the clocks are held below their maximum (NVML's clocks event reasons; nvidia-smi's
    "Clocks Event Reasons", called "Clocks Throttle Reasons" before driver 535)."""

    IDLE = "idle"
    APPLICATIONS_CLOCKS = "applications_clocks"
    SW_POWER_CAP = "sw_power_cap"
    HW_SLOWDOWN = "hw_slowdown"  # hardware forces clocks down: thermal, power brake, or the board's own signal
    HW_THERMAL = "hw_thermal"
    HW_POWER_BRAKE = "hw_power_brake"
    SYNC_BOOST = "sync_boost"
    SW_THERMAL = "sw_thermal"
    DISPLAY_CLOCKS = "display_clocks"


# NVIDIA's names of the reasons, as --query-gpu (clocks_event_reasons.NAME) and -q -x
# (<clocks_event_reason_NAME>) write them; -q -x spells the display one with "clocks"
EVENT_NAMES: dict[str, ClockEvent] = {
    "gpu_idle": ClockEvent.IDLE,
    "applications_clocks_setting": ClockEvent.APPLICATIONS_CLOCKS,
    "sw_power_cap": ClockEvent.SW_POWER_CAP,
    "hw_slowdown": ClockEvent.HW_SLOWDOWN,
    "hw_thermal_slowdown": ClockEvent.HW_THERMAL,
    "hw_power_brake_slowdown": ClockEvent.HW_POWER_BRAKE,
    "sync_boost": ClockEvent.SYNC_BOOST,
    "sw_thermal_slowdown": ClockEvent.SW_THERMAL,
    "display_clock_setting": ClockEvent.DISPLAY_CLOCKS,
    "display_clocks_setting": ClockEvent.DISPLAY_CLOCKS,
}


class ComputeMode(str, enum.Enum):
    DEFAULT = "default"
    EXCLUSIVE_THREAD = "exclusive_thread"  # gone since CUDA 10, still printed by old drivers
    PROHIBITED = "prohibited"
    EXCLUSIVE_PROCESS = "exclusive_process"


@dataclass(frozen=True)
class PcieLink:
    """The GPU's PCIe link. *_max is the GPU's own capability (NVML's max link gen/width, `-q`'s "Max",
    LnkCap of the GPU); slot_* what the port above it can do (sysfs max_link_* of the upstream bridge,
    its LnkCap, or `-q`'s "Host Max" on drivers that print it)."""

    gen_current: int | None = None
    gen_max: int | None = None
    width_current: int | None = None
    width_max: int | None = None
    slot_gen_max: int | None = None
    slot_width_max: int | None = None
    replays: int | None = None  # "Replays Since Reset" / NVML's PCIe replay counter
    replay_rollovers: int | None = None


@dataclass(frozen=True)
class Clocks:
    """Clocks in MHz and the power limit in watts."""

    events: frozenset[ClockEvent] | None = None  # the reasons active now; None: not shown
    graphics_mhz: int | None = None
    memory_mhz: int | None = None
    max_graphics_mhz: int | None = None
    max_memory_mhz: int | None = None
    applications_graphics_mhz: int | None = None  # applications clocks set (locked); None where not shown or deprecated
    applications_memory_mhz: int | None = None
    default_applications_graphics_mhz: int | None = None
    default_applications_memory_mhz: int | None = None
    power_limit_w: float | None = None  # enforced/current
    default_power_limit_w: float | None = None
    power_draw_w: float | None = None
    temperature_c: int | None = None


@dataclass(frozen=True)
class MemoryFaults:
    """ECC counters (volatile: since the driver loaded; aggregate: the GPU's lifetime), retired pages
    (before Ampere) and row remapping (Ampere and later)."""

    ecc_enabled: bool | None = None
    uncorrected_volatile: int | None = None  # double-bit / "DRAM Uncorrectable" (+ SRAM uncorrectable)
    uncorrected_aggregate: int | None = None
    corrected_volatile: int | None = None
    corrected_aggregate: int | None = None
    retired_pages_sbe: int | None = None
    retired_pages_dbe: int | None = None
    retired_pages_pending: bool | None = None  # "Pending Page Blacklist": retired at the next reset
    remap_pending: bool | None = None  # a row awaits remapping: the memory is whole only after a reset
    remap_failure: bool | None = None  # a row could not be remapped: the board is out of spare rows (RMA)
    remapped_correctable: int | None = None
    remapped_uncorrectable: int | None = None


@dataclass(frozen=True)
class NvLink:
    link: int
    active: bool | None = None
    speed_gbps: float | None = None  # per direction, as `nvlink -s` prints it ("26.562 GB/s")
    errors: int | None = None  # replay + recovery + CRC counts where shown


@dataclass(frozen=True)
class GpuProcess:
    pid: int | None
    name: str
    used_mib: int | None


@dataclass(frozen=True)
class GpuReading:
    """One GPU as a source showed it. index is the position in that source (nvidia-smi's order)."""

    index: int
    name: str | None = None
    uuid: str | None = None
    bus_id: str | None = None  # 00000000:17:00.0, lower-case hex as sysfs writes it
    architecture: str | None = None
    utilization_pct: int | None = None  # GPU utilization; None: the source does not show it
    memory_used_mib: int | None = None
    memory_total_mib: int | None = None
    persistence: bool | None = None
    compute_mode: ComputeMode | None = None
    mig_enabled: bool | None = None
    mig_pending: bool | None = None
    pcie: PcieLink = field(default_factory=PcieLink)
    clocks: Clocks = field(default_factory=Clocks)
    memory: MemoryFaults = field(default_factory=MemoryFaults)
    nvlinks: tuple[NvLink, ...] | None = None  # None: not shown; () shown and none
    nvlinks_all_inactive: bool = False  # nvidia-smi: "all links are inActive", with no count of them
    fabric_state: str | None = None  # "Completed", "In Progress", "Not Started", "N/A"
    fabric_status: str | None = None  # "Success", or an error such as "Not Supported"
    processes: tuple[GpuProcess, ...] | None = None  # None: not shown
    line: int | None = None  # where the GPU's block starts in a pasted text

    @property
    def shows_health(self) -> bool:
        """Whether the reading shows anything of the GPU's health (a topology alone names it, no more)."""
        values = (self.persistence, self.compute_mode, self.mig_enabled, self.mig_pending, self.nvlinks, self.fabric_state, self.processes)
        parts = (self.pcie != PcieLink(), self.clocks != Clocks(), self.memory != MemoryFaults())
        return any(value is not None for value in values) or any(parts) or self.nvlinks_all_inactive


@dataclass(frozen=True)
class Topology:
    """`nvidia-smi topo -m`: for each GPU pair, NV# (bonded NVLinks) or the PCIe path (PIX, PXB, PHB,
    NODE, SYS)."""

    links: dict[tuple[int, int], str] = field(default_factory=dict)

    def nvlinked(self, gpu: int) -> bool:
        return bool(self.nvlink_counts(gpu))

    def nvlink_counts(self, gpu: int) -> list[int]:
        """NV#'s number for each peer the GPU reaches over NVLink."""
        counts = []
        for pair, kind in self.links.items():
            if gpu in pair and pair[0] != pair[1] and kind.startswith("NV") and kind[2:].isdigit():
                counts.append(int(kind[2:]))
        return counts


@dataclass(frozen=True)
class HostReading:
    """Everything one source (or the live host) showed. kind says which ("NVML", "nvidia-smi -q",
    "nvidia-smi -q -x", "nvidia-smi --query-gpu CSV", "nvidia-smi table", "nvidia-smi nvlink -s",
    "nvidia-smi topo -m", "lspci -vv")."""

    kind: str
    gpus: tuple[GpuReading, ...] = ()
    driver_version: str | None = None
    windows: bool = False  # a Windows capture (WDDM/TCC): persistence mode does not exist there
    topology: Topology | None = None
    pci_gpus: tuple[str, ...] | None = None  # NVIDIA display/3D functions on the PCI bus (sysfs, lspci); None: not read
    visible_devices: str | None = None  # CUDA_VISIBLE_DEVICES / NVIDIA_VISIBLE_DEVICES as set for the reader
    nvswitches: int | None = None  # NVSwitch bridges on the bus (an HGX board): the fabric manager must run
    fabric_manager_running: bool | None = None
    notes: tuple[str, ...] = ()
