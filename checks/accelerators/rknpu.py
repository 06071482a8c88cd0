"""Rockchip NPU (RK3588 and kin): the rknpu kernel driver's version, from debugfs, the module, the
kernel log or RKLLM's own log line."""

from __future__ import annotations

MAX_LINES = 100_000
# RKLLM's runtime warns below this ("Your rknpu driver version is too low, please upgrade to 0.9.7")
RKLLM_MINIMUM = (0, 9, 7)
# the driver airockchip/rknn-llm ships beside current RKLLM releases (rknpu_driver_0.9.8_20241009)
RKLLM_CURRENT = (0, 9, 8)
MARKERS = ("RKNPU driver: v", "rknpu driver version: ", "Initialized rknpu ")


def version_key(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in version.split(".") if p.isdecimal())


def _version_at(line: str, marker: str) -> str | None:
    at = line.find(marker)
    if at < 0:
        return None
    word = line[at + len(marker) :].split()[0].rstrip(",.") if line[at + len(marker) :].split() else ""
    parts = word.lstrip("v").split(".")
    return ".".join(parts) if 2 <= len(parts) <= 4 and all(p.isdecimal() and len(p) <= 4 for p in parts) else None


def find_version(text: str) -> tuple[str, int, str] | None:
    """(version, line number, line) of the first rknpu driver version the text states."""
    for number, line in enumerate(text.splitlines()[:MAX_LINES], start=1):
        line = line[:4096]
        for marker in MARKERS:
            if (version := _version_at(line, marker)) is not None:
                return version, number, line.strip()
    return None


def looks_like_rknpu(text: str) -> bool:
    head = text[:65536]
    return any(marker in head for marker in MARKERS)
