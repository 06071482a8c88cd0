"""`lspci -vv` (or `-vvv`, with or without `-nn`, `-D`, `-k`) as a HostReading: the NVIDIA display
and 3D functions as GPUs with their PCIe link (LnkCap: what the GPU can do; LnkSta: what it trained
at), and the NVSwitch bridges of an HGX board.

The slot above a GPU is read only where the paste shows it: the PCI bridge in the same domain whose
"Bus: … secondary=BB" line names the GPU's bus is the port the GPU is plugged into, and that port's
LnkCap is the slot's generation and width. Without that bridge in the paste, slot_* stay None. Pastes
of grep'd link lines under comment headers ("# lspci -vvv -s 0000:01:00.0  (GPU function: …)" and
"# lspci -vvv -s 0000:00:01.1  (upstream bridge of 0000:01:00.0: …)", a bench-report template) name
the GPU and its upstream port themselves, and are read by those names.

An NVIDIA "Bridge" (class 0680) counts as an NVSwitch when its name says NVSwitch or its device id is
one of the NVSwitch ids (1ac0-1ac2 first generation, 1af1 A100, 22a3 H100); NVIDIA chipset bridges of
old nForce boards (an MCP's Ethernet is class 0680 too) do not. A paste without any NVSwitch leaves the
count None: a filtered paste (`-s`, `-d`) cannot say there are none. `lspci -vv` run without root
prints "Capabilities: <access denied>": links are then None.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .pasted import MAX_GPUS, bounded_lines, bus_id, bus_key
from .reading import GpuReading, HostReading, PcieLink

KIND = "lspci -vv"
GT_PER_GEN = {"2.5": 1, "5": 2, "8": 3, "16": 4, "32": 5, "64": 6}
GPU_CLASSES = {"VGA compatible controller": "0300", "3D controller": "0302", "Display controller": "0380"}
NVSWITCH_IDS = frozenset({"1ac0", "1ac1", "1ac2", "1af1", "22a3"})
MAX_DEVICES = 16384

_HEADER = re.compile(r"((?:[0-9A-Fa-f]{4,8}:)?[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7]) ([^:\[]{1,60}?)(?: \[([0-9A-Fa-f]{4})\])?: (.{1,400})")
_IDS = re.compile(r"\[([0-9A-Fa-f]{4}):([0-9A-Fa-f]{4})\]")
_UNNAMED = re.compile(r"Device ([0-9A-Fa-f]{4})\b")
_SPEED = re.compile(r"Speed (\d{1,2}(?:\.\d)?)GT/s")
_WIDTH = re.compile(r"Width x(\d{1,2})\b")
_SECONDARY = re.compile(r"secondary=([0-9A-Fa-f]{2})\b")
_TRAILERS = (" (rev ", " (prog-if ")
_NAMED = re.compile(r"# ?lspci -vv{0,2} -s ([0-9A-Fa-f:.]{7,16}) {1,4}\((GPU function|upstream bridge of ([0-9A-Fa-f:.]{7,16})):.{0,200}")


@dataclass
class _Device:
    address: str  # as GpuReading.bus_id holds it
    domain: int
    bus: int
    kind: str  # "gpu", "nvswitch", "bridge", "other"
    name: str
    line: int
    cap_gen: int | None = None
    cap_width: int | None = None
    sta_gen: int | None = None
    sta_width: int | None = None
    secondary: int | None = None
    upstream_of: tuple[int, int, int, int] | None = None  # the GPU a "(upstream bridge of …)" header names


def is_lspci_header(line: str) -> bool:
    """A device line of lspci: "01:00.0 VGA compatible controller: NVIDIA …" at the start of a line."""
    return _HEADER.fullmatch(line.strip()) is not None or _NAMED.fullmatch(line.strip()) is not None


def _classify(klass: str, class_code: str | None, description: str) -> str:
    nvidia = description.lower().startswith("nvidia corporation") or "[10de:" in description.lower()
    if nvidia and (klass in GPU_CLASSES or class_code in GPU_CLASSES.values()):
        return "gpu"
    if nvidia and (klass == "Bridge" or class_code == "0680"):
        ids = _IDS.search(description)
        unnamed = _UNNAMED.search(description)
        device = (ids.group(2) if ids else unnamed.group(1) if unnamed else "").lower()
        return "nvswitch" if "nvswitch" in description.lower() or device in NVSWITCH_IDS else "other"
    if klass == "PCI bridge" or class_code == "0604":
        return "bridge"
    return "other"


def _name(description: str) -> str:
    """ "NVIDIA Corporation GA100 [A100 SXM4 40GB] [10de:20b0] (rev a1)" → "GA100 [A100 SXM4 40GB]"."""
    for trailer in _TRAILERS:
        at = description.find(trailer)
        if at >= 0:
            description = description[:at]
    description = _IDS.sub("", description).strip()
    for vendor in ("NVIDIA Corporation ", "nVidia Corporation "):
        if description.startswith(vendor):
            return description[len(vendor) :].strip()
    return description


def _link(value: str) -> tuple[int | None, int | None]:
    speed = _SPEED.search(value)
    width = _WIDTH.search(value)
    return (GT_PER_GEN.get(speed.group(1)) if speed else None, int(width.group(1)) if width else None)


def _devices(lines: list[str]) -> list[_Device]:
    devices: list[_Device] = []
    current: _Device | None = None
    for number, raw in enumerate(lines, 1):
        line = raw.strip()
        named = _NAMED.fullmatch(line)
        if named is not None:
            current = _named(named, number)
            if current is not None and len(devices) < MAX_DEVICES:
                devices.append(current)
            continue
        header = _HEADER.fullmatch(line)
        if header is not None:
            if len(devices) >= MAX_DEVICES:
                break
            address, klass, class_code, description = header.groups()
            key = bus_key(address)
            normal = bus_id(address)
            if key is None or normal is None:
                current = None
                continue
            current = _Device(normal, key[0], key[1], _classify(klass.strip(), class_code, description), _name(description), number)
            devices.append(current)
            continue
        if current is None:
            continue
        if line.startswith("LnkCap:") and current.cap_width is None:
            current.cap_gen, current.cap_width = _link(line)
        elif line.startswith("LnkSta:") and current.sta_width is None:
            current.sta_gen, current.sta_width = _link(line)
        elif line.startswith("Bus: ") and current.secondary is None:
            secondary = _SECONDARY.search(line)
            current.secondary = int(secondary.group(1), 16) if secondary else None
    return devices


def _named(match: re.Match[str], number: int) -> _Device | None:
    key, normal = bus_key(match.group(1)), bus_id(match.group(1))
    if key is None or normal is None:
        return None
    if match.group(2) == "GPU function":
        return _Device(normal, key[0], key[1], "gpu", "", number)
    return _Device(normal, key[0], key[1], "bridge", "", number, upstream_of=bus_key(match.group(3)))


def parse_lspci(text: str) -> HostReading | None:
    """NVIDIA GPUs and NVSwitches from `lspci -vv`; None when the text shows neither."""
    devices = _devices(bounded_lines(text))
    gpus = [device for device in devices if device.kind == "gpu"][:MAX_GPUS]
    switches = sum(1 for device in devices if device.kind == "nvswitch")
    if not gpus and not switches:
        return None
    bridges = [device for device in devices if device.kind == "bridge"]
    ports = {(device.domain, device.secondary): device for device in bridges if device.secondary is not None}
    named_ports = {device.upstream_of: device for device in bridges if device.upstream_of is not None}
    readings = []
    for position, gpu in enumerate(gpus):
        key = bus_key(gpu.address)
        port = (named_ports.get(key) if key is not None else None) or ports.get((gpu.domain, gpu.bus))
        link = PcieLink(
            gen_current=gpu.sta_gen,
            gen_max=gpu.cap_gen,
            width_current=gpu.sta_width,
            width_max=gpu.cap_width,
            slot_gen_max=port.cap_gen if port is not None else None,
            slot_width_max=port.cap_width if port is not None else None,
        )
        readings.append(GpuReading(index=position, name=gpu.name or None, bus_id=gpu.address, pcie=link, line=gpu.line))
    return HostReading(
        KIND,
        gpus=tuple(readings),
        pci_gpus=tuple(gpu.address for gpu in gpus),
        nvswitches=switches or None,
    )
