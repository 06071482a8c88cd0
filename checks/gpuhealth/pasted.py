"""What every capture parser of this feature shares: the bounds a pasted text is read within, and the
few value forms nvidia-smi and lspci print the same way (bus ids, "N/A", numbers with units).

Every text is hostile: it is cut at MAX_TEXT_CHARS, each line at MAX_LINE_CHARS, and nothing here
uses a regular expression that can backtrack beyond a line.
"""

from __future__ import annotations

import re

MAX_TEXT_CHARS = 16 << 20  # a whole ticket with `nvidia-smi -q` of 16 GPUs is well under 1 MiB
MAX_LINE_CHARS = 64 << 10  # the all-fields --query-gpu CSV header is ~10 KiB
MAX_GPUS = 1024  # a fleet's worth in one paste; past it a text is not one host's capture
MAX_PROCESSES = 8192

# What nvidia-smi prints where a value is not there; a value like these is None, never 0 or False.
UNAVAILABLE = frozenset(
    {
        "",
        "n/a",
        "[n/a]",
        "na",
        "none",
        "[not supported]",
        "not supported",
        "[unknown error]",
        "unknown error",
        "[insufficient permissions]",
        "[requested functionality has been deprecated]",
        "[gpu is lost]",
        "err!",
        "-",
    }
)

_ANSI = re.compile(r"\x1b\[[0-9;]{0,16}[A-Za-z]")
_BUS_ID = re.compile(r"(?:([0-9A-Fa-f]{1,8}):)?([0-9A-Fa-f]{2}):([0-9A-Fa-f]{2})\.([0-7])")
_LEADING_NUMBER = re.compile(r"[-+]?\d{1,18}(?:\.\d{1,9})?")


def bounded_lines(text: str) -> list[str]:
    """The text's lines (any line ending), within MAX_TEXT_CHARS, each cut at MAX_LINE_CHARS."""
    return [line[:MAX_LINE_CHARS] for line in text[:MAX_TEXT_CHARS].splitlines()]


def strip_ansi(line: str) -> str:
    """Without terminal escapes (`topo -m` underlines its header when printed to a terminal)."""
    return _ANSI.sub("", line) if "\x1b" in line else line


def unavailable(value: str | None) -> bool:
    return value is None or value.strip().lower() in UNAVAILABLE


def bus_key(value: str | None) -> tuple[int, int, int, int] | None:
    """(domain, bus, device, function) of a PCI address in any form nvidia-smi, lspci or sysfs print
    ("00000000:17:00.0", "0000:17:00.0", "17:00.0"); None when it is not one."""
    match = _BUS_ID.fullmatch((value or "").strip())
    if match is None:
        return None
    domain, bus, device, function = match.groups()
    return int(domain or "0", 16), int(bus, 16), int(device, 16), int(function)


def bus_id(value: str | None) -> str | None:
    """A PCI address as GpuReading.bus_id holds it: nvidia-smi's 8-digit domain, lower-case hex
    ("00000000:17:00.0"), whatever form it came in; None when it is not one."""
    key = bus_key(value)
    if key is None:
        return None
    domain, bus, device, function = key
    return f"{domain:08x}:{bus:02x}:{device:02x}.{function}"


def leading_number(value: str | None) -> float | None:
    """The number a value starts with ("700.00 W", "81559 MiB", "100 %", "59C"); None for "N/A"."""
    if unavailable(value):
        return None
    match = _LEADING_NUMBER.match((value or "").strip())
    return float(match.group()) if match else None


def small_int(word: str) -> int | None:
    """A plain count or index ("0", "21312"); None for anything else (superscript digits, 10+ digits)."""
    return int(word) if word.isascii() and word.isdigit() and len(word) <= 9 else None


def leading_int(value: str | None) -> int | None:
    number = leading_number(value)
    return int(number) if number is not None else None
