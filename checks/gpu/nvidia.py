"""The NVIDIA stack as its tools describe it: nvidia-smi (XML and text), NVML, nvcc, CUDA's
version.json, torch/version.py, kernel log lines, and the toolkit → driver compatibility rules."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from decode_doctor.i18n import _, said

from .contract import DriverInfo, GpuDevice

PYTORCH_CUDA_BUILDS = ("11.8", "12.1", "12.4", "12.6", "12.8", "12.9", "13.0")


def _text(node: ET.Element | None, path: str) -> str | None:
    if node is None:
        return None
    found = node.find(path)
    if found is None or found.text is None:
        return None
    value = found.text.strip()
    return None if value in ("", "N/A", "Not Supported", "[N/A]") else value


VERSION = re.compile(r"\d{1,4}(?:\.\d{1,6}){0,3}")


def _version(value: str | None) -> str | None:
    """A version number, or None for "Not Found", "N/A" and the like (a vGPU host says "Not Found")."""
    return value if value is not None and VERSION.fullmatch(value.strip()) else None


def _number(value: str | None) -> int | None:
    match = re.match(r"\s*(\d+)", value or "")
    return int(match.group(1)) if match else None


def parse_smi_xml(text: str) -> DriverInfo:
    """`nvidia-smi -q -x`, drivers 418 (no DOCTYPE) to 595+; fields looked up where each generation puts them."""
    if "<!ENTITY" in text or re.search(r"<!DOCTYPE[^>\[]*\[", text):  # nvidia-smi declares neither: never expanded
        raise ValueError(said("nvidia-smi -q -x printed XML that declares entities or a DTD subset: refused"))
    try:
        root = ET.fromstring(text.strip())
    except ET.ParseError as exc:
        raise ValueError(said("nvidia-smi -q -x printed XML that does not parse: {error}", error=str(exc))) from None
    if root.tag != "nvidia_smi_log":
        raise ValueError(said("nvidia-smi -q -x printed <{tag}>, not <nvidia_smi_log>", tag=root.tag))
    attached = _number(_text(root, "attached_gpus"))
    devices: list[GpuDevice] = []
    for position, gpu in enumerate(root.findall("gpu")):
        minor = _number(_text(gpu, "minor_number"))
        devices.append(
            GpuDevice(
                index=minor if minor is not None else position,
                name=_text(gpu, "product_name") or "unknown NVIDIA GPU",
                memory_mib=_number(_text(gpu, "fb_memory_usage/total")),
                architecture=_text(gpu, "product_architecture"),
                mig_mode=_text(gpu, "mig_mode/current_mig"),
                bus_id=gpu.get("id") or _text(gpu, "pci/pci_bus_id"),
                uuid=_text(gpu, "uuid"),
                max_mem_clock_mhz=_number(_text(gpu, "max_clocks/mem_clock")),
            )
        )
    listed = len(devices)
    notes = (
        (said("attached_gpus says {attached} but the output lists {listed}", attached=attached, listed=listed),)
        if attached not in (None, listed)
        else ()
    )
    return DriverInfo(
        _version(_text(root, "driver_version")) or _version(_text(root, "kmd_version")),
        _version(_text(root, "cuda_version")) or _version(_text(root, "cuda_umd_version")),
        tuple(devices),
        attached,
        "nvidia-smi -q -x",
        notes,
    )


MAX_SMI_TEXT = 8 << 20  # nvidia-smi -q of 8 GPUs is about 100 KB


@dataclass
class _Line:
    indent: int
    label: str
    value: str | None  # None for a section header ("FB Memory Usage")


def _smi_lines(text: str) -> list[_Line]:
    """Each line as (indent, label, value): one pass, no regular expression over the whole text."""
    lines = []
    for raw in text[:MAX_SMI_TEXT].splitlines():
        stripped = raw.strip()
        if not stripped:
            continue
        indent = len(raw) - len(raw.lstrip())
        label, colon, value = stripped.partition(":")
        lines.append(_Line(indent, label.strip(), value.strip() if colon else None))
    return lines


def _smi_value(value: str | None) -> str | None:
    """A field's value without the bracketed note drivers add; None for N/A and deprecated fields."""
    if value is None:
        return None
    value = value.split("[", 1)[0].strip()
    if not value or value.lower().startswith(("deprecated", "n/a")):
        return None
    return value


def _leading_number(value: str | None) -> int | None:
    digits = ""
    for char in (value or "")[:12]:
        if not char.isdecimal():
            break
        digits += char
    return int(digits) if digits and len(digits) <= 9 else None


def _section_field(lines: list[_Line], section: str, label: str) -> str | None:
    """The value of label inside the first section titled section (the lines indented under it)."""
    for at, line in enumerate(lines):
        if line.label == section and line.value is None:
            for inner in lines[at + 1 :]:
                if inner.indent <= line.indent:
                    break
                if inner.label == label:
                    return inner.value
            return None
    return None


def parse_smi_text(text: str) -> DriverInfo:
    """`nvidia-smi -q` as text; driver 610 deprecates 'Driver Version' for 'KMD Version'. Linear in the
    size of the output: one pass splits it into lines, fields are looked up in them."""
    lines = _smi_lines(text)
    top: dict[str, str | None] = {}
    for line in lines:
        if line.indent == 0 and line.value is not None:
            top.setdefault(line.label.lower(), _smi_value(line.value))

    def field_value(label: str) -> str | None:
        return top.get(label.lower())

    devices: list[GpuDevice] = []
    blocks = _gpu_blocks(lines)
    for index, (bus_id, body) in enumerate(blocks):

        def inner(label: str, body: list[_Line] = body) -> str | None:
            value = next((line.value for line in body if line.label == label and line.value is not None), None)
            return value if value and value != "N/A" else None

        mig = _section_field(body, "MIG Mode", "Current")
        devices.append(
            GpuDevice(
                index=index,
                name=inner("Product Name") or "unknown NVIDIA GPU",
                memory_mib=_leading_number(_section_field(body, "FB Memory Usage", "Total")),
                architecture=inner("Product Architecture"),
                mig_mode=mig if mig and mig != "N/A" else None,
                bus_id=bus_id,
                uuid=inner("GPU UUID"),
                max_mem_clock_mhz=_leading_number(_section_field(body, "Max Clocks", "Memory")),
            )
        )
    driver = _version(field_value("KMD Version")) or _version(field_value("Driver Version"))
    if driver is None:
        raise ValueError(said("nvidia-smi -q printed no driver version"))
    cuda = _version(field_value("CUDA UMD Version")) or _version(field_value("CUDA Version"))
    return DriverInfo(driver, cuda, tuple(devices), _number(field_value("Attached GPUs")), "nvidia-smi -q")


def _gpu_blocks(lines: list[_Line]) -> list[tuple[str, list[_Line]]]:
    """GPU sections: a line "GPU 00000000:01:00.0" at column 0 (split at its first colon by _smi_lines),
    then every line up to the next such header."""
    blocks: list[tuple[str, list[_Line]]] = []
    for line in lines:
        words = (line.label + (":" + line.value if line.value is not None else "")).split()
        if line.indent == 0 and len(words) == 2 and words[0] == "GPU" and all(c in BUS_ID_CHARS for c in words[1]):
            blocks.append((words[1], []))
        elif blocks:
            blocks[-1][1].append(line)
    return blocks


BUS_ID_CHARS = frozenset("0123456789abcdefABCDEF:.")


# --- failures --------------------------------------------------------------------------------

SMI_FAILURES = (
    ("fallen-off", re.compile(r"GPU is lost|fallen off the bus", re.I)),
    ("no-driver", re.compile(r"couldn't communicate with the NVIDIA driver", re.I)),
    ("version-mismatch", re.compile(r"Driver/library version mismatch", re.I)),
    ("no-devices", re.compile(r"No devices were found", re.I)),
    ("unknown-error", re.compile(r"Unable to determine the device handle|Unknown Error", re.I)),
    ("missing", re.compile(r"nvidia-smi: (command )?not found|Command 'nvidia-smi' not found", re.I)),
)
KERNEL_PATTERNS = (
    ("off-bus", re.compile(r"GPU ([0-9a-f:.]{1,40})[^.\n]{0,200}?fallen off the bus", re.I)),
    (
        "api-mismatch",
        re.compile(
            r"API mismatch: the client(?: '[^'\n]{0,200}' \(pid \d{1,10}\))? has the version ([\d.]{1,20}), "
            r"but this kernel module has the version ([\d.]{1,20})",
            re.I,
        ),
    ),
    ("no-adapter", re.compile(r"NVRM: No NVIDIA graphics adapter probed", re.I)),
    # old "NVRM: Xid (0000:01:00): 79, …" and new "NVRM: Xid (PCI:0000:01:00): 79, pid=…, …"
    ("xid", re.compile(r"NVRM: Xid \((?:PCI:)?([0-9a-f:.]{1,20})\): (\d{1,4})[^\n]{0,200}", re.I)),
)


# nvidia-smi's documented return codes, for output no pattern recognises (a translated or reworded message)
SMI_EXIT_CODES = {9: "no-driver", 15: "fallen-off"}


def classify_smi_failure(output: str, exit_code: int | None = None) -> str | None:
    for kind, pattern in SMI_FAILURES:
        if pattern.search(output):
            return kind
    return SMI_EXIT_CODES.get(exit_code) if exit_code is not None else None


def scan_kernel_log(text: str) -> list[tuple[str, str]]:
    """(kind, the matching text) for driver trouble in dmesg or syslog output."""
    text = text.replace("#012", "\n")  # rsyslog escapes the newlines of multi-line kernel messages
    # join the continuation lines of a multi-line NVRM message ("\n    NVRM: ...") into one line
    joined: list[str] = []
    for line in text.splitlines():  # line by line: no pattern runs across a long run of blanks
        body = line.lstrip(" \t")
        if joined and body.startswith("NVRM:"):
            joined[-1] = joined[-1].rstrip(" \t\r") + " " + body[5:].lstrip(" \t")
        else:
            joined.append(line)
    text = "\n".join(joined)
    found = []
    for kind, pattern in KERNEL_PATTERNS:
        for match in pattern.finditer(text):
            found.append((kind, " ".join(match.group(0).split())))
    return found


# --- toolkit, PyTorch, cuDNN -------------------------------------------------------------------


def parse_nvcc(text: str) -> str | None:
    match = re.search(r"release (\d+\.\d+), V(\d+\.\d+\.\d+)", text)
    return match.group(2) if match else None


CUDA_VERSION = re.compile(r"\d{1,3}(?:\.\d{1,6}){0,3}")


def parse_version_json(text: str) -> str | None:
    """The toolkit's version from /usr/local/cuda*/version.json: a dotted number, else None."""
    try:
        version = json.loads(text)["cuda"]["version"]
    except (ValueError, KeyError, TypeError, RecursionError):
        return None
    return version if isinstance(version, str) and CUDA_VERSION.fullmatch(version) else None


def parse_torch_version_py(text: str) -> dict[str, str | None]:
    def assigned(name: str) -> str | None:
        match = re.search(rf"^{name}\s*(?::\s*[^=]+)?=\s*(?:'([^']*)'|\"([^\"]*)\"|None)", text, re.M)
        if not match:
            return None
        return match.group(1) if match.group(1) is not None else match.group(2)

    return {"version": assigned("__version__"), "cuda": assigned("cuda"), "hip": assigned("hip")}


# --- compatibility -----------------------------------------------------------------------------


def vkey(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d{1,9}", version)[:4])


def _padded(version: str) -> tuple[int, ...]:
    key = vkey(version)
    return key + (0,) * (3 - len(key))


@cache
def compat_table() -> dict[str, Any]:
    return json.loads(resources.files(__package__ or __name__).joinpath("data/cuda-drivers.json").read_text())


def min_driver(cuda: str) -> tuple[str, str] | None:
    """(table row, minimum driver) for a CUDA version: the latest row not newer than it."""
    rows = sorted(compat_table()["toolkit_min_driver"].items(), key=lambda item: _padded(item[0]))
    best = None
    for row, driver in rows:
        if _padded(row) <= _padded(cuda):
            best = (row, driver)
    return best


def minor_floor(cuda: str) -> str | None:
    return compat_table()["minor_version_floor"].get(str(vkey(cuda)[0]))


@dataclass
class Compat:
    level: str  # "ok", "minor-compat", "incompatible", "unknown"
    needs_full: str | None  # driver for full support
    floor: str | None  # driver for minor-version compatibility
    message: str


def judge(cuda: str, driver: str, what: str) -> Compat:
    if not CUDA_VERSION.fullmatch(cuda) or not vkey(driver):  # "rocm", "", a build tag: nothing to judge by
        return Compat("unknown", None, None, _("{what}: CUDA version {cuda!r} is not a version number", what=what, cuda=cuda[:40]))
    row = min_driver(cuda)
    floor = minor_floor(cuda)
    if row is None:
        return Compat("unknown", None, floor, _("{what}: CUDA {cuda} is older than the compatibility table", what=what, cuda=cuda))
    full = row[1]
    if vkey(driver) >= vkey(full):
        return Compat("ok", full, floor, _("{what} needs driver >= {full}; found {driver}", what=what, full=full, driver=driver))
    if floor and vkey(driver) >= vkey(floor):
        return Compat(
            "minor-compat",
            full,
            floor,
            _(
                "{what} runs on driver {driver} only through minor-version compatibility (full support from {full})",
                what=what,
                driver=driver,
                full=full,
            ),
        )
    return Compat(
        "incompatible",
        full,
        floor,
        _(
            "{what} needs driver >= {needs}{minor} — found {driver}",
            what=what,
            needs=floor or full,
            minor=_(" (minor-version compatibility)") if floor else "",
            driver=driver,
        ),
    )


def build_for_driver(driver: str) -> str | None:
    """The newest PyTorch CUDA build a driver can run (at least through minor-version compatibility)."""
    floors = ((build, minor_floor(build)) for build in PYTORCH_CUDA_BUILDS)
    usable = [build for build, floor in floors if floor and vkey(driver) >= vkey(floor)]
    return usable[-1] if usable else None


def device_from_nvml(index: int, pynvml: Any, handle: Any) -> GpuDevice:
    def attempt(fn: Any, *args: Any) -> Any:
        try:
            return fn(*args)
        except Exception:  # NOT_SUPPORTED on integrated parts, FUNCTION_NOT_FOUND on old drivers
            return None

    name = attempt(pynvml.nvmlDeviceGetName, handle)
    memory = attempt(pynvml.nvmlDeviceGetMemoryInfo, handle)
    mig = attempt(pynvml.nvmlDeviceGetMigMode, handle)
    return GpuDevice(
        index=index,
        name=name.decode() if isinstance(name, bytes) else (name or "unknown NVIDIA GPU"),
        memory_mib=int(memory.total) >> 20 if memory is not None else None,
        mig_mode=("Enabled" if mig[0] else "Disabled") if mig else None,
        max_mem_clock_mhz=attempt(pynvml.nvmlDeviceGetMaxClockInfo, handle, getattr(pynvml, "NVML_CLOCK_MEM", 2)),
        bus_width_bits=attempt(pynvml.nvmlDeviceGetMemoryBusWidth, handle),
        uuid=attempt(pynvml.nvmlDeviceGetUUID, handle),
    )


def probe_nvml() -> DriverInfo | None:
    """NVML through nvidia-ml-py (the `gpu` extra), when it is installed and initialises."""
    try:
        import pynvml
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
    except Exception:
        return None
    try:
        driver = pynvml.nvmlSystemGetDriverVersion()
        driver = driver.decode() if isinstance(driver, bytes) else driver
        try:
            cuda_int = pynvml.nvmlSystemGetCudaDriverVersion()
            cuda = f"{cuda_int // 1000}.{cuda_int % 1000 // 10}"
        except Exception:
            cuda = None
        count = pynvml.nvmlDeviceGetCount()
        devices = tuple(device_from_nvml(index, pynvml, pynvml.nvmlDeviceGetHandleByIndex(index)) for index in range(count))
        return DriverInfo(driver, cuda, devices, count, "NVML")
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:
            pass
