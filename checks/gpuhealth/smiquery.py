"""`nvidia-smi -q` (the text report, whole or a fragment a person pasted) and `nvidia-smi -q -x` (its XML)
read into a HostReading.

Both sources are first reduced to the same named raw fields (FIELDS: the text report's labels and the
XML's tags for each), then one conversion turns those into a GpuReading, so a value means the same
whichever form it came in. A field the capture does not show, or shows as N/A, deprecated or not
supported, stays None. Linear in the size of the input: the text is read line by line with a stack of
open sections, the XML by expat with a bounded tree; nothing is expanded (no DTD internal subset, no
entity declaration), and oversized inputs, lines and nestings are refused or skipped.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from xml.parsers import expat

from .reading import EVENT_NAMES, ClockEvent, Clocks, ComputeMode, GpuProcess, GpuReading, HostReading, MemoryFaults, PcieLink

TEXT_KIND = "nvidia-smi -q"
XML_KIND = "nvidia-smi -q -x"

MAX_INPUT = 16 << 20  # nvidia-smi -q of 8 GPUs is about 100 KB (the XML with supported clocks about 300 KB)
MAX_LINE = 4096  # a longer line is no nvidia-smi field: skipped
MAX_LINES = 200_000  # `-q` of 64 GPUs is about 25,000 lines
MAX_DEPTH = 12  # sections nest 5 deep in -q; deeper lines are skipped
MAX_GPUS = 64
MAX_FIELDS = 4096  # fields kept per GPU block (a full block has about 300 lines)
MAX_PROCESSES = 1024
MAX_XML_DEPTH = 6  # nvidia_smi_log/gpu/ecc_errors/volatile/double_bit/total
MAX_XML_NODES = 200_000
MAX_XML_TEXT = 512

UNAVAILABLE = frozenset(
    {
        "n/a",
        "requested functionality has been deprecated",
        "not supported",
        "unknown error",
        "insufficient permissions",
        "not available in wddm driver model",
        "not found",
    }
)
WINDOWS_DRIVER_MODELS = frozenset({"wddm", "tcc", "mcdm"})
COMPUTE_MODES = {
    "default": ComputeMode.DEFAULT,
    "exclusive_thread": ComputeMode.EXCLUSIVE_THREAD,
    "prohibited": ComputeMode.PROHIBITED,
    "exclusive_process": ComputeMode.EXCLUSIVE_PROCESS,
}

# One entry per raw field: the `-q` label paths (the last sections above the label, then the label; looked up
# by that suffix, so a fragment pasted without its outer sections still matches) and the `-q -x` paths under
# <gpu>. The first one shown wins.
Where = tuple[tuple[tuple[str, ...], ...], tuple[str, ...]]  # (the -q label paths, the -q -x tag paths)
FIELDS: dict[str, Where] = {
    "name": ((("product name",),), ("product_name",)),
    "uuid": ((("gpu uuid",),), ("uuid",)),
    "bus_id": ((("pci", "bus id"),), ("pci/pci_bus_id",)),
    "architecture": ((("product architecture",),), ("product_architecture",)),
    "utilization": ((("utilization", "gpu"),), ("utilization/gpu_util",)),
    "fb_used": ((("fb memory usage", "used"),), ("fb_memory_usage/used",)),
    "fb_total": ((("fb memory usage", "total"),), ("fb_memory_usage/total",)),
    "persistence": ((("persistence mode",),), ("persistence_mode",)),
    "compute_mode": ((("compute mode",),), ("compute_mode",)),
    "mig_current": ((("mig mode", "current"),), ("mig_mode/current_mig",)),
    "mig_pending": ((("mig mode", "pending"),), ("mig_mode/pending_mig",)),
    "driver_model": ((("driver model", "current"),), ("driver_model/current_dm",)),
    "gen_max": ((("pcie generation", "max"),), ("pci/pci_gpu_link_info/pcie_gen/max_link_gen",)),
    "gen_device_max": ((("pcie generation", "device max"),), ("pci/pci_gpu_link_info/pcie_gen/max_device_link_gen",)),
    "gen_current": ((("pcie generation", "current"),), ("pci/pci_gpu_link_info/pcie_gen/current_link_gen",)),
    "gen_host_max": ((("pcie generation", "host max"),), ("pci/pci_gpu_link_info/pcie_gen/max_host_link_gen",)),
    "width_max": ((("link width", "max"),), ("pci/pci_gpu_link_info/link_widths/max_link_width",)),
    "width_current": ((("link width", "current"),), ("pci/pci_gpu_link_info/link_widths/current_link_width",)),
    "replays": ((("replays since reset",),), ("pci/replay_counter",)),
    "replay_rollovers": ((("replay number rollovers",),), ("pci/replay_rollover_counter", "pci/replay_number_rollovers")),
    "ecc_mode": ((("ecc mode", "current"),), ("ecc_mode/current_ecc",)),
    "retired_sbe": ((("retired pages", "single bit ecc"),), ("retired_pages/multiple_single_bit_retirement/retired_count",)),
    "retired_dbe": ((("retired pages", "double bit ecc"),), ("retired_pages/double_bit_retirement/retired_count",)),
    # "Pending Page Blacklist" in newer reports, "Pending" in older ones; newer XML has both tags, older only the second
    "retired_pending": (
        (("retired pages", "pending page blacklist"), ("retired pages", "pending")),
        ("retired_pages/pending_blacklist", "retired_pages/pending_retirement"),
    ),
    "remap_pending": ((("remapped rows", "pending"),), ("remapped_rows/remapped_row_pending",)),
    "remap_failure": ((("remapped rows", "remapping failure occurred"),), ("remapped_rows/remapped_row_failure",)),
    "remap_correctable": ((("remapped rows", "correctable error"),), ("remapped_rows/remapped_row_corr",)),
    "remap_uncorrectable": ((("remapped rows", "uncorrectable error"),), ("remapped_rows/remapped_row_unc",)),
    "temperature": ((("temperature", "gpu current temp"),), ("temperature/gpu_temp",)),
    "graphics": ((("clocks", "graphics"),), ("clocks/graphics_clock",)),
    "memory": ((("clocks", "memory"),), ("clocks/mem_clock",)),
    "max_graphics": ((("max clocks", "graphics"),), ("max_clocks/graphics_clock",)),
    "max_memory": ((("max clocks", "memory"),), ("max_clocks/mem_clock",)),
    "app_graphics": ((("applications clocks", "graphics"),), ("applications_clocks/graphics_clock",)),
    "app_memory": ((("applications clocks", "memory"),), ("applications_clocks/mem_clock",)),
    "default_app_graphics": ((("default applications clocks", "graphics"),), ("default_applications_clocks/graphics_clock",)),
    "default_app_memory": ((("default applications clocks", "memory"),), ("default_applications_clocks/mem_clock",)),
    "fabric_state": ((("fabric", "state"),), ("fabric/state",)),
    "fabric_status": ((("fabric", "status"),), ("fabric/status",)),
}


def _power_fields() -> dict[str, Where]:
    """The board's power readings: "Power Readings" in older reports, "GPU Power Readings" in newer ones (never the
    "Module …" or "GPU Memory Power Readings" sections). The limit in force is "Enforced Power Limit" (older) or
    "Current Power Limit" (newer); the older "Power Limit" is the one requested, used only where neither is shown."""
    names = (
        ("power_limit_enforced", "enforced power limit", "enforced_power_limit"),
        ("power_limit_current", "current power limit", "current_power_limit"),
        ("power_limit_requested", "power limit", "power_limit"),
        ("power_default", "default power limit", "default_power_limit"),
        ("power_draw", "power draw", "power_draw"),
        ("power_draw_instant", "instantaneous power draw", "instant_power_draw"),
        ("power_draw_average", "average power draw", "average_power_draw"),
    )
    return {
        name: ((("gpu power readings", label), ("power readings", label)), (f"gpu_power_readings/{tag}", f"power_readings/{tag}"))
        for name, label, tag in names
    }


def _ecc_fields() -> dict[str, Where]:
    """ECC counters, volatile and aggregate. Newer layout: SRAM and DRAM, correctable and uncorrectable (SRAM
    uncorrectable one count, or split into Parity and SEC-DED). Older layout: Single Bit and Double Bit, each per
    memory (Device Memory, Register File, caches …) with a Total."""
    names = (
        ("dram_unc", ("dram uncorrectable",), "dram_uncorrectable"),
        ("sram_unc_parity", ("sram uncorrectable parity",), "sram_uncorrectable_parity"),
        ("sram_unc_secded", ("sram uncorrectable sec-ded",), "sram_uncorrectable_secded"),
        ("sram_unc", ("sram uncorrectable",), "sram_uncorrectable"),
        ("dram_cor", ("dram correctable",), "dram_correctable"),
        ("sram_cor", ("sram correctable",), "sram_correctable"),
        ("dbe_total", ("double bit", "total"), "double_bit/total"),
        ("dbe_device", ("double bit", "device memory"), "double_bit/device_memory"),
        ("sbe_total", ("single bit", "total"), "single_bit/total"),
        ("sbe_device", ("single bit", "device memory"), "single_bit/device_memory"),
    )
    return {
        f"{scope}_{name}": (((scope, *labels),), (f"ecc_errors/{scope}/{tag}",))
        for scope in ("volatile", "aggregate")
        for name, labels, tag in names
    }


FIELDS.update(_power_fields())
FIELDS.update(_ecc_fields())

EVENTS = {
    "idle": ClockEvent.IDLE,
    "applications clocks setting": ClockEvent.APPLICATIONS_CLOCKS,
    "sw power cap": ClockEvent.SW_POWER_CAP,
    "hw slowdown": ClockEvent.HW_SLOWDOWN,
    "hw thermal slowdown": ClockEvent.HW_THERMAL,
    "hw power brake slowdown": ClockEvent.HW_POWER_BRAKE,
    "sync boost": ClockEvent.SYNC_BOOST,
    "sw thermal slowdown": ClockEvent.SW_THERMAL,
    "display clock setting": ClockEvent.DISPLAY_CLOCKS,
}
EVENT_SECTIONS = ("clocks event reasons", "clocks throttle reasons")  # the name before driver 535
XML_EVENT_SECTIONS = ("clocks_event_reasons", "clocks_throttle_reasons")


# --- values ------------------------------------------------------------------------------------


def _clean(raw: str | None) -> str | None:
    """A value without the note drivers add ("610.57.04 [Deprecated; …]"); None where the field is not shown:
    N/A, [N/A], [Not Supported], deprecated, Unknown Error."""
    if raw is None:
        return None
    value = raw.strip()
    if not value or value.startswith("["):
        return None
    value = value.split(" [", 1)[0].strip()
    return None if value.lower() in UNAVAILABLE else value


def _number_prefix(value: str | None, decimals: bool) -> tuple[str, str] | None:
    """The leading number of a value and what follows it: "16x" → ("16", "x"), "700.00 W" → ("700.00", " W")."""
    if not value:
        return None
    end = 1 if value[0] == "-" else 0
    seen_point = False
    while end < len(value) and end < 24:
        char = value[end]
        if char.isdigit() and char.isascii():
            end += 1
        elif char == "." and decimals and not seen_point:
            seen_point = True
            end += 1
        else:
            break
    number = value[:end].rstrip(".")
    if not number.lstrip("-"):
        return None
    return number, value[end:]


def _int(value: str | None) -> int | None:
    """ "16x" → 16, "5" → 5, "2619 MHz" → 2619, "0 %" → 0, "41 C" → 41."""
    found = _number_prefix(value, decimals=False)
    return int(found[0]) if found else None


def _float(value: str | None) -> float | None:
    """ "700.00 W" → 700.0."""
    found = _number_prefix(value, decimals=True)
    return float(found[0]) if found else None


MIB_PER_UNIT = {"": 1.0, "mib": 1.0, "gib": 1024.0, "kib": 1 / 1024}


def _mib(value: str | None) -> int | None:
    """ "81559 MiB" → 81559."""
    found = _number_prefix(value, decimals=True)
    if found is None:
        return None
    scale = MIB_PER_UNIT.get(found[1].strip().lower())
    return None if scale is None else int(float(found[0]) * scale)


def _process_name(raw: str | None) -> str:
    """A process's name as shown ("[kworker]" and "C:\\Windows\\explorer.exe" whole); "" where it is not shown."""
    value = (raw or "").strip()
    return "" if value.strip("[]").lower() in UNAVAILABLE else value


def _bus_id(value: str | None) -> str | None:
    """nvidia-smi's form, lower-case, the domain in 8 digits: "00000000:17:00.0" (older drivers print "0000:17:00.0")."""
    if not value:
        return None
    domain, colon, rest = value.strip().lower().partition(":")
    return f"{domain.zfill(8)}:{rest}" if colon and len(domain) <= 8 else value.strip().lower()


def _flag(value: str | None, yes: str, no: str) -> bool | None:
    if value is None:
        return None
    word = value.strip().lower()
    return True if word == yes else False if word == no else None


def _enabled(value: str | None) -> bool | None:
    return _flag(value, "enabled", "disabled")


def _yes(value: str | None) -> bool | None:
    return _flag(value, "yes", "no")


def _active(value: str | None) -> bool | None:
    return _flag(value, "active", "not active")


def _version(value: str | None) -> str | None:
    if value is None or not value or len(value) > 24 or not value[0].isdigit():
        return None
    return value if all(c.isdigit() or c == "." for c in value) and value.isascii() else None


def _first(*values: float | None) -> float | None:
    return next((v for v in values if v is not None), None)


def _total(*values: int | None) -> int | None:
    known = [v for v in values if v is not None]
    return sum(known) if known else None


# --- one GPU from its raw fields -----------------------------------------------------------------

Raw = Callable[[str], str | None]


def _uncorrected(raw: Raw, scope: str) -> int | None:
    # New layout: DRAM uncorrectable plus SRAM uncorrectable (parity + SEC-DED where split, the one SRAM count
    # before): an uncorrectable error in either memory ends the CUDA contexts on the GPU, and NVML's uncorrected
    # total (what the live reader gets) counts every location. Old layout: Double Bit "Total" covers every checked
    # memory (device memory, register file, caches) for the same reason; "Device Memory" only where no total is shown.
    sram = _total(_int(raw(f"{scope}_sram_unc_parity")), _int(raw(f"{scope}_sram_unc_secded")))
    if sram is None:
        sram = _int(raw(f"{scope}_sram_unc"))
    new = _total(_int(raw(f"{scope}_dram_unc")), sram)
    if new is not None:
        return new
    return _int(raw(f"{scope}_dbe_total")) if raw(f"{scope}_dbe_total") is not None else _int(raw(f"{scope}_dbe_device"))


def _corrected(raw: Raw, scope: str) -> int | None:
    new = _total(_int(raw(f"{scope}_dram_cor")), _int(raw(f"{scope}_sram_cor")))
    if new is not None:
        return new
    return _int(raw(f"{scope}_sbe_total")) if raw(f"{scope}_sbe_total") is not None else _int(raw(f"{scope}_sbe_device"))


def _pending_retirement(shown: list[str | None]) -> bool | None:
    flags = [_yes(value) for value in shown]
    return True if True in flags else False if False in flags else None


def _compute_mode(value: str | None) -> ComputeMode | None:
    return COMPUTE_MODES.get(value.strip().lower().replace(" ", "_")) if value else None


def _gpu(
    index: int,
    raw: Raw,
    *,
    bus_id: str | None,
    events: frozenset[ClockEvent] | None,
    processes: tuple[GpuProcess, ...] | None,
    retired_pending: bool | None,
    line: int | None,
) -> GpuReading:
    pcie = PcieLink(
        gen_current=_int(raw("gen_current")),
        # "Max" is NVML's max link generation: the GPU's, bounded by the system; the GPU's own ("Device Max")
        # only where "Max" is not shown
        gen_max=_int(raw("gen_max")) if raw("gen_max") is not None else _int(raw("gen_device_max")),
        width_current=_int(raw("width_current")),
        width_max=_int(raw("width_max")),
        slot_gen_max=_int(raw("gen_host_max")),
        replays=_int(raw("replays")),
        replay_rollovers=_int(raw("replay_rollovers")),
    )
    limit = _first(_float(raw("power_limit_enforced")), _float(raw("power_limit_current")), _float(raw("power_limit_requested")))
    draw = _first(_float(raw("power_draw")), _float(raw("power_draw_instant")), _float(raw("power_draw_average")))
    clocks = Clocks(
        events=events,
        graphics_mhz=_int(raw("graphics")),
        memory_mhz=_int(raw("memory")),
        max_graphics_mhz=_int(raw("max_graphics")),
        max_memory_mhz=_int(raw("max_memory")),
        applications_graphics_mhz=_int(raw("app_graphics")),
        applications_memory_mhz=_int(raw("app_memory")),
        default_applications_graphics_mhz=_int(raw("default_app_graphics")),
        default_applications_memory_mhz=_int(raw("default_app_memory")),
        power_limit_w=limit,
        default_power_limit_w=_float(raw("power_default")),
        power_draw_w=draw,
        temperature_c=_int(raw("temperature")),
    )
    memory = MemoryFaults(
        ecc_enabled=_enabled(raw("ecc_mode")),
        uncorrected_volatile=_uncorrected(raw, "volatile"),
        uncorrected_aggregate=_uncorrected(raw, "aggregate"),
        corrected_volatile=_corrected(raw, "volatile"),
        corrected_aggregate=_corrected(raw, "aggregate"),
        retired_pages_sbe=_int(raw("retired_sbe")),
        retired_pages_dbe=_int(raw("retired_dbe")),
        retired_pages_pending=retired_pending,
        remap_pending=_yes(raw("remap_pending")),
        remap_failure=_yes(raw("remap_failure")),
        remapped_correctable=_int(raw("remap_correctable")),
        remapped_uncorrectable=_int(raw("remap_uncorrectable")),
    )
    return GpuReading(
        index=index,
        name=raw("name"),
        uuid=raw("uuid"),
        bus_id=_bus_id(bus_id or raw("bus_id")),
        architecture=raw("architecture"),
        utilization_pct=_int(raw("utilization")),
        memory_used_mib=_mib(raw("fb_used")),
        memory_total_mib=_mib(raw("fb_total")),
        persistence=_enabled(raw("persistence")),
        compute_mode=_compute_mode(raw("compute_mode")),
        mig_enabled=_enabled(raw("mig_current")),
        mig_pending=_enabled(raw("mig_pending")),
        pcie=pcie,
        clocks=clocks,
        memory=memory,
        fabric_state=raw("fabric_state"),
        fabric_status=raw("fabric_status"),
        processes=processes,
        line=line,
    )


def _windows(raw: Raw) -> bool:
    model = raw("driver_model")
    return model is not None and model.lower() in WINDOWS_DRIVER_MODELS


# --- the text report -----------------------------------------------------------------------------

TEXT_LOOKUPS = {name: paths for name, (paths, _tags) in FIELDS.items()}
KNOWN_LABELS = frozenset(path[-1] for paths in TEXT_LOOKUPS.values() for path in paths) | frozenset(EVENTS) | {"processes"}
# a fragment with none of the report's markers is one when one of these sections holds a field
KNOWN_SECTIONS = frozenset(label for paths in TEXT_LOOKUPS.values() for path in paths for label in path[:-1]) | frozenset(EVENT_SECTIONS)
PROCESS_LABELS = ("process id", "name", "used gpu memory")
SUFFIX = 3  # the sections above a label that a lookup may name
MIG_SECTIONS = frozenset({"mig devices", "mig device"})  # a MIG instance's own memory and ECC: not the GPU's


@dataclass
class _Block:
    """One GPU's fields in the text, by (sections above, label) for each suffix of the sections."""

    line: int | None
    bus_id: str | None = None
    fields: dict[tuple[tuple[str, ...], str], str] = field(default_factory=dict)
    kept: int = 0
    events: dict[ClockEvent, bool] = field(default_factory=dict)
    processes_shown: bool = False
    processes: list[list[str | None]] = field(default_factory=list)  # [pid, name, used] in the order shown
    known_section: bool = False

    def add(self, path: tuple[str, ...], label: str, value: str) -> None:
        section = path[-1] if path else ""
        if section in KNOWN_SECTIONS:
            self.known_section = True
        active = _active(value) if section in EVENT_SECTIONS and label in EVENTS else None
        if active is not None:
            self.events.setdefault(EVENTS[label], active)
        if section == "processes" or label == "processes":
            self._process(label, value)
        if label not in KNOWN_LABELS or self.kept >= MAX_FIELDS:
            return
        self.kept += 1
        for size in range(min(SUFFIX, len(path)) + 1):
            self.fields.setdefault((path[len(path) - size :], label), value)

    def _process(self, label: str, value: str) -> None:
        self.processes_shown = True
        if label == "process id" and len(self.processes) < MAX_PROCESSES:
            self.processes.append([value, None, None])
        elif label in PROCESS_LABELS and self.processes:
            self.processes[-1][PROCESS_LABELS.index(label)] = value

    def raw(self, name: str) -> str | None:
        for path in TEXT_LOOKUPS[name]:
            value = self.fields.get((path[:-1], path[-1]))
            if value is not None:
                cleaned = _clean(value)
                if cleaned is not None:
                    return cleaned
        return None

    def retired_pending(self) -> bool | None:
        return _pending_retirement([_clean(self.fields.get((path[:-1], path[-1]))) for path in TEXT_LOOKUPS["retired_pending"]])

    def shown_processes(self) -> tuple[GpuProcess, ...] | None:
        if not self.processes_shown:
            return None
        return tuple(GpuProcess(_int(_clean(pid)), _process_name(name), _mib(_clean(used))) for pid, name, used in self.processes)

    def gpu(self, index: int) -> GpuReading:
        events = frozenset(event for event, active in self.events.items() if active) if self.events else None
        return _gpu(
            index,
            self.raw,
            bus_id=self.bus_id,
            events=events,
            processes=self.shown_processes(),
            retired_pending=self.retired_pending(),
            line=self.line,
        )


def _gpu_header(stripped: str) -> str | None:
    """The bus id of a GPU block's first line, "GPU 00000000:17:00.0" (older drivers: "GPU 0000:17:00.0")."""
    words = stripped.split()
    if len(words) != 2 or words[0] != "GPU":
        return None
    parts = words[1].split(":")
    hexdigits = "0123456789abcdefABCDEF"
    if len(parts) != 3 or "." not in parts[2] or not all(parts):
        return None
    device, _, function = parts[2].partition(".")
    if not all(c in hexdigits for part in (parts[0], parts[1], device, function) for c in part):
        return None
    return words[1]


HOST_LABELS = ("driver version", "kmd version", "attached gpus")


class _TextReport:
    """The report read line by line: GPU blocks start at their "GPU 0000…" line; within one, the open sections are a
    stack of (indent, path to and with the section; None at MAX_DEPTH or inside a MIG device)."""

    def __init__(self) -> None:
        self.preamble = _Block(line=None)  # before the first GPU line: the host's fields, or a fragment's only GPU
        self.blocks: list[_Block] = []
        self.current = self.preamble
        self.stack: list[tuple[int, tuple[str, ...] | None]] = []
        self.marked = False  # "NVSMI LOG" or "Attached GPUs": the report's own head
        self.host: dict[str, str] = {}

    def read(self, number: int, line: str) -> bool:
        """Takes one line; False once no more GPU blocks are taken."""
        stripped = line.strip()
        if not stripped:
            return True
        if self.current is self.preamble and self.preamble.line is None:
            self.preamble.line = number
        if "NVSMI LOG" in stripped:
            self.marked = True
            return True
        bus_id = _gpu_header(stripped)
        if bus_id is not None:
            if len(self.blocks) >= MAX_GPUS:
                return False
            self.current = _Block(line=number, bus_id=bus_id)
            self.blocks.append(self.current)
            self.stack.clear()
            return True
        indent = len(line) - len(line.lstrip())
        while self.stack and self.stack[-1][0] >= indent:
            self.stack.pop()
        parent = self.stack[-1][1] if self.stack else ()
        label, colon, value = stripped.partition(":")
        label = " ".join(label.lower().split())
        if not colon or not value.strip():  # a section: its fields follow, indented
            inner = None if parent is None or len(parent) >= MAX_DEPTH or label in MIG_SECTIONS else (*parent, label)
            self.stack.append((indent, inner))
            if inner is not None and label == "processes":
                self.current.processes_shown = True
        elif parent == () and self.current is self.preamble and label in HOST_LABELS:
            self.host.setdefault(label, value)
            self.marked = self.marked or label == "attached gpus"
        elif parent is not None:
            self.current.add(parent, label, value)
        return True

    def reading(self) -> HostReading | None:
        # every GPU line is a GPU, whatever its block shows (`-q -d VOLTAGE` shows nothing read here); without any,
        # the fragment is one GPU where it holds something read here
        blocks = self.blocks or [block for block in (self.preamble,) if block.kept or block.processes_shown or block.events]
        if not (self.marked or any(block.known_section or (block.bus_id and block.kept) for block in blocks)):
            return None
        gpus = tuple(block.gpu(index) for index, block in enumerate(blocks))
        driver = _version(_clean(self.host.get("kmd version"))) or _version(_clean(self.host.get("driver version")))
        return HostReading(TEXT_KIND, gpus=gpus, driver_version=driver, windows=any(_windows(block.raw) for block in blocks))


def parse_q_text(text: str) -> HostReading | None:
    """The `nvidia-smi -q` report, whole or a fragment (`-q -d PCI`, one section copied by hand, with or without its
    "GPU 0000…" line); None where the text is none of these. A fragment without a GPU line is GPU 0."""
    if len(text) > MAX_INPUT:
        return None
    report = _TextReport()
    for number, line in enumerate(text.split("\n", MAX_LINES), start=1):
        if number > MAX_LINES:  # the unsplit rest
            break
        if line and len(line) <= MAX_LINE and not report.read(number, line.rstrip("\r").expandtabs(4)):
            break
    return report.reading()


# --- the XML -------------------------------------------------------------------------------------


@dataclass
class _Element:
    tag: str
    line: int
    ident: str | None = None
    children: list[_Element] = field(default_factory=list)
    text: str = ""

    def find(self, path: str) -> _Element | None:
        node: _Element | None = self
        for tag in path.split("/"):
            node = next((child for child in node.children if child.tag == tag), None) if node is not None else None
        return node

    def text_of(self, path: str) -> str | None:
        found = self.find(path)
        return found.text if found is not None else None

    def value(self, path: str) -> str | None:
        return _clean(self.text_of(path))


class _Refused(Exception):
    """The XML declares a DTD internal subset or an entity: never expanded."""


def _xml_tree(text: str) -> _Element | None:
    """The document as a bounded tree (MAX_XML_DEPTH levels, MAX_XML_NODES elements, MAX_XML_TEXT characters of
    text each; the long supported-clocks lists left out), each element with its line. A truncated document gives
    what was read before the end; one that declares entities or an internal DTD subset gives None."""
    parser = expat.ParserCreate()
    parser.buffer_text = True
    parser.SetParamEntityParsing(expat.XML_PARAM_ENTITY_PARSING_NEVER)
    stack: list[_Element | None] = []
    roots: list[_Element] = []
    count = 0

    def start(tag: str, attributes: dict[str, str]) -> None:
        nonlocal count
        parent = stack[-1] if stack else None
        node = None
        if not stack and not roots:
            node = _Element(tag, parser.CurrentLineNumber)
            roots.append(node)
        elif parent is not None and len(stack) < MAX_XML_DEPTH and count < MAX_XML_NODES and parent.tag != "supported_clocks":
            node = _Element(tag, parser.CurrentLineNumber, attributes.get("id") if len(stack) == 1 else None)
            parent.children.append(node)
            count += 1
        stack.append(node)

    def end(tag: str) -> None:
        stack.pop()

    def characters(data: str) -> None:
        node = stack[-1] if stack else None
        if node is not None and len(node.text) < MAX_XML_TEXT:
            node.text += data[: MAX_XML_TEXT - len(node.text)]

    def doctype(name: str, system_id: str | None, public_id: str | None, internal_subset: int) -> None:
        if internal_subset:  # nvidia-smi writes `<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v12.dtd">`, no subset
            raise _Refused

    def declared(*_arguments: object) -> None:
        raise _Refused

    parser.StartElementHandler = start
    parser.EndElementHandler = end
    parser.CharacterDataHandler = characters
    parser.StartDoctypeDeclHandler = doctype
    parser.EntityDeclHandler = declared
    parser.UnparsedEntityDeclHandler = declared
    try:
        parser.Parse(text, True)
    except _Refused:
        return None
    except (expat.ExpatError, UnicodeError, RecursionError):
        pass  # truncated or broken: what was read before the fault stands
    return roots[0] if roots else None


def parse_q_xml(text: str) -> HostReading | None:
    """`nvidia-smi -q -x` (<nvidia_smi_log>, DTD versions v10 to v13); None where the text is not that XML, is too
    large, or declares entities. A document cut short gives the GPUs read before the cut."""
    if len(text) > MAX_INPUT or "<!ENTITY" in text:
        return None
    root = _xml_tree(text.lstrip("\ufeff"))
    if root is None or root.tag != "nvidia_smi_log":
        return None
    gpus = []
    windows = False
    for index, element in enumerate(child for child in root.children if child.tag == "gpu"):
        if index >= MAX_GPUS:
            break

        def raw(name: str, element: _Element = element) -> str | None:
            return next((value for value in map(element.value, FIELDS[name][1]) if value is not None), None)

        windows = windows or _windows(raw)
        gpus.append(
            _gpu(
                index,
                raw,
                bus_id=element.ident,
                events=_xml_events(element),
                processes=_xml_processes(element),
                retired_pending=_pending_retirement([element.value(path) for path in FIELDS["retired_pending"][1]]),
                line=element.line,
            )
        )
    driver = _version(root.value("kmd_version")) or _version(root.value("driver_version"))
    return HostReading(XML_KIND, gpus=tuple(gpus), driver_version=driver, windows=windows)


def _xml_events(gpu: _Element) -> frozenset[ClockEvent] | None:
    section = next((found for found in map(gpu.find, XML_EVENT_SECTIONS) if found is not None), None)
    if section is None:
        return None
    shown: dict[ClockEvent, bool] = {}
    for child in section.children:
        event = EVENT_NAMES.get(child.tag.partition("_reason_")[2])
        active = _active(_clean(child.text))
        if event is not None and active is not None:
            shown.setdefault(event, active)
    return frozenset(event for event, active in shown.items() if active) if shown else None


def _xml_processes(gpu: _Element) -> tuple[GpuProcess, ...] | None:
    section = gpu.find("processes")
    if section is None:
        return None
    return tuple(
        GpuProcess(_int(info.value("pid")), _process_name(info.text_of("process_name")), _mib(info.value("used_memory")))
        for info in section.children[:MAX_PROCESSES]
        if info.tag == "process_info"
    )
