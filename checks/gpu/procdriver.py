"""The NVIDIA kernel module's own account of itself under /proc/driver/nvidia: the driver's version and
each GPU it drives. It answers where NVML and nvidia-smi do not (a container without the NVIDIA
runtime, a host with the driver but not its utilities), so a loaded driver is never called missing."""

from __future__ import annotations

from decode_doctor.engine import Context

from .contract import DriverInfo, GpuDevice
from .nvidia import VERSION

SOURCE = "/proc/driver/nvidia"
MAX_GPUS = 64


def _fields(text: str) -> dict[str, str]:
    found = {}
    for line in text.splitlines()[:64]:
        label, colon, value = line.partition(":")
        if colon:
            found[label.strip()] = value.strip()
    return found


def driver_version(text: str) -> str | None:
    """550.54.15 from "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar  5 …" (and the
    open kernel module's "NVIDIA UNIX Open Kernel Module for x86_64  570.86.15  Release Build …")."""
    first = text.splitlines()[0] if text.strip() else ""
    if not first.startswith("NVRM version:"):
        return None
    return next((word for word in first.split() if VERSION.fullmatch(word) and "." in word), None)


def read_proc_driver(ctx: Context) -> DriverInfo | None:
    """The driver and GPUs the kernel module lists; None when it lists neither."""
    version = driver_version(ctx.read_text(f"{SOURCE}/version", limit=4096) or "")
    gpus_dir = ctx.host_path(f"{SOURCE}/gpus")
    devices = []
    buses = sorted(entry.name for entry in gpus_dir.iterdir())[:MAX_GPUS] if gpus_dir.is_dir() else []
    for position, bus in enumerate(buses):
        info = _fields(ctx.read_text(f"{SOURCE}/gpus/{bus}/information", limit=16384) or "")
        minor = info.get("Device Minor", "")
        devices.append(
            GpuDevice(
                index=int(minor) if minor.isdecimal() and len(minor) < 4 else position,
                name=info.get("Model") or "unknown NVIDIA GPU",
                bus_id=info.get("Bus Location") or bus,
                uuid=info.get("GPU UUID") or None,
            )
        )
    if version is None and not devices:
        return None
    return DriverInfo(version, None, devices=tuple(devices), attached=len(devices), source=SOURCE)
