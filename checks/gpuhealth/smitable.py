"""nvidia-smi's default table (drivers 346 to 610) as a HostReading.

Per GPU the table has two rows (three since the MIG column, driver 450): index, name and Persistence-M
(Windows: the driver model, WDDM/TCC/MCDM), Bus-Id, Disp.A and the volatile uncorrectable ECC count;
fan, temperature, performance state, power draw against the enforced cap ("69W / 700W": the default
limit is not shown), memory, utilization and compute mode; then MIG mode. The Processes table gives
each GPU's processes; "No running processes found" gives every GPU an empty list. The MIG devices
table is skipped (its instances are not GPUs of their own here); pasted alone, it shows the GPUs it
lists with MIG enabled.

Cells are read by the table's own borders ('|'), tokens within a cell by whitespace: a name cut short
by nvidia-smi ("NVIDIA GeForce RTX 4080 ...") is kept as shown.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from .pasted import MAX_GPUS, MAX_PROCESSES, bounded_lines, bus_id, leading_int, leading_number, small_int, unavailable
from .reading import Clocks, ComputeMode, GpuProcess, GpuReading, HostReading, MemoryFaults

KIND = "nvidia-smi table"
WINDOWS_MODELS = {"WDDM", "TCC", "MCDM"}
COMPUTE_MODES = {
    "default": ComputeMode.DEFAULT,
    "e. process": ComputeMode.EXCLUSIVE_PROCESS,
    "e. thread": ComputeMode.EXCLUSIVE_THREAD,
    "prohibited": ComputeMode.PROHIBITED,
    "exclusive_process": ComputeMode.EXCLUSIVE_PROCESS,
    "exclusive_thread": ComputeMode.EXCLUSIVE_THREAD,
}
VERSION_LABELS = ("Driver Version:", "KMD Version:")  # driver 610 says KMD (and "CUDA UMD Version")


def is_table_header(line: str) -> bool:
    """The `| NVIDIA-SMI 590.48.01   Driver Version: …` line a table starts with."""
    return "NVIDIA-SMI" in line and any(label in line for label in VERSION_LABELS)


def is_mig_devices_header(line: str) -> bool:
    """The `| MIG devices: |` line of the table's MIG section (pasted alone at times)."""
    return line.strip().startswith("|") and "MIG devices:" in line


def _driver_version(line: str) -> str | None:
    for label in VERSION_LABELS:
        at = line.find(label)
        if at >= 0:
            words = line[at + len(label) :].split()
            return words[0] if words and not unavailable(words[0]) else None
    return None


def _cells(line: str) -> list[str]:
    """The cells between a row's borders: "| a | b |" → ["a", "b"]."""
    inner = line.strip()
    if not inner.startswith("|"):
        return []
    inner = inner[1:]
    if inner.endswith("|"):
        inner = inner[:-1]
    return [cell.strip() for cell in inner.split("|")]


def _is_border(line: str) -> bool:
    stripped = line.strip()
    return stripped.startswith("+") or stripped.startswith("|-") or stripped.startswith("|=")


@dataclass
class _Block:
    """One GPU's rows: their cells and the line the first one is on."""

    line: int
    rows: list[list[str]] = field(default_factory=list)


def parse_table(text: str) -> HostReading | None:
    """The default nvidia-smi table; None when the text holds none (no GPU row, and no MIG devices
    table either: a pasted MIG devices table alone shows its GPUs with MIG enabled)."""
    lines = bounded_lines(text)
    driver: str | None = None
    windows = False
    start = None
    for number, line in enumerate(lines):
        if driver is None and is_table_header(line):
            driver = _driver_version(line)
        if "Bus-Id" in line and ("Driver-Model" in line or "TCC/WDDM" in line):
            windows = True
        if line.strip().startswith("|=") and start is None and any("Bus-Id" in earlier for earlier in lines[max(0, number - 6) : number]):
            start = number + 1
            break
    blocks, end = _gpu_blocks(lines, start) if start is not None else ([], 0)
    gpus = [gpu for gpu in (_gpu(block) for block in blocks[:MAX_GPUS]) if gpu is not None]
    readings = [gpu for gpu, _ in gpus]
    mig = _mig_gpus(lines, end)
    if not readings:
        readings = [GpuReading(index=index, mig_enabled=True, line=line) for index, line in sorted(mig.items())]
    if not readings:
        return None
    windows = windows or any(gpu[1] for gpu in gpus)
    processes = _processes(lines, end)
    if processes is not None:
        readings = [replace(gpu, processes=tuple(processes.get(gpu.index, ()))) for gpu in readings]
    return HostReading(KIND, gpus=tuple(readings), driver_version=driver, windows=windows)


def _mig_gpus(lines: list[str], start: int) -> dict[int, int]:
    """The GPUs the MIG devices table lists instances of (index → the line of its first instance)."""
    header = next((number for number in range(start, len(lines)) if "MIG devices:" in lines[number]), None)
    if header is None:
        return {}
    body = next((number for number in range(header, len(lines)) if lines[number].strip().startswith("|=")), len(lines))
    found: dict[int, int] = {}
    for number in range(body + 1, len(lines)):
        stripped = lines[number].strip()
        if not stripped or not (stripped.startswith("|") or stripped.startswith("+")) or "Processes:" in stripped:
            break
        cells = _cells(stripped)
        words = cells[0].split() if cells else []
        index = small_int(words[0]) if len(words) == 4 and all(small_int(word) is not None for word in words) else None
        if index is not None and len(found) < MAX_GPUS:
            found.setdefault(index, number + 1)
    return found


def _gpu_blocks(lines: list[str], start: int) -> tuple[list[_Block], int]:
    """The GPU rows after the header's '|===' line, grouped between '+---' borders, up to the first
    line that is neither a row nor a border (the blank line before the next table)."""
    blocks: list[_Block] = []
    current: _Block | None = None
    number = start
    while number < len(lines):
        line = lines[number]
        stripped = line.strip()
        if not stripped or not (stripped.startswith("|") or stripped.startswith("+")):
            break
        if "Processes:" in stripped or "MIG devices:" in stripped:
            break
        if _is_border(line):
            current = None
        else:
            if current is None:
                current = _Block(number + 1)
                blocks.append(current)
            current.rows.append(_cells(line))
        number += 1
    return blocks, number


def _gpu(block: _Block) -> tuple[GpuReading, bool] | None:
    """The GPU of a block and whether its row names a Windows driver model; None when the first row
    is not a GPU row (no index or no bus id)."""
    first = block.rows[0]
    if len(first) < 3:
        return None
    words = first[0].split()
    index = small_int(words[0]) if len(words) >= 2 else None
    if index is None:
        return None
    bus_words = first[1].split()
    address = bus_id(bus_words[0]) if bus_words else None
    if address is None:
        return None
    mode = words[-1]
    windows = mode in WINDOWS_MODELS
    persistence = None if windows else {"On": True, "Off": False}.get(mode)
    name = " ".join(words[1:-1]) if mode in WINDOWS_MODELS or mode in ("On", "Off", "N/A") else " ".join(words[1:])
    ecc = first[2].split()
    ecc_word = ecc[0] if ecc else ""
    count = small_int(ecc_word)
    memory = MemoryFaults(
        ecc_enabled=True if count is not None or ecc_word == "On" else (False if ecc_word == "Off" else None),
        uncorrected_volatile=count,
    )
    gpu = GpuReading(index=index, name=name or None, bus_id=address, persistence=persistence, memory=memory, line=block.line)
    if len(block.rows) > 1:
        gpu = _second_row(gpu, block.rows[1])
    if len(block.rows) > 2 and len(block.rows[2]) >= 3:
        mig = block.rows[2][2].strip()
        gpu = replace(gpu, mig_enabled={"Enabled": True, "Disabled": False}.get(mig))
    return gpu, windows


def _second_row(gpu: GpuReading, cells: list[str]) -> GpuReading:
    """Fan, temperature, perf, power draw / cap | memory used / total | utilization, compute mode."""
    if len(cells) < 3:
        return gpu
    temperature = next((leading_int(word) for word in cells[0].split() if word.endswith("C") and small_int(word[:-1]) is not None), None)
    draw, slash, cap = cells[0].rpartition(" / ")  # spaced: "N/A" has a slash of its own
    draw_words, cap_words = draw.split(), cap.split()
    power_draw = leading_number(draw_words[-1]) if slash and draw_words and draw_words[-1].endswith("W") else None
    power_cap = leading_number(cap_words[0]) if slash and cap_words and cap_words[0].endswith("W") else None
    used, _, total = cells[1].rpartition(" / ")
    utilization_words = cells[2].split()
    utilization = leading_int(utilization_words[0]) if utilization_words and utilization_words[0].endswith("%") else None
    mode = COMPUTE_MODES.get(" ".join(utilization_words[1:]).lower()) if utilization_words else None
    return replace(
        gpu,
        utilization_pct=utilization,
        memory_used_mib=leading_int(used) if used.strip().endswith("MiB") else None,
        memory_total_mib=leading_int(total) if total.strip().endswith("MiB") else None,
        compute_mode=mode,
        clocks=Clocks(power_limit_w=power_cap, power_draw_w=power_draw, temperature_c=temperature),
    )


def _processes(lines: list[str], start: int) -> dict[int, list[GpuProcess]] | None:
    """Each GPU's processes from the Processes table; None when the text has no such table."""
    header = next((number for number in range(start, len(lines)) if "Processes:" in lines[number]), None)
    if header is None:
        return None
    with_instances = False  # "GI ID" / "CI ID" columns since driver 450
    number = header + 1
    while number < len(lines) and not lines[number].strip().startswith("|="):
        with_instances = with_instances or " GI " in lines[number]
        number += 1
    found: dict[int, list[GpuProcess]] = {}
    count = 0
    for line in lines[number + 1 :]:
        stripped = line.strip()
        if not stripped.startswith("|") or count >= MAX_PROCESSES:
            break
        cells = _cells(line)
        words = cells[0].split() if cells else []
        process = _process(words, with_instances)
        if process is not None:
            found.setdefault(process[0], []).append(process[1])
            count += 1
    return found


def _process(words: list[str], with_instances: bool) -> tuple[int, GpuProcess] | None:
    """GPU [GI CI] PID Type Process-name… Memory; None for "No running processes found"."""
    pid_at = 3 if with_instances else 1
    gpu = small_int(words[0]) if len(words) >= pid_at + 3 else None
    if gpu is None:
        return None
    memory = words[-1]
    return gpu, GpuProcess(
        pid=leading_int(words[pid_at]),
        name=" ".join(words[pid_at + 2 : -1]),
        used_mib=leading_int(memory) if memory.endswith("MiB") else None,
    )
