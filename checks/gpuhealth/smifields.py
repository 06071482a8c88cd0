"""The raw fields of an `nvidia-smi -q` report (FIELDS: the text report's labels and the XML's tags for
each) and the one conversion of them into a GpuReading, shared by smiquery.py's two readers, so a value
means the same whichever form it came in. A field the capture does not show, or shows as N/A,
deprecated or not supported, stays None.
"""

from __future__ import annotations

from collections.abc import Callable

from .pasted import bus_id as pci_bus_id
from .pasted import unavailable
from .reading import ClockEvent, Clocks, ComputeMode, GpuProcess, GpuReading, MemoryFaults, PcieLink

# what `-q` prints, without brackets, where a value is not there, beyond the words every capture shares
# (pasted.unavailable: "N/A", "Not Supported", "Unknown Error" …)
Q_UNAVAILABLE = frozenset(
    {
        "requested functionality has been deprecated",
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


def clean(raw: str | None) -> str | None:
    """A value without the note drivers add ("610.57.04 [Deprecated; …]"); None where the field is not shown:
    N/A, [N/A], [Not Supported], deprecated, Unknown Error."""
    if raw is None:
        return None
    value = raw.strip()
    if not value or value.startswith("["):
        return None
    value = value.split(" [", 1)[0].strip()
    return None if unavailable(value) or value.lower() in Q_UNAVAILABLE else value


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


def as_int(value: str | None) -> int | None:
    """ "16x" → 16, "5" → 5, "2619 MHz" → 2619, "0 %" → 0, "41 C" → 41."""
    found = _number_prefix(value, decimals=False)
    return int(found[0]) if found else None


def _float(value: str | None) -> float | None:
    """ "700.00 W" → 700.0."""
    found = _number_prefix(value, decimals=True)
    return float(found[0]) if found else None


MIB_PER_UNIT = {"": 1.0, "mib": 1.0, "gib": 1024.0, "kib": 1 / 1024}


def mib(value: str | None) -> int | None:
    """ "81559 MiB" → 81559."""
    found = _number_prefix(value, decimals=True)
    if found is None:
        return None
    scale = MIB_PER_UNIT.get(found[1].strip().lower())
    return None if scale is None else int(float(found[0]) * scale)


def process_name(raw: str | None) -> str:
    """A process's name as shown ("[kworker]" and "C:\\Windows\\explorer.exe" whole); "" where it is not shown."""
    value = (raw or "").strip()
    bare = value.strip("[]")
    return "" if unavailable(bare) or bare.lower() in Q_UNAVAILABLE else value


def _flag(value: str | None, yes: str, no: str) -> bool | None:
    if value is None:
        return None
    word = value.strip().lower()
    return True if word == yes else False if word == no else None


def _enabled(value: str | None) -> bool | None:
    return _flag(value, "enabled", "disabled")


def _yes(value: str | None) -> bool | None:
    return _flag(value, "yes", "no")


def active_flag(value: str | None) -> bool | None:
    return _flag(value, "active", "not active")


def version_number(value: str | None) -> str | None:
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
    sram = _total(as_int(raw(f"{scope}_sram_unc_parity")), as_int(raw(f"{scope}_sram_unc_secded")))
    if sram is None:
        sram = as_int(raw(f"{scope}_sram_unc"))
    new = _total(as_int(raw(f"{scope}_dram_unc")), sram)
    if new is not None:
        return new
    return as_int(raw(f"{scope}_dbe_total")) if raw(f"{scope}_dbe_total") is not None else as_int(raw(f"{scope}_dbe_device"))


def _corrected(raw: Raw, scope: str) -> int | None:
    new = _total(as_int(raw(f"{scope}_dram_cor")), as_int(raw(f"{scope}_sram_cor")))
    if new is not None:
        return new
    return as_int(raw(f"{scope}_sbe_total")) if raw(f"{scope}_sbe_total") is not None else as_int(raw(f"{scope}_sbe_device"))


def pending_retirement(shown: list[str | None]) -> bool | None:
    flags = [_yes(value) for value in shown]
    return True if True in flags else False if False in flags else None


def _compute_mode(value: str | None) -> ComputeMode | None:
    return COMPUTE_MODES.get(value.strip().lower().replace(" ", "_")) if value else None


def gpu_reading(
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
        gen_current=as_int(raw("gen_current")),
        # "Max" is NVML's max link generation: the GPU's, bounded by the system; the GPU's own ("Device Max")
        # only where "Max" is not shown
        gen_max=as_int(raw("gen_max")) if raw("gen_max") is not None else as_int(raw("gen_device_max")),
        width_current=as_int(raw("width_current")),
        width_max=as_int(raw("width_max")),
        slot_gen_max=as_int(raw("gen_host_max")),
        replays=as_int(raw("replays")),
        replay_rollovers=as_int(raw("replay_rollovers")),
    )
    limit = _first(_float(raw("power_limit_enforced")), _float(raw("power_limit_current")), _float(raw("power_limit_requested")))
    draw = _first(_float(raw("power_draw")), _float(raw("power_draw_instant")), _float(raw("power_draw_average")))
    clocks = Clocks(
        events=events,
        graphics_mhz=as_int(raw("graphics")),
        memory_mhz=as_int(raw("memory")),
        max_graphics_mhz=as_int(raw("max_graphics")),
        max_memory_mhz=as_int(raw("max_memory")),
        applications_graphics_mhz=as_int(raw("app_graphics")),
        applications_memory_mhz=as_int(raw("app_memory")),
        default_applications_graphics_mhz=as_int(raw("default_app_graphics")),
        default_applications_memory_mhz=as_int(raw("default_app_memory")),
        power_limit_w=limit,
        default_power_limit_w=_float(raw("power_default")),
        power_draw_w=draw,
        temperature_c=as_int(raw("temperature")),
    )
    memory = MemoryFaults(
        ecc_enabled=_enabled(raw("ecc_mode")),
        uncorrected_volatile=_uncorrected(raw, "volatile"),
        uncorrected_aggregate=_uncorrected(raw, "aggregate"),
        corrected_volatile=_corrected(raw, "volatile"),
        corrected_aggregate=_corrected(raw, "aggregate"),
        retired_pages_sbe=as_int(raw("retired_sbe")),
        retired_pages_dbe=as_int(raw("retired_dbe")),
        retired_pages_pending=retired_pending,
        remap_pending=_yes(raw("remap_pending")),
        remap_failure=_yes(raw("remap_failure")),
        remapped_correctable=as_int(raw("remap_correctable")),
        remapped_uncorrectable=as_int(raw("remap_uncorrectable")),
    )
    return GpuReading(
        index=index,
        name=raw("name"),
        uuid=raw("uuid"),
        bus_id=pci_bus_id(bus_id or raw("bus_id")),
        architecture=raw("architecture"),
        utilization_pct=as_int(raw("utilization")),
        memory_used_mib=mib(raw("fb_used")),
        memory_total_mib=mib(raw("fb_total")),
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


def windows_driver(raw: Raw) -> bool:
    model = raw("driver_model")
    return model is not None and model.lower() in WINDOWS_DRIVER_MODELS
