"""What the gpu check reads in a pasted text (decode-doctor analyze): nvidia-smi's table, -q, -q -x and
its error messages, and kernel logs. Every finding cites the line it came from."""

from __future__ import annotations

from typing import Any

from .nvidia import KERNEL_PATTERNS, SMI_FAILURES, DriverInfo, parse_smi_text, parse_smi_xml, scan_kernel_log
from .table import looks_like_table, parse_smi_table

# nvidia-smi failure kind → (code, message), as the live check words them
SMI_FAILURE_CODES = {
    "no-driver": ("GPU010", "nvidia-smi cannot communicate with the NVIDIA driver: the kernel module is not loaded."),
    "version-mismatch": (
        "GPU011",
        "Driver/library version mismatch: the driver was upgraded but the old kernel module is still loaded; reboot or reload it.",
    ),
    "no-devices": ("GPU012", "The NVIDIA driver is loaded but finds no GPU."),
    "unknown-error": ("GPU013", "nvidia-smi cannot get a handle for a GPU (Unknown Error): the driver lost it."),
    "fallen-off": ("GPU014", "nvidia-smi says a GPU is lost (fallen off the bus): it is gone until a reset or reboot."),
    "missing": ("GPU015", "nvidia-smi is not installed: the NVIDIA driver is missing."),
}
KERNEL_CODES = {"off-bus": "GPU014", "api-mismatch": "GPU011", "no-adapter": "GPU012"}
MAX_LINES = 200_000


def driver_info(text: str) -> tuple[DriverInfo, str] | None:
    """The driver and GPUs from whichever nvidia-smi report the text is, recognised by content."""
    head = text[:4096]
    try:
        if "<nvidia_smi_log" in head:
            return parse_smi_xml(text), "nvidia-smi -q -x"
        if looks_like_table(text):
            return parse_smi_table(text), "nvidia-smi table"
        if "NVSMI LOG" in head or "Attached GPUs" in head:
            return parse_smi_text(text), "nvidia-smi -q"
    except ValueError:
        return None
    return None


def line_events(lines: list[str]) -> list[tuple[int, str, str]]:
    """(line number, kind, text) for nvidia-smi failures and kernel-log events, line by line."""
    found = []
    for number, line in enumerate(lines[:MAX_LINES], start=1):
        if len(line) > 4096:
            line = line[:4096]
        for kind, pattern in SMI_FAILURES:
            if pattern.search(line):
                found.append((number, f"smi:{kind}", line.strip()))
                break
        else:
            for kind, pattern in KERNEL_PATTERNS:
                match = pattern.search(line)
                if match:
                    found.append((number, f"kernel:{kind}", " ".join(match.group(0).split())))
                    break
    # a message the kernel split over lines ("NVRM: API mismatch … but\nNVRM: this kernel module …")
    seen = {kind for _, kind, _ in found}
    for kind, text in scan_kernel_log("\n".join(lines[:MAX_LINES])):
        if f"kernel:{kind}" not in seen:
            seen.add(f"kernel:{kind}")
            number = next((i for i, line in enumerate(lines[:MAX_LINES], start=1) if text[:24] in " ".join(line.split())), 1)
            found.append((number, f"kernel:{kind}", text))
    return found


def evidence(source: str, number: int, text: str) -> dict[str, Any]:
    return {"source": source, "line": number, "text": text[:300]}
