"""A pasted text recognised by its content and read by the parser of its kind: nvidia-smi's table,
`-q -x`, `-q`, `--query-gpu` and `--query-compute-apps` CSV, `nvlink -s`, `topo -m`, and `lspci -vv`.

One paste may hold several captures (a ticket with `nvidia-smi`, then `topo -m`, then `nvlink -s`). The
text is cut into segments where a capture recognisably starts (the table's `NVIDIA-SMI … Driver
Version` line, `==============NVSMI LOG==============`, `<?xml`/`<nvidia_smi_log`, a CSV header line of
nvidia-smi field names, a `topo -m` header row, a `GPU n: … (UUID: …)` line followed by a link line, an
lspci device line); each segment runs to the next start and is read by its own parser. Starts are
looked for in the first MiB only (a ticket is far smaller; the cost of a 16 MiB paste stays a scan). A
text with no recognisable start has its head tried by each parser in turn (a `noheader` CSV is read so).

The readings are then merged into one, the driver's views first (`-q -x`, `-q`, table, --query-gpu, in
the order pasted), then the rest: a GPU of a later reading is the same GPU as one already read when their
bus ids match, else their UUIDs (a masked all-zero UUID matches nothing), else - between nvidia-smi
readings, which all number GPUs as nvidia-smi does - their index. A matched GPU keeps every value
already read and takes the later reading's values only where it had none. An lspci GPU that matches
none is not added (it is in pci_gpus: a GPU the driver does not show); a --query-compute-apps CSV gives
every GPU it does not list an empty process list. The topology, NVSwitch count and PCI GPUs come from
whichever reading has them; a GPU's `line` is where its block starts in the whole paste.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable
from dataclasses import fields, replace
from typing import Any

from . import lspci, smicsv, smilinks, smitable
from .pasted import MAX_TEXT_CHARS, bounded_lines, bus_key, strip_ansi
from .reading import Clocks, GpuReading, HostReading, MemoryFaults, PcieLink

Q_TEXT = "nvidia-smi -q"
Q_XML = "nvidia-smi -q -x"
TABLE, CSV, NVLINK, TOPO, LSPCI = "table", "csv", "nvlink", "topo", "lspci"
MAX_SEGMENTS = 64
HEAD_CHARS = 1 << 20  # captures are recognised by starts within the paste's first MiB
HEX_DIGITS = frozenset("0123456789abcdefABCDEF")
DRIVER_VIEWS = (Q_XML, Q_TEXT, smitable.KIND, smicsv.QUERY_GPU)  # reading kinds, merged first
INDEXED_KINDS = (smicsv.QUERY_GPU, smitable.KIND, smilinks.NVLINK_KIND, smilinks.TOPO_KIND)  # nvidia-smi's numbering
MASKED_UUID = "GPU-00000000-0000-0000-0000-000000000000"
Q_SECTIONS = (
    "Attached GPUs",
    "Product Name",
    "GPU Link Info",
    "Clocks Event Reasons",
    "Clocks Throttle Reasons",
    "Remapped Rows",
    "Retired Pages",
)
_Q_GPU = re.compile(r"GPU [0-9A-Fa-f]{8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7]")


def _q_parser(name: str) -> Callable[[str], Any] | None:
    """smiquery's parse_q_xml / parse_q_text, looked up when needed (that module is another's)."""
    try:
        module = importlib.import_module(f"{__package__}.smiquery")
    except ImportError:
        return None
    parser = getattr(module, name, None)
    return parser if callable(parser) else None


def _parse_q_xml(text: str) -> HostReading | None:
    parser = _q_parser("parse_q_xml")
    result = parser(text) if parser is not None else None
    return result if isinstance(result, HostReading) else None


def _parse_q_text(text: str) -> HostReading | None:
    parser = _q_parser("parse_q_text")
    result = parser(text) if parser is not None else None
    return result if isinstance(result, HostReading) else None


PARSERS: dict[str, Callable[[str], HostReading | None]] = {
    TABLE: smitable.parse_table,
    Q_XML: _parse_q_xml,
    Q_TEXT: _parse_q_text,
    CSV: smicsv.parse_query_csv,
    NVLINK: smilinks.parse_nvlink_status,
    TOPO: smilinks.parse_topo,
    LSPCI: lspci.parse_lspci,
}


def _q_label(stripped: str) -> bool:
    """A `-q` section line ("GPU Link Info") or field padded to its colon ("Product Name     : …"); an
    lspci VPD line ("Product Name: …", the colon right after the name) is not one."""
    for label in Q_SECTIONS:
        if stripped.startswith(label):
            rest = stripped[len(label) :]
            return not rest or (rest.startswith(" ") and rest.lstrip().startswith(":"))
    return False


def _start_of(line: str, following: str, current: str | None) -> str | None:
    """The kind of capture that starts at this line, if one does; the table is looked for before `-q`
    (its header also says "Driver Version"), and a line continuing the current kind starts nothing.
    Most lines are turned away by their first character."""
    stripped = line.strip()
    if not stripped:
        return None
    first = stripped[0]
    if "NVIDIA-SMI" in stripped and smitable.is_table_header(stripped):
        return TABLE
    if current != TABLE and first == "|" and smitable.is_mig_devices_header(stripped):
        return TABLE
    if first == "<":
        if stripped.startswith("<?xml") or stripped.startswith("<nvidia_smi_log"):
            return None if current == Q_XML and stripped.startswith("<nvidia_smi_log") else Q_XML
        return None
    if "NVSMI LOG" in stripped:
        return Q_TEXT
    if current != Q_TEXT and (_Q_GPU.fullmatch(stripped) or _q_label(stripped)):
        return Q_TEXT  # a fragment of `-q` (one GPU's block, or `-q -d PCI,CLOCK`'s sections)
    if first == "G":
        if current != NVLINK and smilinks.is_nvlink_start(stripped, following):
            return NVLINK
        if smilinks.topo_columns(stripped):
            return TOPO
    if (first == "#" or first in HEX_DIGITS) and current != LSPCI and lspci.is_lspci_header(stripped):
        return LSPCI
    if first.isalpha() and smicsv.header_columns(stripped) is not None:
        return CSV
    return None


def segments(lines: list[str]) -> list[tuple[str, int, int]]:
    """(kind, first line, end line) of each capture in the paste, in order; 0-based, end exclusive.
    Starts are looked for in the paste's head (HEAD_CHARS): past it, lines belong to the last capture."""
    found: list[tuple[str, int]] = []
    current: str | None = None
    seen = 0
    for number, line in enumerate(lines):
        seen += len(line) + 1
        if seen > HEAD_CHARS or len(found) >= MAX_SEGMENTS:
            break
        following = lines[number + 1] if number + 1 < len(lines) else ""
        kind = _start_of(strip_ansi(line), following, current)
        if kind is not None:
            found.append((kind, number))
            current = kind
    return [(kind, start, found[at + 1][1] if at + 1 < len(found) else len(lines)) for at, (kind, start) in enumerate(found)]


def read_capture(text: str) -> HostReading | None:
    """The GPUs a pasted capture shows, as one HostReading; None when the text is none of the kinds
    read here, is binary, or is larger than MAX_TEXT_CHARS (refused, not cut)."""
    if len(text) > MAX_TEXT_CHARS or "\x00" in text[:HEAD_CHARS]:
        return None
    lines = bounded_lines(text)
    found = segments(lines)
    readings: list[tuple[str, HostReading]] = []
    for kind, start, end in found:
        reading = PARSERS[kind]("\n".join(lines[start:end]))
        if reading is not None:
            readings.append((kind, _shifted(reading, start)))
    if not readings:  # no start recognised: each parser of an unmarked kind tries the head
        for kind, parser in PARSERS.items():
            reading = parser(text[:HEAD_CHARS]) if kind not in (Q_XML, Q_TEXT) else None
            if reading is not None:
                readings.append((kind, reading))
                break
    if not readings:
        return None
    ordered = [reading for _, reading in readings if reading.kind in DRIVER_VIEWS] + [
        reading for _, reading in readings if reading.kind not in DRIVER_VIEWS
    ]
    merged = ordered[0]
    for reading in ordered[1:]:
        merged = merge(merged, reading)
    return merged


def _shifted(reading: HostReading, offset: int) -> HostReading:
    """Line numbers of a segment's reading as lines of the whole paste."""
    if offset == 0:
        return reading
    return replace(reading, gpus=tuple(replace(gpu, line=gpu.line + offset if gpu.line is not None else None) for gpu in reading.gpus))


def _same(gpu: GpuReading, other: GpuReading, by_index: bool) -> bool:
    ours, theirs = bus_key(gpu.bus_id), bus_key(other.bus_id)
    if ours is not None and theirs is not None:
        return ours == theirs
    if gpu.uuid and other.uuid and MASKED_UUID not in (gpu.uuid, other.uuid):
        return gpu.uuid == other.uuid
    return by_index and gpu.index == other.index


def _filled(first: Any, second: Any) -> Any:
    """first with its None fields taken from second (the nested values field by field)."""
    changes = {}
    for item in fields(first):
        mine, theirs = getattr(first, item.name), getattr(second, item.name)
        if isinstance(mine, (PcieLink, Clocks, MemoryFaults)):
            changes[item.name] = _filled(mine, theirs)
        elif mine is None and theirs is not None:
            changes[item.name] = theirs
    return replace(first, **changes) if changes else first


def merge(base: HostReading, other: HostReading) -> HostReading:
    """base with other's GPUs matched into it (see the module's doc) and its host values filled in."""
    by_index = base.kind.split(" + ")[0] in (*INDEXED_KINDS, Q_XML, Q_TEXT) and other.kind in INDEXED_KINDS
    gpus = list(base.gpus)
    matched: set[int] = set()
    for gpu in other.gpus:
        at = next((position for position, mine in enumerate(gpus) if _same(mine, gpu, by_index)), None)
        if at is None:
            if other.kind not in (lspci.KIND, smilinks.TOPO_KIND) or not gpus:  # they add no GPU to a driver's list
                gpus.append(gpu)
            continue
        matched.add(at)
        gpus[at] = _filled(gpus[at], gpu)
    if other.kind == smicsv.COMPUTE_APPS:
        gpus = [gpu if at in matched or gpu.processes is not None else replace(gpu, processes=()) for at, gpu in enumerate(gpus)]
    return HostReading(
        kind=f"{base.kind} + {other.kind}",
        gpus=tuple(gpus),
        driver_version=base.driver_version or other.driver_version,
        windows=base.windows or other.windows,
        topology=base.topology if base.topology is not None else other.topology,
        pci_gpus=base.pci_gpus if base.pci_gpus is not None else other.pci_gpus,
        visible_devices=base.visible_devices if base.visible_devices is not None else other.visible_devices,
        nvswitches=base.nvswitches if base.nvswitches is not None else other.nvswitches,
        fabric_manager_running=base.fabric_manager_running if base.fabric_manager_running is not None else other.fabric_manager_running,
        notes=base.notes + other.notes,
    )
