"""Memory bandwidth: measured on the CPU (numpy, one thread per core) and the GPU, and the spec figures.

Decode reads every weight once per generated token, so the memory system, not the arithmetic,
sets the ceiling. The CPU probe reads a buffer far larger than the last-level cache with one
thread per usable core (numpy reductions release the GIL; pure-Python copies would not), after
touching every page, and keeps the best of several passes. Measured here: `np.maximum.reduce` over
uint32 views reaches about 0.97 of a C OpenMP read kernel; other reductions reach 0.75 to 0.9.
"""

from __future__ import annotations

import re
import time
from typing import Any

from decode_doctor.engine.hostload import Window
from decode_doctor.engine.workers import usable_cpus
from decode_doctor.i18n import said

from .contract import GB, CpuBandwidth, GpuBandwidth, MemorySpec

MIN_BUFFER = 256 << 20
MAX_BUFFER = 512 << 20  # a check run on a production host takes no more unasked (--thorough: THOROUGH_BUFFER)
THOROUGH_BUFFER = 4 << 30
AVAILABLE_SHARE = 8  # and never more than an eighth of the memory available
CACHE_MULTIPLE = 4  # a buffer under this many times the last-level cache may be partly served from it


def llc_bytes(read_text: Any) -> int | None:
    """The largest cache size in sysfs (the last-level cache), via a Context-style read_text."""
    sizes = []
    for index in range(8):
        text = read_text(f"/sys/devices/system/cpu/cpu0/cache/index{index}/size")
        if text is None:
            break
        match = re.match(r"\s*(\d+)\s*([KMG]?)", text)
        if match:
            sizes.append(int(match.group(1)) * {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}[match.group(2)])
    return max(sizes) if sizes else None


def buffer_size(llc: int | None, available: int | None, thorough: bool = False) -> int:
    """Out of the last-level cache where memory allows (aim for 8× it), but by default at most
    MAX_BUFFER and an eighth of the memory available: a probe on a production host must not take
    gigabytes unasked. --thorough reads up to THOROUGH_BUFFER (still within an eighth)."""
    ceiling = THOROUGH_BUFFER if thorough else MAX_BUFFER
    size = min(max(MIN_BUFFER, 8 * (llc or 0)), ceiling)
    if available:
        size = min(size, available // AVAILABLE_SHARE)
    return max(size - size % (1 << 20), 1 << 20)


def cache_caveat(buffer: int, llc: int | None, thorough: bool) -> str | None:
    """When the buffer is not well out of the last-level cache: the figure may be the cache's, not
    the memory's (on VMs the LLC reported is often the host's whole L3)."""
    if not llc or buffer >= CACHE_MULTIPLE * llc:
        return None
    more = "" if thorough else said("; --thorough reads up to 4 GiB")
    return said(
        "the {buffer} MiB buffer is under {multiple}× the {llc} MiB last-level cache this host reports: "
        "part of it may be read from the cache, so the figure may overstate the memory{more}",
        buffer=buffer >> 20,
        multiple=CACHE_MULTIPLE,
        llc=llc >> 20,
        more=more,
    )


def measure_cpu(buffer_bytes: int, budget_s: float = 1.0, threads: int | None = None) -> CpuBandwidth:
    from concurrent.futures import ThreadPoolExecutor

    import numpy as np

    threads = threads or usable_cpus()
    words = buffer_bytes // 4
    data = np.empty(words, dtype=np.uint32)
    parts = np.array_split(data, threads)
    half = words // 2
    sources = np.array_split(data[:half], threads)
    targets = np.array_split(data[half : 2 * half], threads)
    started = time.perf_counter()
    window = Window()
    own_before = time.process_time()
    with ThreadPoolExecutor(threads) as pool:
        # Touch every page from the thread that will read it (first touch places it), twice.
        for value in (1, 2):
            list(pool.map(lambda part, v=value: part.fill(v), parts))

        def timed(fn: Any, args: list[Any]) -> float:
            t0 = time.perf_counter()
            list(pool.map(fn, *args))
            return time.perf_counter() - t0

        read_times: list[float] = []
        copy_times: list[float] = []
        deadline = started + budget_s
        while len(read_times) < 3 or (time.perf_counter() < deadline and len(read_times) < 50):
            read_times.append(timed(np.maximum.reduce, [parts]))
            copy_times.append(timed(np.copyto, [targets, sources]))
    wall = time.perf_counter() - started
    load = window.close(time.process_time() - own_before)
    read_bytes = data.nbytes
    copy_bytes = 2 * (half * 4)  # read the source and write the target, as STREAM counts it
    return CpuBandwidth(
        read_gbps=round(read_bytes / min(read_times) / GB, 3),
        copy_gbps=round(copy_bytes / min(copy_times) / GB, 3),
        read_spread=round(_spread(read_times), 3),
        copy_spread=round(_spread(copy_times), 3),
        threads=threads,
        buffer_bytes=int(data.nbytes),
        passes=len(read_times),
        wall_s=round(wall, 3),
        other_load=load.other_load,
        foreign_cores=load.foreign_cores,  # in cores, over this window itself
        steal=load.steal,
    )


def _spread(times: list[float]) -> float:
    """How much the rates varied: (fastest - slowest) / fastest."""
    return (max(times) - min(times)) / max(times) if times else 0.0


_DIMM_SUFFIX = re.compile(r"[_\s-]*dimm\s*\d+\s*$", re.I)


def _channel_key(bank: str, locator: str) -> str:
    """DIMMs on one channel share a key: the bank locator without its DIMM index where it names
    the channel ("P0_Node1_Channel0_Dimm1"), else the slot locator without its trailing digits."""
    if "channel" in bank.lower():
        return _DIMM_SUFFIX.sub("", bank.strip())
    return re.sub(r"\d+$", "", locator.strip()) or locator


def _size_gib(text: str) -> float | None:
    match = re.match(r"(\d+)\s*(MB|GB|TB)", text)
    if not match:
        return None
    return int(match.group(1)) * {"MB": 1 / 1024, "GB": 1, "TB": 1024}[match.group(2)]


def parse_dmidecode_memory(text: str) -> MemorySpec | None:
    blocks = re.split(r"\n(?=Handle )", text)
    devices = []
    for block in blocks:
        if "\nMemory Device\n" not in block and not block.lstrip().startswith("Memory Device"):
            continue
        fields = dict(re.findall(r"^\s+([^:\n]+):\s*(.*)$", block, re.M))
        devices.append(fields)
    if not devices:
        return None
    populated = [d for d in devices if _size_gib(d.get("Size", "")) is not None]
    channels = set()
    speeds = []
    for device in populated:
        channels.add(_channel_key(device.get("Bank Locator", ""), device.get("Locator", "")))
        speed = device.get("Configured Memory Speed") or device.get("Configured Clock Speed") or device.get("Speed", "")
        found = re.match(r"(\d+)\s*MT/s", speed)
        if found:
            speeds.append(int(found.group(1)))
    types = {str(d["Type"]) for d in populated if d.get("Type")} - {"Unknown", "Other"}
    return MemorySpec(
        populated=len(populated),
        slots=len(devices),
        channels=len(channels),
        speed_mts=min(speeds) if speeds else None,
        memory_type=", ".join(sorted(types)) or None,
        total_gib=sum(_size_gib(d["Size"]) or 0 for d in populated),
    )


def theoretical_gpu_gbps(max_mem_clock_mhz: float, bus_width_bits: int) -> float:
    """NVML's figures: 2 transfers per clock × clock × bus width / 8 bytes."""
    return 2 * max_mem_clock_mhz * 1e6 * bus_width_bits / 8 / GB


def measure_gpus(budget_s: float = 1.0) -> list[GpuBandwidth]:
    """Device-to-device copies timed with CUDA events, through torch (or cupy) when importable."""
    import importlib.util

    if importlib.util.find_spec("torch") is not None:
        return _measure_torch(budget_s)
    if importlib.util.find_spec("cupy") is not None:
        return _measure_cupy(budget_s)
    return []


def _measure_torch(budget_s: float) -> list[GpuBandwidth]:
    import torch  # pyright: ignore[reportMissingImports]

    if not torch.cuda.is_available():
        return []
    found = []
    for index in range(torch.cuda.device_count()):
        props = torch.cuda.get_device_properties(index)
        free, _total = torch.cuda.mem_get_info(index)
        size = min(1 << 30, free // 4)
        src = torch.empty(size, dtype=torch.uint8, device=f"cuda:{index}")
        dst = torch.empty_like(src)
        src.fill_(1)
        dst.copy_(src)  # warm up
        times: list[float] = []
        deadline = time.perf_counter() + budget_s
        while len(times) < 3 or (time.perf_counter() < deadline and len(times) < 50):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            dst.copy_(src)
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) / 1000)
        found.append(GpuBandwidth(index, props.name, props.total_memory, round(2 * size / min(times) / GB, 1), round(_spread(times), 3)))
        del src, dst
        torch.cuda.empty_cache()
    return found


def _measure_cupy(budget_s: float) -> list[GpuBandwidth]:
    import cupy  # pyright: ignore[reportMissingImports]

    found = []
    for index in range(cupy.cuda.runtime.getDeviceCount()):
        with cupy.cuda.Device(index):
            props = cupy.cuda.runtime.getDeviceProperties(index)
            size = min(1 << 30, cupy.cuda.runtime.memGetInfo()[0] // 4)
            src = cupy.ones(size, dtype=cupy.uint8)
            dst = cupy.empty_like(src)
            cupy.copyto(dst, src)
            times: list[float] = []
            deadline = time.perf_counter() + budget_s
            while len(times) < 3 or (time.perf_counter() < deadline and len(times) < 50):
                start, end = cupy.cuda.Event(), cupy.cuda.Event()
                start.record()
                cupy.copyto(dst, src)
                end.record()
                end.synchronize()
                times.append(cupy.cuda.get_elapsed_time(start, end) / 1000)
            name = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
            copy = round(2 * size / min(times) / GB, 1)
            found.append(GpuBandwidth(index, name, int(props["totalGlobalMem"]), copy, round(_spread(times), 3)))
    return found


def nvml_theoretical() -> dict[int, float]:
    """Per-GPU theoretical bandwidth from NVML (the optional `gpu` extra), where it answers."""
    try:
        import pynvml
    except ImportError:
        return {}
    try:
        pynvml.nvmlInit()
    except Exception:
        return {}
    peaks = {}
    try:
        for index in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            try:
                width = pynvml.nvmlDeviceGetMemoryBusWidth(handle)
                clock = pynvml.nvmlDeviceGetMaxClockInfo(handle, pynvml.NVML_CLOCK_MEM)
            except Exception:  # NOT_SUPPORTED on integrated parts, FUNCTION_NOT_FOUND on old drivers
                continue
            peaks[index] = theoretical_gpu_gbps(clock, width)
    finally:
        pynvml.nvmlShutdown()
    return peaks
