"""`nvidia-smi -q` (the text report, whole or a fragment a person pasted) and `nvidia-smi -q -x` (its XML)
read into a HostReading.

Both sources are first reduced to the same named raw fields (smifields.FIELDS: the text report's labels
and the XML's tags for each), then one conversion (smifields.gpu_reading) turns those into a GpuReading,
so a value means the same whichever form it came in. A field the capture does not show, or shows as N/A,
deprecated or not supported, stays None. Linear in the size of the input: the text is read line by line with a stack of
open sections, the XML by expat with a bounded tree; nothing is expanded (no DTD internal subset, no
entity declaration), and oversized inputs, lines and nestings are refused or skipped.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from xml.parsers import expat

from .reading import EVENT_NAMES, ClockEvent, GpuProcess, GpuReading, HostReading
from .smifields import (
    EVENT_SECTIONS,
    EVENTS,
    FIELDS,
    XML_EVENT_SECTIONS,
    active_flag,
    as_int,
    clean,
    gpu_reading,
    mib,
    pending_retirement,
    process_name,
    version_number,
    windows_driver,
)

TEXT_KIND = "nvidia-smi -q"
XML_KIND = "nvidia-smi -q -x"

MAX_INPUT = 16 << 20  # nvidia-smi -q of 8 GPUs is about 100 KB (the XML with supported clocks about 300 KB)
MAX_LINE = 4096  # a longer line is no nvidia-smi field: skipped
MAX_LINES = 200_000  # `-q` of 64 GPUs is about 25,000 lines
MAX_DEPTH = 12  # sections nest 5 deep in -q; deeper lines are skipped
MAX_GPUS = 64
MAX_FIELDS = 4096  # fields kept per GPU block (a full block has about 300 lines)
MAX_PROCESSES = 1024
MAX_XML_DEPTH = 6  # nvidia_smi_log/gpu/ecc_errors/volatile/double_bit/total
MAX_XML_NODES = 200_000
MAX_XML_TEXT = 512


# --- the text report -----------------------------------------------------------------------------

TEXT_LOOKUPS = {name: paths for name, (paths, _tags) in FIELDS.items()}
KNOWN_LABELS = frozenset(path[-1] for paths in TEXT_LOOKUPS.values() for path in paths) | frozenset(EVENTS) | {"processes"}
# a fragment with none of the report's markers is one when one of these sections holds a field
KNOWN_SECTIONS = frozenset(label for paths in TEXT_LOOKUPS.values() for path in paths for label in path[:-1]) | frozenset(EVENT_SECTIONS)
PROCESS_LABELS = ("process id", "name", "used gpu memory")
SUFFIX = 3  # the sections above a label that a lookup may name
MIG_SECTIONS = frozenset({"mig devices", "mig device"})  # a MIG instance's own memory and ECC: not the GPU's


@dataclass
class _Block:
    """One GPU's fields in the text, by (sections above, label) for each suffix of the sections."""

    line: int | None
    bus_id: str | None = None
    fields: dict[tuple[tuple[str, ...], str], str] = field(default_factory=dict)
    kept: int = 0
    events: dict[ClockEvent, bool] = field(default_factory=dict)
    processes_shown: bool = False
    processes: list[list[str | None]] = field(default_factory=list)  # [pid, name, used] in the order shown
    known_section: bool = False

    def add(self, path: tuple[str, ...], label: str, value: str) -> None:
        section = path[-1] if path else ""
        if section in KNOWN_SECTIONS:
            self.known_section = True
        active = active_flag(value) if section in EVENT_SECTIONS and label in EVENTS else None
        if active is not None:
            self.events.setdefault(EVENTS[label], active)
        if section == "processes" or label == "processes":
            self._process(label, value)
        if label not in KNOWN_LABELS or self.kept >= MAX_FIELDS:
            return
        self.kept += 1
        for size in range(min(SUFFIX, len(path)) + 1):
            self.fields.setdefault((path[len(path) - size :], label), value)

    def _process(self, label: str, value: str) -> None:
        self.processes_shown = True
        if label == "process id" and len(self.processes) < MAX_PROCESSES:
            self.processes.append([value, None, None])
        elif label in PROCESS_LABELS and self.processes:
            self.processes[-1][PROCESS_LABELS.index(label)] = value

    def raw(self, name: str) -> str | None:
        for path in TEXT_LOOKUPS[name]:
            value = self.fields.get((path[:-1], path[-1]))
            if value is not None:
                cleaned = clean(value)
                if cleaned is not None:
                    return cleaned
        return None

    def retired_pending(self) -> bool | None:
        return pending_retirement([clean(self.fields.get((path[:-1], path[-1]))) for path in TEXT_LOOKUPS["retired_pending"]])

    def shown_processes(self) -> tuple[GpuProcess, ...] | None:
        if not self.processes_shown:
            return None
        return tuple(GpuProcess(as_int(clean(pid)), process_name(name), mib(clean(used))) for pid, name, used in self.processes)

    def gpu(self, index: int) -> GpuReading:
        events = frozenset(event for event, active in self.events.items() if active) if self.events else None
        return gpu_reading(
            index,
            self.raw,
            bus_id=self.bus_id,
            events=events,
            processes=self.shown_processes(),
            retired_pending=self.retired_pending(),
            line=self.line,
        )


def _gpu_header(stripped: str) -> str | None:
    """The bus id of a GPU block's first line, "GPU 00000000:17:00.0" (older drivers: "GPU 0000:17:00.0")."""
    words = stripped.split()
    if len(words) != 2 or words[0] != "GPU":
        return None
    parts = words[1].split(":")
    hexdigits = "0123456789abcdefABCDEF"
    if len(parts) != 3 or "." not in parts[2] or not all(parts):
        return None
    device, _, function = parts[2].partition(".")
    if not all(c in hexdigits for part in (parts[0], parts[1], device, function) for c in part):
        return None
    return words[1]


HOST_LABELS = ("driver version", "kmd version", "attached gpus")


class _TextReport:
    """The report read line by line: GPU blocks start at their "GPU 0000…" line; within one, the open sections are a
    stack of (indent, path to and with the section; None at MAX_DEPTH or inside a MIG device)."""

    def __init__(self) -> None:
        self.preamble = _Block(line=None)  # before the first GPU line: the host's fields, or a fragment's only GPU
        self.blocks: list[_Block] = []
        self.current = self.preamble
        self.stack: list[tuple[int, tuple[str, ...] | None]] = []
        self.marked = False  # "NVSMI LOG" or "Attached GPUs": the report's own head
        self.host: dict[str, str] = {}

    def read(self, number: int, line: str) -> bool:
        """Takes one line; False once no more GPU blocks are taken."""
        stripped = line.strip()
        if not stripped:
            return True
        if self.current is self.preamble and self.preamble.line is None:
            self.preamble.line = number
        if "NVSMI LOG" in stripped:
            self.marked = True
            return True
        bus_id = _gpu_header(stripped)
        if bus_id is not None:
            if len(self.blocks) >= MAX_GPUS:
                return False
            self.current = _Block(line=number, bus_id=bus_id)
            self.blocks.append(self.current)
            self.stack.clear()
            return True
        indent = len(line) - len(line.lstrip())
        while self.stack and self.stack[-1][0] >= indent:
            self.stack.pop()
        parent = self.stack[-1][1] if self.stack else ()
        label, colon, value = stripped.partition(":")
        label = " ".join(label.lower().split())
        if not colon or not value.strip():  # a section: its fields follow, indented
            inner = None if parent is None or len(parent) >= MAX_DEPTH or label in MIG_SECTIONS else (*parent, label)
            self.stack.append((indent, inner))
            if inner is not None and label == "processes":
                self.current.processes_shown = True
        elif parent == () and self.current is self.preamble and label in HOST_LABELS:
            self.host.setdefault(label, value)
            self.marked = self.marked or label == "attached gpus"
        elif parent is not None:
            self.current.add(parent, label, value)
        return True

    def reading(self) -> HostReading | None:
        # every GPU line is a GPU, whatever its block shows (`-q -d VOLTAGE` shows nothing read here); without any,
        # the fragment is one GPU where it holds something read here
        blocks = self.blocks or [block for block in (self.preamble,) if block.kept or block.processes_shown or block.events]
        if not (self.marked or any(block.known_section or (block.bus_id and block.kept) for block in blocks)):
            return None
        gpus = tuple(block.gpu(index) for index, block in enumerate(blocks))
        driver = version_number(clean(self.host.get("kmd version"))) or version_number(clean(self.host.get("driver version")))
        return HostReading(TEXT_KIND, gpus=gpus, driver_version=driver, windows=any(windows_driver(block.raw) for block in blocks))


def parse_q_text(text: str) -> HostReading | None:
    """The `nvidia-smi -q` report, whole or a fragment (`-q -d PCI`, one section copied by hand, with or without its
    "GPU 0000…" line); None where the text is none of these. A fragment without a GPU line is GPU 0."""
    if len(text) > MAX_INPUT:
        return None
    report = _TextReport()
    for number, line in enumerate(text.split("\n", MAX_LINES), start=1):
        if number > MAX_LINES:  # the unsplit rest
            break
        if line and len(line) <= MAX_LINE and not report.read(number, line.rstrip("\r").expandtabs(4)):
            break
    return report.reading()


# --- the XML -------------------------------------------------------------------------------------


@dataclass
class _Element:
    tag: str
    line: int
    ident: str | None = None
    children: list[_Element] = field(default_factory=list)
    text: str = ""

    def find(self, path: str) -> _Element | None:
        node: _Element | None = self
        for tag in path.split("/"):
            node = next((child for child in node.children if child.tag == tag), None) if node is not None else None
        return node

    def text_of(self, path: str) -> str | None:
        found = self.find(path)
        return found.text if found is not None else None

    def value(self, path: str) -> str | None:
        return clean(self.text_of(path))


class _Refused(Exception):
    """The XML declares a DTD internal subset or an entity: never expanded."""


def _xml_tree(text: str) -> _Element | None:
    """The document as a bounded tree (MAX_XML_DEPTH levels, MAX_XML_NODES elements, MAX_XML_TEXT characters of
    text each; the long supported-clocks lists left out), each element with its line. A truncated document gives
    what was read before the end; one that declares entities or an internal DTD subset gives None."""
    parser = expat.ParserCreate()
    parser.buffer_text = True
    parser.SetParamEntityParsing(expat.XML_PARAM_ENTITY_PARSING_NEVER)
    stack: list[_Element | None] = []
    roots: list[_Element] = []
    count = 0

    def start(tag: str, attributes: dict[str, str]) -> None:
        nonlocal count
        parent = stack[-1] if stack else None
        node = None
        if not stack and not roots:
            node = _Element(tag, parser.CurrentLineNumber)
            roots.append(node)
        elif parent is not None and len(stack) < MAX_XML_DEPTH and count < MAX_XML_NODES and parent.tag != "supported_clocks":
            node = _Element(tag, parser.CurrentLineNumber, attributes.get("id") if len(stack) == 1 else None)
            parent.children.append(node)
            count += 1
        stack.append(node)

    def end(tag: str) -> None:
        stack.pop()

    def characters(data: str) -> None:
        node = stack[-1] if stack else None
        if node is not None and len(node.text) < MAX_XML_TEXT:
            node.text += data[: MAX_XML_TEXT - len(node.text)]

    def doctype(name: str, system_id: str | None, public_id: str | None, internal_subset: int) -> None:
        if internal_subset:  # nvidia-smi writes `<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v12.dtd">`, no subset
            raise _Refused

    def declared(*_arguments: object) -> None:
        raise _Refused

    parser.StartElementHandler = start
    parser.EndElementHandler = end
    parser.CharacterDataHandler = characters
    parser.StartDoctypeDeclHandler = doctype
    parser.EntityDeclHandler = declared
    parser.UnparsedEntityDeclHandler = declared
    try:
        parser.Parse(text, True)
    except _Refused:
        return None
    except (expat.ExpatError, UnicodeError, RecursionError):
        pass  # truncated or broken: what was read before the fault stands
    return roots[0] if roots else None


def parse_q_xml(text: str) -> HostReading | None:
    """`nvidia-smi -q -x` (<nvidia_smi_log>, DTD versions v10 to v13); None where the text is not that XML, is too
    large, or declares entities. A document cut short gives the GPUs read before the cut."""
    if len(text) > MAX_INPUT or "<!ENTITY" in text:
        return None
    root = _xml_tree(text.lstrip("\ufeff"))
    if root is None or root.tag != "nvidia_smi_log":
        return None
    gpus = []
    windows = False
    for index, element in enumerate(child for child in root.children if child.tag == "gpu"):
        if index >= MAX_GPUS:
            break

        def raw(name: str, element: _Element = element) -> str | None:
            return next((value for value in map(element.value, FIELDS[name][1]) if value is not None), None)

        windows = windows or windows_driver(raw)
        gpus.append(
            gpu_reading(
                index,
                raw,
                bus_id=element.ident,
                events=_xml_events(element),
                processes=_xml_processes(element),
                retired_pending=pending_retirement([element.value(path) for path in FIELDS["retired_pending"][1]]),
                line=element.line,
            )
        )
    driver = version_number(root.value("kmd_version")) or version_number(root.value("driver_version"))
    return HostReading(XML_KIND, gpus=tuple(gpus), driver_version=driver, windows=windows)


def _xml_events(gpu: _Element) -> frozenset[ClockEvent] | None:
    section = next((found for found in map(gpu.find, XML_EVENT_SECTIONS) if found is not None), None)
    if section is None:
        return None
    shown: dict[ClockEvent, bool] = {}
    for child in section.children:
        event = EVENT_NAMES.get(child.tag.partition("_reason_")[2])
        active = active_flag(clean(child.text))
        if event is not None and active is not None:
            shown.setdefault(event, active)
    return frozenset(event for event, active in shown.items() if active) if shown else None


def _xml_processes(gpu: _Element) -> tuple[GpuProcess, ...] | None:
    section = gpu.find("processes")
    if section is None:
        return None
    return tuple(
        GpuProcess(as_int(info.value("pid")), process_name(info.text_of("process_name")), mib(info.value("used_memory")))
        for info in section.children[:MAX_PROCESSES]
        if info.tag == "process_info"
    )
