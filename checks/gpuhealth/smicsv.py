"""`nvidia-smi --query-gpu=… --format=csv` and `--query-compute-apps=… --format=csv` as a HostReading.

The header names the columns: nvidia-smi prints each field's canonical name with its unit
("clocks.current.memory [MHz]" for a query of `clocks.mem`), so both the names a query is written with
and the names the header prints are read here. `nounits` drops the units from values, not from names.

Without a header (`noheader`) a column is used only where its values say what it is by their form (a
GPU UUID, a PCI bus id, a product name, a three-part driver version); every other column is left
unread, and a text where no column can be told is not read at all (None) rather than guessed.

A --query-compute-apps CSV alone gives a reading whose GPUs carry only what its rows show (name, UUID,
bus id) and their processes, in the order each GPU first appears (that order is not nvidia-smi's index).
A reader combining it with another capture of the same host matches its GPUs by bus id (then UUID, never
by that order) and gives every GPU the CSV does not list an empty process list: the CSV lists every
compute process on every GPU (captures.py does this for a paste holding both).

PCIe replay counters are not queryable as CSV fields; they stay None.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace

from .pasted import MAX_GPUS, MAX_PROCESSES, bounded_lines, bus_id, leading_int, leading_number, strip_ansi, unavailable
from .reading import EVENT_NAMES, ClockEvent, Clocks, ComputeMode, GpuProcess, GpuReading, HostReading, MemoryFaults, PcieLink

QUERY_GPU = "nvidia-smi --query-gpu CSV"
COMPUTE_APPS = "nvidia-smi --query-compute-apps CSV"

# query name → the name the header prints (where they differ)
ALIASES = {
    "gpu_name": "name",
    "gpu_bus_id": "pci.bus_id",
    "gpu_uuid": "uuid",
    "gpu_serial": "serial",
    "used_memory": "used_gpu_memory",
    "clocks.gr": "clocks.current.graphics",
    "clocks.sm": "clocks.current.sm",
    "clocks.mem": "clocks.current.memory",
    "clocks.video": "clocks.current.video",
    "clocks.max.gr": "clocks.max.graphics",
    "clocks.max.mem": "clocks.max.memory",
    "clocks.applications.gr": "clocks.applications.graphics",
    "clocks.applications.mem": "clocks.applications.memory",
    "clocks.default_applications.gr": "clocks.default_applications.graphics",
    "clocks.default_applications.mem": "clocks.default_applications.memory",
    "retired_pages.sbe": "retired_pages.single_bit_ecc.count",
    "retired_pages.dbe": "retired_pages.double_bit.count",
    "inforom.image": "inforom.img",
    "inforom.power": "inforom.pwr",
}
THROTTLE_PREFIX = "clocks_throttle_reasons."  # drivers before 535
EVENT_PREFIX = "clocks_event_reasons."
EVENT_BITS = {  # NVML's clocks event reason bits, for `clocks_event_reasons.active` alone
    0x1: ClockEvent.IDLE,
    0x2: ClockEvent.APPLICATIONS_CLOCKS,
    0x4: ClockEvent.SW_POWER_CAP,
    0x8: ClockEvent.HW_SLOWDOWN,
    0x10: ClockEvent.SYNC_BOOST,
    0x20: ClockEvent.SW_THERMAL,
    0x40: ClockEvent.HW_THERMAL,
    0x80: ClockEvent.HW_POWER_BRAKE,
    0x100: ClockEvent.DISPLAY_CLOCKS,
}
COMPUTE_MODES = {
    "default": ComputeMode.DEFAULT,
    "exclusive_thread": ComputeMode.EXCLUSIVE_THREAD,
    "prohibited": ComputeMode.PROHIBITED,
    "exclusive_process": ComputeMode.EXCLUSIVE_PROCESS,
}
WINDOWS_DRIVER_MODELS = {"wddm", "tcc", "mcdm"}
# Names a header is recognised by (besides the fields read below and the event reasons): common ones
# that are read for nothing, so a CSV of only such fields is still known to be nvidia-smi's.
OTHER_KNOWN = frozenset(
    {
        "timestamp",
        "driver_version",
        "kmd_version",
        "count",
        "serial",
        "vbios_version",
        "pstate",
        "compute_cap",
        "fan.speed",
        "display_mode",
        "display_active",
        "display_attached",
        "pci.domain",
        "pci.bus",
        "pci.device",
        "pci.device_id",
        "pci.sub_device_id",
        "utilization.memory",
        "memory.free",
        "memory.reserved",
        "ecc.mode.pending",
        "driver_model.pending",
        "power.min_limit",
        "power.max_limit",
        "power.management",
        "clocks.current.video",
        "clocks.current.sm",
        "clocks.max.sm",
        "temperature.memory",
        "process_name",
        "pid",
        "used_gpu_memory",
    }
)

_FIELD_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_.]{0,120}")
_UNIT = re.compile(r"\s\[[^\]]{1,16}\]")  # " [MiB]" after a field name in the header
_UUID = re.compile(r"(?:GPU|MIG)-[0-9a-fA-F-]{8,60}")
_THREE_PART_VERSION = re.compile(r"\d{3}\.\d{1,3}\.\d{1,3}")
_PRODUCT = ("NVIDIA ", "Tesla ", "Quadro ", "GeForce ", "TITAN ", "GRID ", "Graphics Device")


def canonical(name: str) -> str:
    """A header cell or query name as the name this module reads it by ("clocks.mem" and
    "clocks.current.memory [MHz]" are both "clocks.current.memory")."""
    bare = _UNIT.sub("", name).strip()
    lowered = bare.lower()
    if lowered.startswith(THROTTLE_PREFIX):
        lowered = EVENT_PREFIX + lowered[len(THROTTLE_PREFIX) :]
    return ALIASES.get(lowered, lowered)


def _readers() -> dict[str, Callable[[_Row, str], None]]:
    return {
        "index": lambda row, v: row.set("index", leading_int(v)),
        "name": lambda row, v: row.set("name", None if unavailable(v) else v.strip()),
        "uuid": lambda row, v: row.set("uuid", None if unavailable(v) else v.strip()),
        "pci.bus_id": lambda row, v: row.set("bus_id", bus_id(v)),
        "persistence_mode": lambda row, v: row.set("persistence", _on(v)),
        "compute_mode": lambda row, v: row.set("compute_mode", COMPUTE_MODES.get(v.strip().lower().replace(" ", "_"))),
        "mig.mode.current": lambda row, v: row.set("mig_enabled", _on(v)),
        "mig.mode.pending": lambda row, v: row.set("mig_pending", _on(v)),
        "utilization.gpu": lambda row, v: row.set("utilization_pct", leading_int(v)),
        "memory.used": lambda row, v: row.set("memory_used_mib", leading_int(v)),
        "memory.total": lambda row, v: row.set("memory_total_mib", leading_int(v)),
        "fabric.state": lambda row, v: row.set("fabric_state", None if unavailable(v) else v.strip()),
        "fabric.status": lambda row, v: row.set("fabric_status", None if unavailable(v) else v.strip()),
        "driver_model.current": lambda row, v: row.set("driver_model", None if unavailable(v) else v.strip()),
        "pcie.link.gen.current": lambda row, v: row.set("pcie.gen_current", leading_int(v)),
        "pcie.link.gen.gpucurrent": lambda row, v: row.set("pcie.gen_gpucurrent", leading_int(v)),
        "pcie.link.gen.max": lambda row, v: row.set("pcie.gen_max", leading_int(v)),
        "pcie.link.gen.gpumax": lambda row, v: row.set("pcie.gen_gpumax", leading_int(v)),
        "pcie.link.gen.hostmax": lambda row, v: row.set("pcie.slot_gen_max", leading_int(v)),
        "pcie.link.width.current": lambda row, v: row.set("pcie.width_current", leading_int(v)),
        "pcie.link.width.max": lambda row, v: row.set("pcie.width_max", leading_int(v)),
        "clocks.current.graphics": lambda row, v: row.set("clocks.graphics_mhz", leading_int(v)),
        "clocks.current.memory": lambda row, v: row.set("clocks.memory_mhz", leading_int(v)),
        "clocks.max.graphics": lambda row, v: row.set("clocks.max_graphics_mhz", leading_int(v)),
        "clocks.max.memory": lambda row, v: row.set("clocks.max_memory_mhz", leading_int(v)),
        "clocks.applications.graphics": lambda row, v: row.set("clocks.applications_graphics_mhz", leading_int(v)),
        "clocks.applications.memory": lambda row, v: row.set("clocks.applications_memory_mhz", leading_int(v)),
        "clocks.default_applications.graphics": lambda row, v: row.set("clocks.default_applications_graphics_mhz", leading_int(v)),
        "clocks.default_applications.memory": lambda row, v: row.set("clocks.default_applications_memory_mhz", leading_int(v)),
        "power.limit": lambda row, v: row.set("clocks.power_limit", leading_number(v)),
        "enforced.power.limit": lambda row, v: row.set("clocks.enforced_power_limit", leading_number(v)),
        "power.default_limit": lambda row, v: row.set("clocks.default_power_limit_w", leading_number(v)),
        "power.draw": lambda row, v: row.set("clocks.power_draw_w", leading_number(v)),
        "temperature.gpu": lambda row, v: row.set("clocks.temperature_c", leading_int(v)),
        "clocks_event_reasons.active": lambda row, v: row.set("events_mask", _hex(v)),
        "ecc.mode.current": lambda row, v: row.set("memory.ecc_enabled", _on(v)),
        "ecc.errors.uncorrected.volatile.total": lambda row, v: row.set("memory.uncorrected_volatile", leading_int(v)),
        "ecc.errors.uncorrected.aggregate.total": lambda row, v: row.set("memory.uncorrected_aggregate", leading_int(v)),
        "ecc.errors.corrected.volatile.total": lambda row, v: row.set("memory.corrected_volatile", leading_int(v)),
        "ecc.errors.corrected.aggregate.total": lambda row, v: row.set("memory.corrected_aggregate", leading_int(v)),
        "retired_pages.single_bit_ecc.count": lambda row, v: row.set("memory.retired_pages_sbe", leading_int(v)),
        "retired_pages.double_bit.count": lambda row, v: row.set("memory.retired_pages_dbe", leading_int(v)),
        "retired_pages.pending": lambda row, v: row.set("memory.retired_pages_pending", _on(v)),
        "remapped_rows.pending": lambda row, v: row.set("memory.remap_pending", _on(v)),
        "remapped_rows.failure": lambda row, v: row.set("memory.remap_failure", _on(v)),
        "remapped_rows.correctable": lambda row, v: row.set("memory.remapped_correctable", leading_int(v)),
        "remapped_rows.uncorrectable": lambda row, v: row.set("memory.remapped_uncorrectable", leading_int(v)),
    }


READERS = _readers()
KNOWN = frozenset(READERS) | OTHER_KNOWN | {EVENT_PREFIX + name for name in EVENT_NAMES} | {"clocks_event_reasons.supported"}


def _on(value: str) -> bool | None:
    word = value.strip().lower()
    if word in ("enabled", "yes", "on", "active", "true"):
        return True
    if word in ("disabled", "no", "off", "not active", "false"):
        return False
    return None


def _hex(value: str) -> int | None:
    text = value.strip().lower()
    if not text.startswith("0x") or not 2 < len(text) <= 18:
        return None
    try:
        return int(text, 16)
    except ValueError:
        return None


@dataclass
class _Row:
    """The values one CSV row showed, by the reading's field names ("pcie.gen_max" for nested ones)."""

    line: int
    values: dict[str, object] = field(default_factory=dict)
    events: dict[ClockEvent, bool] = field(default_factory=dict)

    def set(self, key: str, value: object) -> None:
        if value is not None:
            self.values[key] = value

    def get_int(self, key: str) -> int | None:
        value = self.values.get(key)
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    def get_float(self, key: str) -> float | None:
        value = self.values.get(key)
        return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None

    def get_bool(self, key: str) -> bool | None:
        value = self.values.get(key)
        return value if isinstance(value, bool) else None

    def get_str(self, key: str) -> str | None:
        value = self.values.get(key)
        return value if isinstance(value, str) else None

    def get_mode(self) -> ComputeMode | None:
        value = self.values.get("compute_mode")
        return value if isinstance(value, ComputeMode) else None


def _cells(line: str) -> list[str]:
    for row in csv.reader([line], skipinitialspace=True):
        return [cell.strip() for cell in row]
    return []


def header_columns(line: str) -> list[str] | None:
    """The canonical column names when the line is an nvidia-smi CSV header, else None: every cell
    is a field name (with an optional unit) and at least one is a name this module knows."""
    if not line[:1].isalpha() or ("," not in line and "." not in line and "_" not in line):
        return None
    cells = [cell.strip() for cell in strip_ansi(line).split(",")]  # field names hold no comma or quote
    if len(cells) > 1000:
        return None
    names = [canonical(cell) for cell in cells]
    if not all(_FIELD_NAME.fullmatch(_UNIT.sub("", cell).strip()) for cell in cells):
        return None
    return names if any(name in KNOWN for name in names) else None


def parse_query_csv(text: str) -> HostReading | None:
    """A --query-gpu or --query-compute-apps CSV (with or without header and units, Windows line
    endings, quoted names) as a HostReading; None when the text is not one or its columns cannot be told."""
    lines: list[tuple[int, str]] = []
    for number, raw in enumerate(bounded_lines(text.lstrip("\ufeff")), 1):
        line = strip_ansi(raw).strip()
        if line:
            lines.append((number, line))
            if len(lines) > MAX_PROCESSES:  # the header and as many rows as are ever read
                break
    if not lines:
        return None
    first = lines[0][1]
    columns = header_columns(first)
    if columns is None:
        return _headerless(lines)
    rows = [(number, cells) for number, line in lines[1:] if len(cells := _cells(line)) == len(columns)]
    if "pid" in columns:
        if "process_name" not in columns and "used_gpu_memory" not in columns:
            return None  # --query-accounted-apps or another per-process query: not read here
        return _compute_apps(columns, rows)
    gpus = [_gpu(columns, cells, number, position) for position, (number, cells) in enumerate(rows[:MAX_GPUS])]
    if not gpus:
        return None
    driver = next((cells[columns.index("driver_version")] for _, cells in rows if "driver_version" in columns), None)
    windows = any((row_model or "").lower() in WINDOWS_DRIVER_MODELS for row_model in (_driver_model(columns, cells) for _, cells in rows))
    return HostReading(QUERY_GPU, gpus=tuple(gpus), driver_version=None if unavailable(driver) else driver, windows=windows)


def _driver_model(columns: list[str], cells: list[str]) -> str | None:
    if "driver_model.current" not in columns:
        return None
    value = cells[columns.index("driver_model.current")]
    return None if unavailable(value) else value


def _gpu(columns: list[str], cells: list[str], line: int, position: int) -> GpuReading:
    row = _Row(line)
    for name, value in zip(columns, cells, strict=True):
        reader = READERS.get(name)
        if reader is not None and not unavailable(value):
            reader(row, value)
        elif name.startswith(EVENT_PREFIX) and name[len(EVENT_PREFIX) :] in EVENT_NAMES:
            state = _on(value)
            if state is not None:
                row.events[EVENT_NAMES[name[len(EVENT_PREFIX) :]]] = state
    return _reading(row, position)


def _events(row: _Row) -> frozenset[ClockEvent] | None:
    if row.events:
        return frozenset(event for event, active in row.events.items() if active)
    mask = row.get_int("events_mask")
    if mask is None:
        return None
    return frozenset(event for bit, event in EVENT_BITS.items() if mask & bit)


def _reading(row: _Row, position: int) -> GpuReading:
    index = row.get_int("index")
    gpu_max = row.get_int("pcie.gen_gpumax")  # the GPU's own; "max" is capped by the host on new drivers
    pcie = PcieLink(
        gen_current=row.get_int("pcie.gen_current") if row.get_int("pcie.gen_current") is not None else row.get_int("pcie.gen_gpucurrent"),
        gen_max=gpu_max if gpu_max is not None else row.get_int("pcie.gen_max"),
        width_current=row.get_int("pcie.width_current"),
        width_max=row.get_int("pcie.width_max"),
        slot_gen_max=row.get_int("pcie.slot_gen_max"),
    )
    enforced = row.get_float("clocks.enforced_power_limit")
    clocks = Clocks(
        events=_events(row),
        graphics_mhz=row.get_int("clocks.graphics_mhz"),
        memory_mhz=row.get_int("clocks.memory_mhz"),
        max_graphics_mhz=row.get_int("clocks.max_graphics_mhz"),
        max_memory_mhz=row.get_int("clocks.max_memory_mhz"),
        applications_graphics_mhz=row.get_int("clocks.applications_graphics_mhz"),
        applications_memory_mhz=row.get_int("clocks.applications_memory_mhz"),
        default_applications_graphics_mhz=row.get_int("clocks.default_applications_graphics_mhz"),
        default_applications_memory_mhz=row.get_int("clocks.default_applications_memory_mhz"),
        power_limit_w=enforced if enforced is not None else row.get_float("clocks.power_limit"),
        default_power_limit_w=row.get_float("clocks.default_power_limit_w"),
        power_draw_w=row.get_float("clocks.power_draw_w"),
        temperature_c=row.get_int("clocks.temperature_c"),
    )
    memory = MemoryFaults(
        ecc_enabled=row.get_bool("memory.ecc_enabled"),
        uncorrected_volatile=row.get_int("memory.uncorrected_volatile"),
        uncorrected_aggregate=row.get_int("memory.uncorrected_aggregate"),
        corrected_volatile=row.get_int("memory.corrected_volatile"),
        corrected_aggregate=row.get_int("memory.corrected_aggregate"),
        retired_pages_sbe=row.get_int("memory.retired_pages_sbe"),
        retired_pages_dbe=row.get_int("memory.retired_pages_dbe"),
        retired_pages_pending=row.get_bool("memory.retired_pages_pending"),
        remap_pending=row.get_bool("memory.remap_pending"),
        remap_failure=row.get_bool("memory.remap_failure"),
        remapped_correctable=row.get_int("memory.remapped_correctable"),
        remapped_uncorrectable=row.get_int("memory.remapped_uncorrectable"),
    )
    windows = (row.get_str("driver_model") or "").lower() in WINDOWS_DRIVER_MODELS
    return GpuReading(
        index=index if index is not None else position,
        name=row.get_str("name"),
        uuid=row.get_str("uuid"),
        bus_id=row.get_str("bus_id"),
        utilization_pct=row.get_int("utilization_pct"),
        memory_used_mib=row.get_int("memory_used_mib"),
        memory_total_mib=row.get_int("memory_total_mib"),
        persistence=None if windows else row.get_bool("persistence"),
        compute_mode=row.get_mode(),
        mig_enabled=row.get_bool("mig_enabled"),
        mig_pending=row.get_bool("mig_pending"),
        pcie=pcie,
        clocks=clocks,
        memory=memory,
        fabric_state=row.get_str("fabric_state"),
        fabric_status=row.get_str("fabric_status"),
        line=row.line,
    )


def _compute_apps(columns: list[str], rows: Iterable[tuple[int, list[str]]]) -> HostReading:
    """Processes grouped per GPU (by bus id, else UUID), the GPUs in the order they first appear."""
    groups: dict[str, tuple[GpuReading, list[GpuProcess]]] = {}
    for count, (number, cells) in enumerate(rows):
        if count >= MAX_PROCESSES:
            break
        value = dict(zip(columns, cells, strict=True))
        bus = bus_id(value.get("pci.bus_id"))
        uuid = None if unavailable(value.get("uuid")) else value.get("uuid")
        key = bus or uuid or ""
        if key not in groups:
            if len(groups) >= MAX_GPUS:
                continue
            name = value.get("name")
            gpu = GpuReading(index=len(groups), name=None if unavailable(name) else name, uuid=uuid, bus_id=bus, line=number)
            groups[key] = (gpu, [])
        process_name = value.get("process_name")
        groups[key][1].append(
            GpuProcess(
                pid=leading_int(value.get("pid")),
                name="" if unavailable(process_name) else (process_name or ""),
                used_mib=leading_int(value.get("used_gpu_memory")),
            )
        )
    gpus = tuple(replace(gpu, processes=tuple(processes)) for gpu, processes in groups.values())
    return HostReading(COMPUTE_APPS, gpus=gpus)


def _headerless(lines: list[tuple[int, str]]) -> HostReading | None:
    """A `noheader` CSV: only columns whose every value says what it is are read."""
    rows = [(number, _cells(line)) for number, line in lines[:MAX_GPUS]]
    width = len(rows[0][1])  # a headerless CSV's first row is data too
    if width < 1 or any(len(cells) != width for _, cells in rows):
        return None
    kinds = [_column_kind([cells[column] for _, cells in rows]) for column in range(width)]
    if not any(kind in ("name", "uuid", "bus_id") for kind in kinds):
        return None
    gpus = []
    for position, (number, cells) in enumerate(rows):
        found = {kind: cells[column] for column, kind in enumerate(kinds) if kind is not None}
        gpus.append(
            GpuReading(
                index=position,
                name=found.get("name"),
                uuid=found.get("uuid"),
                bus_id=bus_id(found.get("bus_id")),
                line=number,
            )
        )
    driver = next((cells[kinds.index("driver_version")] for _, cells in rows if "driver_version" in kinds), None)
    return HostReading(QUERY_GPU, gpus=tuple(gpus), driver_version=driver)


def _column_kind(values: list[str]) -> str | None:
    if all(_UUID.fullmatch(value) for value in values):
        return "uuid"
    if all(bus_id(value) is not None and ":" in value for value in values):
        return "bus_id"
    if all(value.startswith(_PRODUCT) for value in values):
        return "name"
    if all(_THREE_PART_VERSION.fullmatch(value) for value in values):
        return "driver_version"
    return None
