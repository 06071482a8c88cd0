"""`nvidia-smi nvlink -s` (per GPU, each link's speed or "<inactive>") and `nvidia-smi topo -m` (the
GPU-to-GPU matrix: X, NV#, PIX, PXB, PHB, NODE, SYS) as HostReadings.

`nvlink -s`: a GPU whose block lists links gets them all (active with their per-direction speed, or
inactive); a GPU listed with no link lines has none shown (an empty tuple); a GPU for which NVML says
"all links are inActive" has no count to go by, so its links stay None and the line is kept as a
note. Lines of `nvlink -R` or `-c` in the same paste ("Link 0: Remote Device …") are not status and are
skipped; blocks of the same GPU are combined.

`topo -m`: the matrix's GPU rows (NIC and mlx5 rows and columns, CPU/NUMA affinity are read past); a
row whose cells are not all connection kinds is skipped. Links hold each GPU pair once (lower index
first), as the row of the lower index gives it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .pasted import MAX_GPUS, bounded_lines, strip_ansi
from .reading import GpuReading, HostReading, NvLink, Topology

NVLINK_KIND = "nvidia-smi nvlink -s"
TOPO_KIND = "nvidia-smi topo -m"
MAX_LINKS = 64  # per GPU; NVLink 5 has 18
MAX_COLUMNS = 256  # devices in a `topo -m` matrix (GPUs and NICs of one host)
ALL_INACTIVE = "all links are inactive"
CONNECTIONS = frozenset({"X", "SYS", "NODE", "PHB", "PXB", "PIX", "SOC"})  # SOC: SYS before driver 396

_GPU_LINE = re.compile(r"GPU (\d{1,4}): (.{1,200})")
_LINK_LINE = re.compile(r"Link (\d{1,3}): (.{1,200})")
_SPEED = re.compile(r"(\d{1,4}(?:\.\d{1,4})?) GB/s")
_NV = re.compile(r"NV\d{1,3}")
_DEVICE = re.compile(r"(GPU|NIC|mlx5_)(\d{1,4})")


@dataclass
class _LinkBlock:
    index: int
    name: str | None
    uuid: str | None
    line: int
    links: dict[int, NvLink] = field(default_factory=dict)
    other_links: bool = False  # -R / -c lines: the block is not status
    all_inactive: bool = False


def _gpu_header(text: str) -> tuple[int, str | None, str | None] | None:
    """ "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-…)" → (0, name, uuid)."""
    match = _GPU_LINE.fullmatch(text)
    if match is None:
        return None
    rest = match.group(2).strip()
    uuid = None
    at = rest.rfind(" (UUID: ")
    if at >= 0 and rest.endswith(")"):
        value = rest[at + len(" (UUID: ") : -1].strip()
        uuid = value if value.startswith(("GPU-", "MIG-")) else None
        rest = rest[:at].strip()
    return int(match.group(1)), rest or None, uuid


def is_nvlink_start(line: str, following: str) -> bool:
    """A `GPU n: … (UUID: …)` line followed by a link line or NVML's note: where `nvlink -s` begins."""
    stripped = strip_ansi(line).strip()
    nxt = strip_ansi(following).strip()
    return _gpu_header(stripped) is not None and "(UUID:" in stripped and (_LINK_LINE.fullmatch(nxt) is not None or nxt.startswith("NVML:"))


def parse_nvlink_status(text: str) -> HostReading | None:
    """`nvidia-smi nvlink -s` (also `--status`, `-s -i N`); None when no GPU's link status is shown."""
    blocks: list[_LinkBlock] = []
    current: _LinkBlock | None = None
    for number, raw in enumerate(bounded_lines(text), 1):
        line = strip_ansi(raw).strip()
        header = _gpu_header(line)
        if header is not None:
            if len(blocks) >= MAX_GPUS * 2:
                break
            current = _LinkBlock(header[0], header[1], header[2], number)
            blocks.append(current)
            continue
        if current is None:
            continue
        if ALL_INACTIVE in line.lower():
            current.all_inactive = True
            continue
        link = _LINK_LINE.fullmatch(line)
        if link is None or len(current.links) >= MAX_LINKS:
            continue
        value = link.group(2).strip()
        speed = _SPEED.fullmatch(value)
        if value.lower() == "<inactive>":
            current.links[int(link.group(1))] = NvLink(int(link.group(1)), active=False)
        elif speed is not None:
            current.links[int(link.group(1))] = NvLink(int(link.group(1)), active=True, speed_gbps=float(speed.group(1)))
        else:
            current.other_links = True
    status = [block for block in blocks if block.links or block.all_inactive or not block.other_links]
    if not any(block.links or block.all_inactive for block in status):
        return None
    return _nvlink_reading(status)


def _nvlink_reading(blocks: list[_LinkBlock]) -> HostReading:
    """One GPU per index, the links of its blocks combined (a paste may hold `-s` twice)."""
    merged: dict[int, _LinkBlock] = {}
    for block in blocks:
        known = merged.setdefault(block.index, _LinkBlock(block.index, block.name, block.uuid, block.line))
        known.name, known.uuid = known.name or block.name, known.uuid or block.uuid
        known.links.update(block.links)
        known.all_inactive = known.all_inactive or block.all_inactive
        if len(merged) >= MAX_GPUS:
            break
    gpus = []
    notes = []
    for index in sorted(merged):
        block = merged[index]
        links = tuple(block.links[key] for key in sorted(block.links))
        if block.all_inactive and not links:
            notes.append(f"GPU {index}: NVML: Unable to retrieve NVLink information as all links are inActive")
        nvlinks = None if block.all_inactive and not links else links
        gone = block.all_inactive and not links
        gpus.append(GpuReading(index=index, name=block.name, uuid=block.uuid, nvlinks=nvlinks, nvlinks_all_inactive=gone, line=block.line))
    return HostReading(NVLINK_KIND, gpus=tuple(gpus), notes=tuple(notes))


def topo_columns(line: str) -> list[str] | None:
    """The device columns of a `topo -m` header line ("GPU0 GPU1 NIC0 CPU Affinity …" → GPU0, GPU1,
    NIC0), or None when the line is not one: it starts with GPU0 and its next word is not a cell."""
    words = strip_ansi(line).split()
    if len(words) < 2 or words[0] != "GPU0" or words[1] == "X" or words[1] in CONNECTIONS:
        return None
    columns = []
    for word in words[:MAX_COLUMNS]:
        if _DEVICE.fullmatch(word) is None:
            break
        columns.append(word)
    return columns


def parse_topo(text: str) -> HostReading | None:
    """`nvidia-smi topo -m`; None when the text has no matrix (an error message, another command)."""
    lines = bounded_lines(text)
    columns = None
    start = 0
    for number, line in enumerate(lines):
        columns = topo_columns(line)
        if columns:
            start = number + 1
            break
    if not columns:
        return None
    gpus: list[GpuReading] = []
    links: dict[tuple[int, int], str] = {}
    for number in range(start, len(lines)):
        words = strip_ansi(lines[number]).split()
        if not words:
            if gpus:
                break
            continue
        row = _DEVICE.fullmatch(words[0])
        if row is None:
            break
        cells = words[1 : 1 + len(columns)]
        if row.group(1) != "GPU" or len(cells) < len(columns) or not all(_is_connection(cell) for cell in cells):
            continue
        index = int(row.group(2))
        if len(gpus) < MAX_GPUS:
            gpus.append(GpuReading(index=index, line=number + 1))
        for column, cell in zip(columns, cells, strict=True):
            peer = _DEVICE.fullmatch(column)
            if peer is not None and peer.group(1) == "GPU" and int(peer.group(2)) > index:
                links[(index, int(peer.group(2)))] = cell
    if not gpus:
        return None
    return HostReading(TOPO_KIND, gpus=tuple(gpus), topology=Topology(links=links))


def _is_connection(cell: str) -> bool:
    return cell in CONNECTIONS or _NV.fullmatch(cell) is not None
