"""The plain `nvidia-smi` table, the output users paste into tickets most: drivers 346 to 610 (the
KMD/UMD header), MIG tables, Jetson and WSL with N/A columns. One pass over the lines; nothing
backtracks, whatever a line holds."""

from __future__ import annotations

import dataclasses

from decode_doctor.i18n import said

from .contract import DriverInfo, GpuDevice

HEADER_FIELDS = (("KMD Version:", "driver"), ("Driver Version:", "driver"), ("CUDA UMD Version:", "cuda"), ("CUDA Version:", "cuda"))
MAX_TABLE = 4 << 20


def looks_like_table(text: str) -> bool:
    return "NVIDIA-SMI " in text[:4096] and "|" in text[:4096]


def _field(line: str, label: str) -> str | None:
    at = line.find(label)
    if at < 0:
        return None
    words = line[at + len(label) :].replace("|", " ").split()
    return words[0] if words else None


def _version(value: str | None) -> str | None:
    if not value:
        return None
    parts = value.split(".")
    return value if len(parts) <= 4 and all(p.isdecimal() and len(p) <= 6 for p in parts) else None


def _memory_total(cell: str) -> int | None:
    """'  50MiB / 24576MiB ' → 24576."""
    _, slash, total = cell.partition("/")
    digits = total.strip().removesuffix("MiB").strip()
    return int(digits) if slash and digits.isdecimal() and len(digits) <= 9 else None


def _header_versions(line: str) -> tuple[str | None, str | None]:
    """The driver and CUDA versions of the table's ``NVIDIA-SMI …`` header line."""
    found: dict[str, str] = {}
    for label, key in HEADER_FIELDS:
        value = _version(_field(line, label))
        if value and key not in found:
            found[key] = value
    return found.get("driver"), found.get("cuda")


def _device_row(first: list[str], cells: list[str]) -> GpuDevice:
    """A GPU from the first row of its block: its index and name, then its bus id."""
    name_words = first[1:]
    if name_words and name_words[-1] in ("On", "Off", "N/A", "WDDM", "TCC"):
        name_words = name_words[:-1]
    if len(name_words) > 1 and name_words[-1] in ("WDDM", "TCC"):
        name_words = name_words[:-1]
    bus = cells[1].split()
    return GpuDevice(index=int(first[0]), name=" ".join(name_words) or "unknown NVIDIA GPU", bus_id=bus[0] if bus else None)


def parse_smi_table(text: str) -> DriverInfo:
    """Driver, CUDA and each GPU (index, name, bus id, memory) from the table; ValueError when the
    text is not one."""
    versions: tuple[str | None, str | None] | None = None
    devices: list[GpuDevice] = []
    in_gpus = False
    pending: GpuDevice | None = None
    for line in text[:MAX_TABLE].splitlines():
        stripped = line.strip()
        if "NVIDIA-SMI " in stripped and (versions is None or versions[0] is None):
            versions = _header_versions(stripped)
            continue
        if stripped.startswith("|=") and not devices and pending is None:
            in_gpus = True
            continue
        if not in_gpus:
            continue
        if not stripped or stripped.startswith("| Processes") or "MIG devices" in stripped:
            break  # the GPU section is over: process and MIG instance tables follow
        cells = stripped.strip("|").split("|")
        if len(cells) < 3:
            continue
        first = cells[0].split()
        if pending is None and first and first[0].isdecimal() and len(first[0]) <= 3:
            pending = _device_row(first, cells)
            continue
        if pending is not None:
            devices.append(dataclasses.replace(pending, memory_mib=_memory_total(cells[1])))
            pending = None
            continue
        if stripped.startswith("|") and len(cells) >= 3 and cells[2].strip() in ("Enabled", "Disabled") and devices:
            devices[-1] = dataclasses.replace(devices[-1], mig_mode=cells[2].strip())
    if versions is None or versions[0] is None:
        raise ValueError(said("no 'NVIDIA-SMI … Driver Version:' header: not an nvidia-smi table"))
    return DriverInfo(versions[0], versions[1], tuple(devices), source="nvidia-smi (table)")
