"""The live reading: NVML (nvidia-ml-py) for each GPU, sysfs for the slot above it and the bus.

NVML answers only for this machine: for another host's files (--root without --same-host) it is never
loaded, and only what sysfs under the root shows is read. Each NVML call may be missing (an old
driver: FunctionNotFound) or not apply to the part (NotSupported): that field is then None.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from dataclasses import dataclass, replace
from types import ModuleType
from typing import Any

from decode_doctor.engine import Context
from decode_doctor.i18n import _

from .reading import ClockEvent, Clocks, ComputeMode, GpuProcess, GpuReading, HostReading, MemoryFaults, NvLink, PcieLink
from .sysfs import Bus, canonical_bus_id, fabric_manager_running, link_known, read_attribute, read_bus

MIB = 1 << 20
# NVML's clocks event reasons (nvmlClocksEventReason*, formerly nvmlClocksThrottleReason*): the names the
# binding gives each bit, and the bit itself where an old binding lacks the name (the values are NVML's ABI)
EVENT_BITS = (
    ("GpuIdle", 0x1, ClockEvent.IDLE),
    ("ApplicationsClocksSetting", 0x2, ClockEvent.APPLICATIONS_CLOCKS),
    ("SwPowerCap", 0x4, ClockEvent.SW_POWER_CAP),
    ("HwSlowdown", 0x8, ClockEvent.HW_SLOWDOWN),
    ("SyncBoost", 0x10, ClockEvent.SYNC_BOOST),
    ("SwThermalSlowdown", 0x20, ClockEvent.SW_THERMAL),
    ("HwThermalSlowdown", 0x40, ClockEvent.HW_THERMAL),
    ("HwPowerBrakeSlowdown", 0x80, ClockEvent.HW_POWER_BRAKE),
    ("DisplayClockSetting", 0x100, ClockEvent.DISPLAY_CLOCKS),
)
COMPUTE_MODES = {0: ComputeMode.DEFAULT, 1: ComputeMode.EXCLUSIVE_THREAD, 2: ComputeMode.PROHIBITED, 3: ComputeMode.EXCLUSIVE_PROCESS}
FABRIC_STATES = {0: "Not Supported", 1: "Not Started", 2: "In Progress", 3: "Completed"}
FABRIC_COMPLETED = 3
MAX_NVLINKS = 36  # NVML_NVLINK_MAX_LINKS where the binding does not say
MAX_PROCESSES = 256  # compute processes named per GPU


class Nvml:
    """nvidia-ml-py, initialised: each call gives its value, or None where NVML does not answer."""

    def __init__(self, module: ModuleType) -> None:
        self.module = module
        self.failures: tuple[type[BaseException], ...] = (
            module.NVMLError,
            getattr(module, "NVMLLibraryMismatchError", module.NVMLError),  # an unversioned call the library lacks
            ctypes.ArgumentError,
        )

    def constant(self, name: str, default: int) -> int:
        value = getattr(self.module, name, default)
        return value if isinstance(value, int) else default

    def call(self, name: str, *args: Any) -> Any:
        function: Callable[..., Any] | None = getattr(self.module, name, None)
        if function is None:  # a binding older than the call
            return None
        try:
            return function(*args)
        except self.failures:
            return None

    def text(self, name: str, *args: Any) -> str | None:
        value = self.call(name, *args)
        if isinstance(value, bytes):
            value = value.decode("utf-8", errors="replace")
        return value.strip() if isinstance(value, str) and value.strip() else None

    def number(self, name: str, *args: Any) -> int | None:
        return _int(self.call(name, *args))


@dataclass(frozen=True)
class NvmlHost:
    driver: str | None
    gpus: tuple[GpuReading, ...]


def read_live(ctx: Context) -> HostReading | str:
    """This host's GPUs as NVML and sysfs show them; "" where there is no NVIDIA GPU at all, or why
    they are there and cannot be read."""
    bus = read_bus(ctx)
    driver_loaded = ctx.host_path("/proc/driver/nvidia").is_dir()
    present = bool(bus.pci_gpus) or driver_loaded
    if not ctx.live_devices:
        return _from_sysfs(ctx, bus, ctx.elsewhere.text()) if present else ""
    nvml = read_nvml(ctx)
    if isinstance(nvml, str):
        return _from_sysfs(ctx, bus, nvml) if present else ""
    if not nvml.gpus:
        return _from_sysfs(ctx, bus, _("NVML shows no GPU")) if present else ""
    links = bus.gpus or {}
    return HostReading(
        "NVML",
        gpus=tuple(replace(gpu, pcie=_pcie(gpu.pcie, links.get(gpu.bus_id or ""))) for gpu in nvml.gpus),
        driver_version=nvml.driver,
        pci_gpus=bus.pci_gpus,
        visible_devices=_visible_devices(ctx),
        nvswitches=bus.nvswitches,
        fabric_manager_running=fabric_manager_running(ctx) if bus.nvswitches else None,
    )


def _visible_devices(ctx: Context) -> str | None:
    """What hides GPUs from NVML in this process: the container runtime's NVIDIA_VISIBLE_DEVICES (not
    "all"). CUDA_VISIBLE_DEVICES is CUDA's alone: NVML lists every GPU whatever it says."""
    value = ctx.env.get("NVIDIA_VISIBLE_DEVICES", "").strip()
    return value if value and value.lower() != "all" else None


def _from_sysfs(ctx: Context, bus: Bus, why: str) -> HostReading | str:
    """The links sysfs shows, where NVML cannot answer (why); why alone where sysfs shows no link."""
    links = bus.gpus or {}
    if not any(link_known(link) for link in links.values()):
        return why
    ctx.not_judged(_("the NVIDIA GPUs' clocks, memory faults, modes, NVLinks, fabric and processes (NVML)"), why)
    gpus = tuple(GpuReading(index, bus_id=address, pcie=_pcie(None, link)) for index, (address, link) in enumerate(links.items()))
    return HostReading("sysfs", gpus=gpus, pci_gpus=bus.pci_gpus, nvswitches=bus.nvswitches)


def _pcie(nvml: PcieLink | None, link: PcieLink | None) -> PcieLink:
    """NVML's values where it gave them (read now), sysfs's for the rest and for the slot."""
    ours = nvml or PcieLink()
    sysfs = link or PcieLink()
    return PcieLink(
        gen_current=ours.gen_current if ours.gen_current is not None else sysfs.gen_current,
        gen_max=ours.gen_max if ours.gen_max is not None else sysfs.gen_max,
        width_current=ours.width_current if ours.width_current is not None else sysfs.width_current,
        width_max=ours.width_max if ours.width_max is not None else sysfs.width_max,
        slot_gen_max=sysfs.slot_gen_max,
        slot_width_max=sysfs.slot_width_max,
        replays=ours.replays,
        replay_rollovers=ours.replay_rollovers,
    )


def read_nvml(ctx: Context) -> NvmlHost | str:
    try:
        import pynvml
    except ImportError:
        return _("nvidia-ml-py (the gpu extra) is not installed: NVML cannot be asked")
    if not isinstance(getattr(pynvml, "NVMLError", None), type):  # another module of that name (the old pynvml package)
        return _("the pynvml module here is not nvidia-ml-py (it has no NVMLError): NVML cannot be asked")
    try:
        pynvml.nvmlInit()
    except (pynvml.NVMLError, OSError) as exc:  # no driver, no library, a driver/library mismatch
        return _("NVML did not initialise: {error}", error=str(exc) or type(exc).__name__)
    try:
        nvml = Nvml(pynvml)
        driver = nvml.text("nvmlSystemGetDriverVersion")
        count = nvml.number("nvmlDeviceGetCount")
        if count is None:
            return _("NVML did not count the GPUs")
        gpus = []
        for index in range(count):
            handle = nvml.call("nvmlDeviceGetHandleByIndex", index)
            gpus.append(_gpu(ctx, nvml, index, handle) if handle is not None else GpuReading(index))
        return NvmlHost(driver, tuple(gpus))
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:  # shutting down is best effort: the reading is taken
            pass


def _gpu(ctx: Context, nvml: Nvml, index: int, handle: Any) -> GpuReading:
    pci = nvml.call("nvmlDeviceGetPciInfo", handle)
    bus_id = getattr(pci, "busId", None)
    if isinstance(bus_id, bytes):
        bus_id = bus_id.decode("ascii", errors="replace")
    utilization = nvml.call("nvmlDeviceGetUtilizationRates", handle)
    memory = nvml.call("nvmlDeviceGetMemoryInfo", handle)
    persistence = nvml.number("nvmlDeviceGetPersistenceMode", handle)
    mode = nvml.number("nvmlDeviceGetComputeMode", handle)
    mig = nvml.call("nvmlDeviceGetMigMode", handle)
    mig = mig if isinstance(mig, (list, tuple)) and len(mig) == 2 else (None, None)
    fabric_state, fabric_status = _fabric(nvml, handle)
    return GpuReading(
        index,
        name=nvml.text("nvmlDeviceGetName", handle),
        uuid=nvml.text("nvmlDeviceGetUUID", handle),
        bus_id=canonical_bus_id(bus_id) if isinstance(bus_id, str) else None,
        utilization_pct=_int(getattr(utilization, "gpu", None)),
        memory_used_mib=_mib(getattr(memory, "used", None)),
        memory_total_mib=_mib(getattr(memory, "total", None)),
        persistence=_flag(persistence),
        compute_mode=COMPUTE_MODES.get(mode) if mode is not None else None,
        mig_enabled=_flag(mig[0]),
        mig_pending=_flag(mig[1]),
        pcie=_nvml_pcie(nvml, handle),
        clocks=_clocks(nvml, handle),
        memory=_faults(nvml, handle),
        nvlinks=_nvlinks(nvml, handle),
        fabric_state=fabric_state,
        fabric_status=fabric_status,
        processes=_processes(ctx, nvml, handle),
    )


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _flag(value: object) -> bool | None:
    """NVML's enable state (1 enabled, 0 disabled) as a bool; None where not read."""
    number = _int(value)
    return number == 1 if number is not None else None


def _mib(value: object) -> int | None:
    number = _int(value)
    return number // MIB if number is not None else None


def _nvml_pcie(nvml: Nvml, handle: Any) -> PcieLink:
    gpu_max = nvml.number("nvmlDeviceGetGpuMaxPcieLinkGeneration", handle)  # the GPU's own; the other: with this system
    return PcieLink(
        gen_current=nvml.number("nvmlDeviceGetCurrPcieLinkGeneration", handle),
        gen_max=gpu_max if gpu_max is not None else nvml.number("nvmlDeviceGetMaxPcieLinkGeneration", handle),
        width_current=nvml.number("nvmlDeviceGetCurrPcieLinkWidth", handle),
        width_max=nvml.number("nvmlDeviceGetMaxPcieLinkWidth", handle),
        replays=nvml.number("nvmlDeviceGetPcieReplayCounter", handle),
    )


def _events(nvml: Nvml, handle: Any) -> frozenset[ClockEvent] | None:
    mask = nvml.number("nvmlDeviceGetCurrentClocksEventReasons", handle)
    if mask is None:  # drivers before 535 name it throttle reasons
        mask = nvml.number("nvmlDeviceGetCurrentClocksThrottleReasons", handle)
    if mask is None:
        return None
    found = set()
    for name, bit, event in EVENT_BITS:
        value = nvml.constant(f"nvmlClocksEventReason{name}", nvml.constant(f"nvmlClocksThrottleReason{name}", bit))
        if mask & value:
            found.add(event)
    return frozenset(found)


def _clocks(nvml: Nvml, handle: Any) -> Clocks:
    graphics, memory = nvml.constant("NVML_CLOCK_GRAPHICS", 0), nvml.constant("NVML_CLOCK_MEM", 2)
    limit = nvml.number("nvmlDeviceGetEnforcedPowerLimit", handle)
    default = nvml.number("nvmlDeviceGetPowerManagementDefaultLimit", handle)
    draw = nvml.number("nvmlDeviceGetPowerUsage", handle)
    return Clocks(
        events=_events(nvml, handle),
        graphics_mhz=nvml.number("nvmlDeviceGetClockInfo", handle, graphics),
        memory_mhz=nvml.number("nvmlDeviceGetClockInfo", handle, memory),
        max_graphics_mhz=nvml.number("nvmlDeviceGetMaxClockInfo", handle, graphics),
        max_memory_mhz=nvml.number("nvmlDeviceGetMaxClockInfo", handle, memory),
        applications_graphics_mhz=nvml.number("nvmlDeviceGetApplicationsClock", handle, graphics),
        applications_memory_mhz=nvml.number("nvmlDeviceGetApplicationsClock", handle, memory),
        default_applications_graphics_mhz=nvml.number("nvmlDeviceGetDefaultApplicationsClock", handle, graphics),
        default_applications_memory_mhz=nvml.number("nvmlDeviceGetDefaultApplicationsClock", handle, memory),
        power_limit_w=limit / 1000 if limit is not None else None,  # NVML's milliwatts
        default_power_limit_w=default / 1000 if default is not None else None,
        power_draw_w=draw / 1000 if draw is not None else None,
        temperature_c=nvml.number("nvmlDeviceGetTemperature", handle, nvml.constant("NVML_TEMPERATURE_GPU", 0)),
    )


def _faults(nvml: Nvml, handle: Any) -> MemoryFaults:
    uncorrected, corrected = nvml.constant("NVML_MEMORY_ERROR_TYPE_UNCORRECTED", 1), nvml.constant("NVML_MEMORY_ERROR_TYPE_CORRECTED", 0)
    volatile, aggregate = nvml.constant("NVML_VOLATILE_ECC", 0), nvml.constant("NVML_AGGREGATE_ECC", 1)
    ecc = nvml.call("nvmlDeviceGetEccMode", handle)
    pending = nvml.number("nvmlDeviceGetRetiredPagesPendingStatus", handle)
    rows = nvml.call("nvmlDeviceGetRemappedRows", handle)
    rows = rows if isinstance(rows, (list, tuple)) and len(rows) == 4 else (None,) * 4

    def retired(cause: str, default: int) -> int | None:
        pages = nvml.call("nvmlDeviceGetRetiredPages", handle, nvml.constant(cause, default))
        return len(pages) if isinstance(pages, list) else None

    def errors(kind: int, counter: int) -> int | None:
        return nvml.number("nvmlDeviceGetTotalEccErrors", handle, kind, counter)

    return MemoryFaults(
        ecc_enabled=_flag(ecc[0]) if isinstance(ecc, (list, tuple)) and ecc else None,
        uncorrected_volatile=errors(uncorrected, volatile),
        uncorrected_aggregate=errors(uncorrected, aggregate),
        corrected_volatile=errors(corrected, volatile),
        corrected_aggregate=errors(corrected, aggregate),
        retired_pages_sbe=retired("NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS", 0),
        retired_pages_dbe=retired("NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR", 1),
        retired_pages_pending=_flag(pending),
        remapped_correctable=_int(rows[0]),
        remapped_uncorrectable=_int(rows[1]),
        remap_pending=_flag(rows[2]),
        remap_failure=_flag(rows[3]),
    )


def _nvlinks(nvml: Nvml, handle: Any) -> tuple[NvLink, ...] | None:
    """Each link's state, until NVML says the next one is not there (NotSupported, or an invalid
    link); None where it does not answer at all (FunctionNotFound, no permission)."""
    module = nvml.module
    ends = (module.NVMLError_NotSupported, module.NVMLError_InvalidArgument)
    function = getattr(module, "nvmlDeviceGetNvLinkState", None)
    if function is None:
        return None
    links: list[NvLink] = []
    for link in range(nvml.constant("NVML_NVLINK_MAX_LINKS", MAX_NVLINKS)):
        try:
            state = function(handle, link)
        except ends:
            break
        except nvml.failures:
            return tuple(links) if links else None
        links.append(NvLink(link, active=_flag(state)))
    return tuple(links)


def _fabric(nvml: Nvml, handle: Any) -> tuple[str | None, str | None]:
    """Hopper and later on an NVSwitch fabric: its state, and its status once the state is Completed
    (NVML: the status means nothing before)."""
    kind = getattr(nvml.module, "c_nvmlGpuFabricInfo_t", None)
    if kind is None:
        return None, None
    info = kind()
    if nvml.call("nvmlDeviceGetGpuFabricInfo", handle, ctypes.byref(info)) is None:
        return None, None
    state = FABRIC_STATES.get(_int(info.state) or 0)
    if info.state != FABRIC_COMPLETED:
        return state, None
    status = _int(info.status)
    if status is None:
        return state, None
    return state, "Success" if status == 0 else str(nvml.module.NVMLError(status))


def _processes(ctx: Context, nvml: Nvml, handle: Any) -> tuple[GpuProcess, ...] | None:
    found = nvml.call("nvmlDeviceGetComputeRunningProcesses", handle)
    if not isinstance(found, list):
        return None
    processes = []
    for process in found[:MAX_PROCESSES]:
        pid = _int(getattr(process, "pid", None))
        used = _int(getattr(process, "usedGpuMemory", None))  # None on Windows WDDM, and where not permitted
        processes.append(GpuProcess(pid, _command(ctx, pid), used // MIB if used is not None else None))
    return tuple(processes)


def _command(ctx: Context, pid: int | None) -> str:
    """The process's name as the judged host's /proc/PID/comm says it; its pid where it is not readable."""
    name = read_attribute(ctx.host_path(f"/proc/{pid}/comm")) if pid is not None else None
    return name or (f"pid {pid}" if pid is not None else "?")
