"""The PCI bus as sysfs shows it under the root: the NVIDIA GPUs and NVSwitches, each GPU's link and
the port above it; and, for this machine only, whether nvidia-fabricmanager runs.

Every read is a bounded read of a regular attribute file; a link in /sys/bus/pci/devices is followed
only where it stays inside the root (another host's tree must never lead into this machine's /sys).
"""

from __future__ import annotations

import itertools
import os
from dataclasses import dataclass
from pathlib import Path

from decode_doctor.engine import Context
from decode_doctor.engine.files import open_regular

from .reading import PcieLink

NVIDIA = "0x10de"
GPU_CLASSES = ("0x0300", "0x0302")  # VGA-compatible and 3D controllers
NVSWITCH_CLASS = "0x0680"  # "other bridge": the NVSwitches of an HGX board
MAX_FUNCTIONS = 4096  # PCI functions listed; a large server has a few hundred
MAX_PROCESSES = 1 << 17  # /proc entries looked at for the fabric manager
ATTRIBUTE_LIMIT = 64  # bytes read of one attribute ("32.0 GT/s PCIe\n")
FABRIC_MANAGER = "nv-fabricmanager"[:15]  # /proc/PID/comm keeps 15 characters: "nv-fabricmanage"
GENERATION_OF_GTS = {2.5: 1, 5.0: 2, 8.0: 3, 16.0: 4, 32.0: 5, 64.0: 6}  # a lane's transfer rate → PCIe generation
MAX_WIDTH = 32


def link_known(link: PcieLink) -> bool:
    """Whether sysfs wrote anything of the GPU's own link (the slot's alone says nothing of it)."""
    return any(value is not None for value in (link.gen_current, link.gen_max, link.width_current, link.width_max))


@dataclass(frozen=True)
class Bus:
    """What /sys/bus/pci/devices held: None where it was not there to read."""

    gpus: dict[str, PcieLink] | None = None  # canonical bus id → its link, in bus order
    nvswitches: int | None = None

    @property
    def pci_gpus(self) -> tuple[str, ...] | None:
        return tuple(self.gpus) if self.gpus is not None else None


def canonical_bus_id(text: str) -> str | None:
    """ "0000:17:00.0" (sysfs) or "00000000:17:00.0" (NVML) → "00000000:17:00.0", lower case; None for
    anything else."""
    parts = text.strip().lower().split(":")
    if len(parts) != 3:
        return None
    domain, bus, function = parts
    device, dot, number = function.partition(".")
    hexdigits = "0123456789abcdef"
    fields = ((domain, 1, 8), (bus, 2, 2), (device, 2, 2), (number, 1, 1))
    if not dot or not all(lo <= len(value) <= hi and all(c in hexdigits for c in value) for value, lo, hi in fields):
        return None
    return f"{int(domain, 16):08x}:{bus}:{device}.{number}"


def read_attribute(path: Path) -> str | None:
    """A sysfs attribute's text, at most ATTRIBUTE_LIMIT bytes; None when it cannot be read. The file
    itself is never a link (an attribute is a regular file), and nothing else is opened."""
    try:
        with open_regular(path, follow=False) as handle:
            return handle.read(ATTRIBUTE_LIMIT).decode("ascii", errors="replace").strip()
    except OSError:
        return None


def generation(speed: str | None) -> int | None:
    """ "16.0 GT/s PCIe" (or an old kernel's "8 GT/s") → 4; None for "Unknown" and the like."""
    if not speed:
        return None
    number = speed.split(maxsplit=1)[0]
    if len(number) > 8:
        return None
    try:
        return GENERATION_OF_GTS.get(float(number))
    except ValueError:
        return None


def width(text: str | None) -> int | None:
    if text is None or not text.isdecimal() or len(text) > 3:
        return None
    lanes = int(text)
    return lanes if 1 <= lanes <= MAX_WIDTH else None


def _inside(path: str, root: str) -> bool:
    return root == os.sep or path == root or path.startswith(root + os.sep)


def device_directory(ctx: Context, entry: Path) -> Path | None:
    """The function's directory in the device tree (/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0),
    whose parent is the port above it; None where its link leads out of the root."""
    root = os.path.realpath(ctx.root)
    try:
        target = os.readlink(entry) if entry.is_symlink() else None
    except OSError:
        return None
    if target is None:
        candidate = entry
    elif os.path.isabs(target):  # the host's own absolute path: under the root, never this machine's
        candidate = ctx.host_path(target)
    else:
        candidate = entry.parent / target
    resolved = os.path.realpath(candidate)
    return Path(resolved) if _inside(resolved, root) else None


def _link(ctx: Context, directory: Path) -> PcieLink:
    port = directory.parent
    above = canonical_bus_id(port.name) is not None and _inside(str(port), os.path.realpath(ctx.root))
    return PcieLink(
        gen_current=generation(read_attribute(directory / "current_link_speed")),
        gen_max=generation(read_attribute(directory / "max_link_speed")),
        width_current=width(read_attribute(directory / "current_link_width")),
        width_max=width(read_attribute(directory / "max_link_width")),
        slot_gen_max=generation(read_attribute(port / "max_link_speed")) if above else None,
        slot_width_max=width(read_attribute(port / "max_link_width")) if above else None,
    )


def read_bus(ctx: Context) -> Bus:
    base = ctx.host_path("/sys/bus/pci/devices")
    try:
        with os.scandir(base) as listing:
            names = sorted(entry.name for entry in itertools.islice(listing, MAX_FUNCTIONS))
    except OSError:  # not there (a container, a tree without /sys), or not readable
        return Bus()
    gpus: dict[str, PcieLink] = {}
    nvswitches = 0
    for name in names:
        address = canonical_bus_id(name)
        directory = device_directory(ctx, base / name) if address else None
        if address is None or directory is None or read_attribute(directory / "vendor") != NVIDIA:
            continue
        klass = read_attribute(directory / "class") or ""
        if klass.startswith(GPU_CLASSES):
            gpus[address] = _link(ctx, directory)
        elif klass.startswith(NVSWITCH_CLASS):
            nvswitches += 1
    return Bus(dict(sorted(gpus.items())), nvswitches)


def fabric_manager_running(ctx: Context) -> bool | None:
    """Whether a process named nv-fabricmanager runs in the judged host's /proc; None where /proc
    lists no process (or for another host's files: its /proc is a copy, not a running system)."""
    if not ctx.live_devices:
        return None
    proc = ctx.host_path("/proc")
    seen = 0
    try:
        with os.scandir(proc) as listing:
            for entry in listing:
                if not entry.name.isdecimal():
                    continue
                seen += 1
                if seen > MAX_PROCESSES:
                    break
                if read_attribute(proc / entry.name / "comm") == FABRIC_MANAGER:
                    return True
    except OSError:
        return None
    return False if seen else None
